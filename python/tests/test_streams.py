"""Streams: creation, identity, the current stream, contexts, launch order, cross-stream waits."""

import os
import threading

import pytest

import streamrt
from helpers import RENDEZVOUS_S, WORKER_COUNTS, Recorder


def test_stream_properties_and_repr():
    s = streamrt.Stream()
    assert s.device == streamrt.Device("cpu:0")
    assert s.device == "cpu"
    assert str(s.device) == "cpu:0"
    assert s.priority == 0
    assert s.id > 0
    assert repr(s).startswith("streamrt.Stream(device='cpu:0', id=")
    assert "idle" in repr(s)
    least, greatest = streamrt.Stream.priority_range()
    assert greatest <= 0 <= least
    urgent = streamrt.Stream("cpu", priority=greatest)
    assert urgent.priority == greatest


def test_stream_repr_shows_busy_while_work_runs():
    gate = threading.Event()
    s = streamrt.Stream()
    s.launch(gate.wait, RENDEZVOUS_S)
    assert "busy" in repr(s)
    assert not s.query()
    gate.set()
    s.synchronize()
    assert s.query()
    assert "idle" in repr(s)


def test_stream_identity_equality_and_hash():
    a = streamrt.Stream()
    b = streamrt.Stream()
    assert a != b
    assert a.id != b.id
    with a:
        same = streamrt.current_stream()
    assert same == a and same is not a
    assert hash(same) == hash(a)
    assert len({a, b, same}) == 2
    assert streamrt.default_stream() == streamrt.default_stream()
    assert streamrt.default_stream().id == 0
    assert (a == "cpu") is False


def test_bad_stream_arguments():
    with pytest.raises(ValueError, match="invalid device string 'gpu'"):
        streamrt.Stream("gpu")
    with pytest.raises(TypeError, match="expected a device such as 'cpu'.*got float"):
        streamrt.Stream(3.0)
    # An int is a device index, as in torch; this one does not exist.
    with pytest.raises(streamrt.Error, match="cpu:3 does not exist"):
        streamrt.Stream(3)
    with pytest.raises(ValueError, match="out of range"):
        streamrt.Stream(priority=1000)
    # A well-formed device without a backend is a runtime condition, not a bad argument.
    with pytest.raises(streamrt.Error, match="no backend for device type 'cuda'"):
        streamrt.Stream("cuda")
    with pytest.raises(TypeError, match="fn must be callable, got int"):
        streamrt.Stream().launch(42)
    with pytest.raises(TypeError):
        streamrt.Stream().wait_event("not an event")
    with pytest.raises(TypeError, match="expected a streamrt.Stream or None, got str"):
        streamrt.StreamContext("cpu")
    with pytest.raises(TypeError, match="expected a streamrt.Stream, got NoneType"):
        streamrt.set_stream(None)


def test_device_object():
    d = streamrt.Device("cpu:0")
    assert d.type == "cpu" and d.index == 0
    assert d == streamrt.Device("cpu", 0) == "cpu"
    assert repr(d) == "streamrt.Device(type='cpu', index=0)"
    assert hash(d) == hash(streamrt.Device("cpu"))
    with pytest.raises(ValueError, match="invalid device string 'cpu:x'"):
        streamrt.Device("cpu:x")
    with pytest.raises(ValueError, match="index=-1 is out of range; it must be from 0 to"):
        streamrt.Device("cpu", -1)


def test_launch_runs_in_order_with_args(workers):
    for n in WORKER_COUNTS:
        workers(n)
        s = streamrt.Stream()
        rec = Recorder()
        for i in range(200):
            s.launch(rec, i)
        s.launch(lambda a, b=0: rec((a, b)), "x", b=7)
        s.synchronize()
        assert rec.items == list(range(200)) + [("x", 7)]


def test_launched_work_sees_its_stream_as_current():
    s = streamrt.Stream()
    seen = []
    s.launch(lambda: seen.append(streamrt.current_stream()))
    s.synchronize()
    assert seen == [s]
    assert streamrt.current_stream() == streamrt.default_stream()


