"""Real parallelism: streams overlap, the GIL is released while C++ waits, and launched Python
callables hold the GIL only while they run. Every test here fails (rendezvous time-out or hang
detector) if the work ran one item after another or a wait kept the GIL."""

import threading

import numpy as np
import pytest

import streamrt
from helpers import RENDEZVOUS_S, Recorder


@pytest.mark.parametrize("n", [2, 4, 8])
def test_two_numpy_callables_on_two_streams_overlap(workers, n):
    # Each callable does numpy work, then must meet the other at a barrier while both are still
    # running: run one after the other, the first would wait alone until the time-out
    # (BrokenBarrierError, re-raised by synchronize()).
    workers(n)
    barrier = threading.Barrier(2, timeout=RENDEZVOUS_S)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((256, 256))
    results = {}

    def job(name):
        x = a
        for _ in range(5):
            x = np.tanh(x @ a)  # numpy releases the GIL in its kernels
        barrier.wait()  # both jobs are running at the same time
        x = x @ a
        barrier.wait()
        results[name] = float(np.abs(x).sum())

    s1, s2 = streamrt.Stream(), streamrt.Stream()
    s1.launch(job, "one")
    s2.launch(job, "two")
    s1.synchronize()
    s2.synchronize()
    assert results["one"] == results["two"]


def test_many_streams_all_run_concurrently(workers):
    workers(4)
    barrier = threading.Barrier(4, timeout=RENDEZVOUS_S)
    streams = [streamrt.Stream() for _ in range(4)]
    rec = Recorder()
    for i, s in enumerate(streams):
        s.launch(lambda i=i: rec((i, barrier.wait())))
    streamrt.synchronize()
    assert sorted(i for i, _ in rec.items) == [0, 1, 2, 3]


def _run_while_host_waits(wait):
    """`wait(stream, event)` blocks the host until work on `stream` is done. That work waits for a
    flag set by another Python thread, which needs the GIL: if `wait` kept the GIL, the flag could
    never be set and the work would fail after the rendezvous time-out."""
    s = streamrt.Stream()
    flag = threading.Event()
    setter_ran = threading.Event()

    def must_see_flag():
        assert flag.wait(RENDEZVOUS_S), "the host wait kept the GIL: the setter thread never ran"

    s.launch(must_see_flag)
    e = s.record_event()

    def setter():
        setter_ran.set()
        flag.set()

    # The launched item has to start first, so the setter starts only once the host is waiting.
    t = threading.Timer(0.05, setter)
    t.start()
    wait(s, e)
    t.join()
    assert setter_ran.is_set()
    s.synchronize()


@pytest.mark.parametrize(
    "wait",
    [
        lambda s, e: s.synchronize(),
        lambda s, e: e.synchronize(),
        lambda s, e: streamrt.wait_all([e]),
        lambda s, e: e.wait_for(RENDEZVOUS_S),
        lambda s, e: streamrt.synchronize(),
        lambda s, e: streamrt.cpu.synchronize(),
    ],
    ids=["Stream.synchronize", "Event.synchronize", "wait_all", "Event.wait_for",
         "synchronize", "cpu.synchronize"],
)
def test_host_waits_release_the_gil(wait):
    _run_while_host_waits(wait)


def test_launched_callable_holds_the_gil_only_while_it_runs(workers):
    # While a Python callable waits (GIL released inside threading.Event.wait), another Python
    # callable on another stream and the main thread both run Python code.
    workers(2)
    started = threading.Event()
    release = threading.Event()
    rec = Recorder()

    def waiter():
        started.set()
        assert release.wait(RENDEZVOUS_S)
        rec("waiter done")

    def runner():
        total = sum(range(10000))  # pure Python: needs the GIL
        rec(("runner", total))
        release.set()

    a, b = streamrt.Stream(), streamrt.Stream()
    a.launch(waiter)
    assert started.wait(RENDEZVOUS_S)
    b.launch(runner)
    streamrt.synchronize()
    assert rec.items == [("runner", 49995000), "waiter done"]


def test_python_threads_launching_concurrently(workers):
    workers(4)
    streams = [streamrt.Stream() for _ in range(4)]
    counts = [[] for _ in streams]

    def producer(k):
        for i in range(300):
            streams[k].launch(counts[k].append, i)
            if i % 100 == 0:
                streams[(k + 1) % 4].synchronize()

    threads = [threading.Thread(target=producer, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    streamrt.synchronize()
    assert counts == [list(range(300))] * 4


def test_nested_wait_inside_launched_work(workers):
    # Work on stream a waits (GIL released) for stream b, whose work is Python too.
    workers(1)  # with one worker the waiting worker must help, not block
    a, b = streamrt.Stream(), streamrt.Stream()
    rec = Recorder()
    b_gate = threading.Event()

    def outer():
        b.launch(rec, "b work")
        b.launch(b_gate.set)
        b.synchronize()
        rec("outer saw b done")

    a.launch(outer)
    a.synchronize()
    assert b_gate.is_set()
    assert rec.items == ["b work", "outer saw b done"]
