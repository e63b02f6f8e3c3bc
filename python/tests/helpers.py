"""Constants and small helpers shared by the tests (importable: pytest puts this folder on
sys.path)."""

import contextlib
import os
import subprocess
import sys
import textwrap
import threading
import time

import streamrt

# Generous rendezvous time-out: only reached when work that must overlap ran serially (or
# something hung); never a performance bound.
RENDEZVOUS_S = 60

# Worker counts that concurrency-relevant tests run at.
WORKER_COUNTS = [1, 2, 4, 8]


def run_python(body, timeout, env=None):
    """Runs `body` (dedented) in a fresh interpreter of this Python with this environment plus
    `env`; the finished process (its output captured as text). A hang past `timeout` seconds
    raises subprocess.TimeoutExpired."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(body)], capture_output=True,
                          text=True, timeout=timeout, env=dict(os.environ, **(env or {})))


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


# --- The MPS article's steps, shared by its two mirrors (test_seeds.py on streamrt tensors,
# test_seeds_torch.py on torch's), which each check the results their own way.


def product_then_wait(a, b):
    """A product, an event recorded after it, the event waited for."""
    output = streamrt.matmul(a, b)
    event = streamrt.Event()
    event.record()
    event.synchronize()
    return output, event


def polled_product(a, b):
    """A product on a stream, an event recorded after it and polled until complete (the
    article's `while not event.poll()`; the rendezvous time-out is the only bound). Returns the
    product, the event and the number of polls."""
    s = streamrt.cpu.Stream()
    with streamrt.cpu.StreamContext(s):
        output = streamrt.matmul(a, b)
    event = streamrt.Event()
    event.record(s)
    polls = 0
    deadline = time.monotonic() + RENDEZVOUS_S
    while not event.query():
        polls += 1  # "do other work"
        assert time.monotonic() < deadline
    return output, event, polls


def ops_under_one_event(a, b):
    """A product and a relu of it on a stream, one event recorded after both and waited for:
    "an event can be associated with several ops"."""
    s = streamrt.cpu.Stream()
    event = streamrt.Event()
    with streamrt.cpu.StreamContext(s):
        first = streamrt.matmul(a, b)
        second = streamrt.relu(first)
        event.record()
    event.synchronize()
    return first, second


def products_then_wait_all(pairs):
    """One product per (a, b) pair, each on its own stream with an event recorded after it, then
    all the events waited for at once (the article's torch.mps.wait_all). Returns the products
    and the events."""
    outputs, events = [], []
    for a, b in pairs:
        s, event = streamrt.cpu.Stream(), streamrt.Event()
        with streamrt.cpu.StreamContext(s):
            outputs.append(streamrt.matmul(a, b))
            event.record()
        events.append(event)
    streamrt.wait_all(events)
    return outputs, events


def product_signalling(a, b, event):
    """A product and an event recorded after it whose completion callback calls event.set()
    (a threading.Event, or the article's own class): the article's add_completion_callback,
    which tensors do not have. Returns the product."""
    output = streamrt.matmul(a, b)
    marker = streamrt.Event()
    marker.record()
    marker.add_done_callback(lambda ev: event.set())
    return output
