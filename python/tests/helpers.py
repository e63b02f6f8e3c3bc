"""Constants and small helpers shared by the tests (importable: pytest puts this folder on
sys.path)."""

import contextlib
import threading
import time

import streamrt

# Generous rendezvous time-out: only reached when work that must overlap ran serially (or
# something hung); never a performance bound.
RENDEZVOUS_S = 60

# Worker counts that concurrency-relevant tests run at.
WORKER_COUNTS = [1, 2, 4, 8]


class Recorder:
    """A thread-safe list of what happened, in order."""

    def __init__(self):
        self._lock = threading.Lock()
        self.items = []

    def __call__(self, item):
        with self._lock:
            self.items.append(item)


def held_stream():
    """A stream whose work is held until the returned gate (a threading.Event) is set."""
    s = streamrt.Stream()
    gate = threading.Event()
    s.launch(lambda: gate.wait(RENDEZVOUS_S))
    return s, gate


def nested_capture(s):
    """Begins a capture on `s` inside another capture there, which streamrt refuses; the outer
    capture is ended whatever happens."""
    outer = streamrt.Graph()
    outer.capture_begin(s)
    try:
        streamrt.Graph().capture_begin(s)
    finally:
        outer.capture_end()


def timed(work, stream=None):
    """The seed articles' timing pattern: timing events recorded before and after work() (in a
    context on `stream` when one is given), then the end event waited for. Returns work()'s result
    and the elapsed milliseconds between the two events."""
    start, end = streamrt.Event(enable_timing=True), streamrt.Event(enable_timing=True)
    with streamrt.cpu.StreamContext(stream) if stream is not None else contextlib.nullcontext():
        start.record()
        out = work()
        end.record()
    end.synchronize()
    return out, start.elapsed_time(end)


class ArticleEvent:
    """The MPS article's custom event class: set() by a completion callback, wait() polls (the
    article's "do other work"), with the rendezvous time-out as the only bound."""

    def __init__(self):
        self._completed = False

    def set(self):
        self._completed = True

    def wait(self):
        deadline = time.monotonic() + RENDEZVOUS_S
        while not self._completed:
            assert time.monotonic() < deadline  # "do other work"
            time.sleep(0)  # let the callback's worker take the GIL
