"""streamrt.torch.CPUGraph and graph(): capture the torch ops a block enqueues on a stream, replay
them as one work item (docs/torch.md, "Graphs: capture and replay")."""

from . import _streamrt as _C
from . import _torch_submit as _submit
from .graphs import _enter_capture


def _native_graph():
    native = _submit.native()
    if native is None or not hasattr(native, "_CapturedGraph"):
        raise RuntimeError(
            "streamrt.torch.CPUGraph needs streamrt's native torch module, which is not usable "
            f"here: {_submit.unavailable('runner')}"
        )
    return native


class CPUGraph:
    """The torch ops a block enqueued on a stream, to be enqueued again by ``replay()`` as one
    work item (as ``torch.cuda.CUDAGraph``; capture with ``streamrt.torch.graph(g)``).

    Unlike CUDA's capture, the captured block also runs as it is captured: its results are there
    after the block, as without the capture. A replay runs the same ops on the same tensors
    (arguments, outputs and the block's temporaries, which the graph keeps): change an input's
    values in place (``static_in.copy_(new)``) and read the outputs the block returned. A replay
    is tracked as one op that reads what the block read and writes what it wrote, so it runs
    after the queued work it depends on, and host reads of its outputs wait for it."""

    def __init__(self):
        self._graph = _native_graph()._CapturedGraph()
        self._stream = None

    def capture_begin(self):
        """Starts recording this thread's ops on its current stream (inside a stream context; use
        ``streamrt.torch.graph``, which enters one)."""
        self._graph.begin()
        self._stream = _C.current_stream()

    def capture_end(self):
        """Ends the capture. RuntimeError when it recorded no op."""
        self._graph.end()

    def replay(self):
        """Enqueues the captured ops as one work item on this thread's current stream inside a
        stream context, else on the stream they were captured on. Returns at once."""
        from . import torch as _srt

        if not _srt.is_installed():
            raise RuntimeError(
                "streamrt.torch.CPUGraph.replay: streamrt.torch is not installed (call "
                "streamrt.torch.install() again)"
            )
        native = _native_graph()
        if native._inside_stream_context() or self._stream is None:
            self._graph.replay()
            return
        with _srt.StreamContext(self._stream):
            self._graph.replay()

    def reset(self):
        """Drops the capture (queued replays still run); the graph can capture again."""
        self._graph.reset()
        self._stream = None

    @property
    def num_ops(self):
        """How many ops were captured."""
        return self._graph.num_ops

    def _abort(self):
        self._graph.abort()
        self._stream = None


class graph:
    """``with streamrt.torch.graph(g, stream=None):`` captures the block's torch ops into the
    CPUGraph ``g``, on ``stream`` (a new stream when None), as ``torch.cuda.graph`` does. Every op
    of the block must be stream work on that stream: an op that reads data on the host, or one
    not yet run with its argument layouts, raises RuntimeError (run the block once and
    synchronize first: a warm-up). When the block raises, ``g`` stays empty."""

    def __init__(self, cpu_graph, stream=None):
        if not isinstance(cpu_graph, CPUGraph):
            raise TypeError(
                "streamrt.torch.graph: expected a streamrt.torch.CPUGraph, got "
                f"{type(cpu_graph).__module__}.{type(cpu_graph).__name__}"
            )
        self.cpu_graph = cpu_graph
        self.stream = stream
        self._context = None

    def __enter__(self):
        from . import torch as _srt

        if not _srt.is_installed():
            raise RuntimeError("streamrt.torch.graph: call streamrt.torch.install() first")
        if self.stream is None:
            self.stream = _srt.Stream()
        self._context = _enter_capture(self.stream, self.cpu_graph.capture_begin)
        return self

    def __exit__(self, exc_type, exc, tb):
        try:
            if exc_type is None:
                self.cpu_graph.capture_end()
            else:
                self.cpu_graph._abort()
        finally:
            self._context.__exit__(exc_type, exc, tb)
        return False
