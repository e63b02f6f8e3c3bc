"""Capture and replay (docs/graphs.md): ``streamrt.graph`` is ``torch.cuda.graph`` for streamrt.

    g = streamrt.Graph()
    with streamrt.graph(g):
        out.copy_(streamrt.matmul(x, w) + b)   # recorded, not run
    for batch in batches:
        x.copy_(batch)                          # new inputs go into the captured tensors
        g.replay()                              # reruns the captured work into the same tensors
"""

from . import _streamrt

_capture_stream = None


def _default_capture_stream():
    # One side stream for every capture that names none (torch uses a private side stream too,
    # so that the capture never touches the default stream's pending work).
    global _capture_stream
    if _capture_stream is None:
        _capture_stream = _streamrt.Stream()
    return _capture_stream


def _enter_capture(stream, begin):
    """Makes `stream` current on this thread and calls begin() (a capture's start); leaves the
    stream's context again when begin() raises. The context entered, for the capture's end."""
    context = _streamrt.StreamContext(stream)
    context.__enter__()
    try:
        begin()
    except BaseException:
        context.__exit__(None, None, None)
        raise
    return context


class graph:
    """Context manager that captures the work issued in its body into ``cuda_graph``.

    Like ``torch.cuda.graph``: all devices are synchronized first (a capture cannot depend on
    pending work outside it), the capture runs on ``stream`` (a private side stream when None),
    made current for the body, and ends when the body does; the graph is then instantiated and
    ``cuda_graph.replay()`` reruns it. ``capture_error_mode`` is "global", "thread_local" or
    "relaxed" (what each forbids: docs/graphs.md). An exception in the body ends the capture
    without adding a second error.
    """

    def __init__(self, cuda_graph, pool=None, stream=None, capture_error_mode="global"):
        if not isinstance(cuda_graph, _streamrt.Graph):
            raise TypeError(
                "streamrt.graph: expected a streamrt.Graph, got " + type(cuda_graph).__name__
            )
        if pool is not None:
            raise ValueError(
                "streamrt.graph(pool=...): memory pools are not shared between graphs here; "
                "each graph owns the tensors allocated during its capture (pass pool=None)"
            )
        self.cuda_graph = cuda_graph
        self.stream = stream if stream is not None else _default_capture_stream()
        self.capture_error_mode = capture_error_mode
        self._context = None

    def __enter__(self):
        _streamrt.synchronize()
        self._context = _enter_capture(
            self.stream,
            lambda: self.cuda_graph.capture_begin(
                self.stream, capture_error_mode=self.capture_error_mode),
        )
        return self

    def __exit__(self, exc_type, exc, tb):
        try:
            if exc_type is None:
                self.cuda_graph.capture_end()
            else:
                try:
                    self.cuda_graph.capture_end()
                except _streamrt.Error:
                    pass  # the body's exception is the one to report
        finally:
            self._context.__exit__(None, None, None)
        return False