def test_with_stream_and_stream_context_nest_and_restore():
    a, b = streamrt.Stream(), streamrt.Stream()
    assert streamrt.current_stream() == streamrt.default_stream()
    with a as entered:
        assert entered == a
        assert streamrt.current_stream() == a
        with streamrt.StreamContext(b):
            assert streamrt.current_stream() == b
            with streamrt.StreamContext(None):  # no-op, as torch
                assert streamrt.current_stream() == b
            with streamrt.stream(a):
                assert streamrt.current_stream() == a
            assert streamrt.current_stream() == b
        assert streamrt.current_stream() == a
    assert streamrt.current_stream() == streamrt.default_stream()


def test_context_restores_on_exception():
    a = streamrt.Stream()
    with pytest.raises(ZeroDivisionError):
        with streamrt.StreamContext(a):
            1 / 0
    assert streamrt.current_stream() == streamrt.default_stream()


def test_stream_context_repr_and_property():
    a = streamrt.Stream()
    ctx = streamrt.StreamContext(a)
    assert ctx.stream == a
    assert repr(ctx).startswith("streamrt.StreamContext(streamrt.Stream(")
    assert repr(streamrt.StreamContext(None)) == "streamrt.StreamContext(None)"


def test_current_stream_is_per_thread():
    a = streamrt.Stream()
    other = []
    with a:
        t = threading.Thread(target=lambda: other.append(streamrt.current_stream()))
        t.start()
        t.join()
        assert streamrt.current_stream() == a
    assert other == [streamrt.default_stream()]


def test_set_stream():
    a = streamrt.Stream()
    try:
        streamrt.set_stream(a)
        assert streamrt.current_stream() == a
    finally:
        streamrt.set_stream(streamrt.default_stream())
    assert streamrt.current_stream() == streamrt.default_stream()


def held_producer(item):
    """A producer stream whose first item waits until the gate is set, then records `item`; a
    consumer stream; the gate; the Recorder."""
    producer, consumer = streamrt.Stream(), streamrt.Stream()
    gate = threading.Event()
    rec = Recorder()

    def produce():
        assert gate.wait(RENDEZVOUS_S)
        rec(item)

    producer.launch(produce)
    return producer, consumer, gate, rec


@pytest.mark.parametrize("n", WORKER_COUNTS)
def test_wait_stream_orders_work_across_streams(workers, n):
    # The consumer's item must run after the producer's item, although the producer is held up
    # until after the consumer's item was launched.
    workers(n)
    producer, consumer, gate, rec = held_producer("produced")
    consumer.wait_stream(producer)
    consumer.launch(rec, "consumed")
    assert not consumer.query()  # held back by the wait, host not blocked
    gate.set()
    consumer.synchronize()
    assert rec.items == ["produced", "consumed"]


@pytest.mark.parametrize("n", WORKER_COUNTS)
def test_wait_event_uses_the_record_made_at_the_call(workers, n):
    workers(n)
    producer, consumer, gate, rec = held_producer("first")
    e = producer.record_event()
    consumer.wait_event(e)
    consumer.launch(rec, "after-first")
    gate.set()
    consumer.synchronize()
    producer.synchronize()
    assert rec.items == ["first", "after-first"]


def test_record_event_returns_the_given_event():
    s = streamrt.Stream()
    e = streamrt.Event()
    assert s.record_event(e) is e
    assert isinstance(s.record_event(), streamrt.Event)
    with pytest.raises(TypeError, match="expected a streamrt.Event or None"):
        s.record_event(3)


def test_device_synchronize_waits_for_every_stream(workers):
    workers(2)
    rec = Recorder()
    streams = [streamrt.Stream() for _ in range(4)]
    for i, s in enumerate(streams):
        for j in range(20):
            s.launch(rec, (i, j))
    streamrt.synchronize()
    assert sorted(rec.items) == [(i, j) for i in range(4) for j in range(20)]
    assert all(s.query() for s in streams)
    streamrt.synchronize("cpu")
    with pytest.raises(ValueError):
        streamrt.synchronize("tpu")


def test_set_num_threads_rejects_bad_counts():
    with pytest.raises(ValueError, match="out of range; it must be from 1 to 4096"):
        streamrt.set_num_threads(0)
    assert streamrt.get_num_threads() >= 1


def test_worker_spin_set_read_back_and_bad_values():
    saved = streamrt.get_worker_spin()
    try:
        for bad in (-1, 1_000_001, float("nan")):
            with pytest.raises(ValueError, match="from 0 to 1000000"):
                streamrt.set_worker_spin(bad)
        assert streamrt.get_worker_spin() == saved
        streamrt.set_worker_spin(0)
        assert streamrt.get_worker_spin() == 0
        s = streamrt.Stream()
        hits = []
        for i in range(20):
            s.launch(lambda i=i: hits.append(i))
        s.synchronize()
        assert hits == list(range(20))
    finally:
        streamrt.set_worker_spin(saved)
    assert streamrt.get_worker_spin() == saved


def test_worker_batch_reaches_the_workers_and_reads_back():
    saved = streamrt.get_worker_batch()

    def policy_on_a_worker():
        # The host waits on a threading.Event, not on the stream, so it runs no item itself.
        seen = []
        done = threading.Event()
        s = streamrt.Stream()
        s.launch(lambda: (seen.append(os.sched_getscheduler(0)), done.set()))
        assert done.wait(RENDEZVOUS_S)
        s.synchronize()
        return seen[0]

    try:
        for on in (True, False, True):
            streamrt.set_worker_batch(on)
            assert streamrt.get_worker_batch() is on
            assert policy_on_a_worker() == (os.SCHED_BATCH if on else os.SCHED_OTHER)
        assert os.sched_getscheduler(0) == os.SCHED_OTHER  # this (host) thread is unchanged
    finally:
        streamrt.set_worker_batch(saved)
    assert streamrt.get_worker_batch() is saved


def _python_thread_states():
    """How many Python thread states the interpreter holds (the C API's own list)."""
    import ctypes

    api = ctypes.pythonapi
    api.PyInterpreterState_Get.restype = ctypes.c_void_p
    api.PyInterpreterState_ThreadHead.restype = ctypes.c_void_p
    api.PyInterpreterState_ThreadHead.argtypes = [ctypes.c_void_p]
    api.PyThreadState_Next.restype = ctypes.c_void_p
    api.PyThreadState_Next.argtypes = [ctypes.c_void_p]
    count, ts = 0, api.PyInterpreterState_ThreadHead(api.PyInterpreterState_Get())
    while ts:
        count, ts = count + 1, api.PyThreadState_Next(ts)
    return count


def test_workers_keep_one_python_thread_state_and_delete_it_when_they_exit(workers):
    # A worker keeps the thread state of its first Python callable (making one per callable
    # cost an allocation each time) and deletes it when the pool shrinks: no leak, no hang.
    workers(1)
    base = _python_thread_states()
    workers(4)
    barrier = threading.Barrier(4, timeout=RENDEZVOUS_S)
    idents = set()
    streams = [streamrt.Stream() for _ in range(4)]
    for s in streams:  # the barrier proves the four callables ran on four different workers
        s.launch(lambda: idents.add(threading.get_ident()) or barrier.wait())
    streamrt.synchronize()
    assert len(idents) == 4
    grown = _python_thread_states()
    for s in streams:
        for _ in range(50):
            s.launch(lambda: None)
    streamrt.synchronize()
    assert _python_thread_states() == grown  # the same states were used again
    workers(1)
    assert _python_thread_states() <= grown - 3  # the three workers that left deleted theirs
    assert _python_thread_states() <= base + 1
    streams[0].launch(lambda: idents.add(threading.get_ident()))
    streams[0].synchronize()
