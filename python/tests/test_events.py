"""Events: record, query/completed, synchronize, wait_for, stream-side wait, timing, reset,
wait_all, and their error messages."""

import threading
import time

import pytest

import streamrt
from helpers import held_stream, Recorder, RENDEZVOUS_S


def test_record_query_completed_synchronize():
    s, gate = held_stream()
    e = streamrt.Event()
    assert e.state == "not_recorded"
    assert e.device is None
    assert not e.query() and not e.completed
    e.record(s)
    assert e.state == "pending"
    assert e.device == "cpu:0"
    assert not e.query() and not e.completed
    assert "pending" in repr(e)
    gate.set()
    e.synchronize()
    assert e.query() and e.completed
    assert e.state == "complete"
    assert repr(e) == "streamrt.Event(state='complete', device='cpu:0')"


def test_record_defaults_to_the_current_stream():
    s, gate = held_stream()
    e = streamrt.Event()
    with streamrt.StreamContext(s):
        e.record()
    assert not e.query()  # recorded behind the held work on s, not on the default stream
    gate.set()
    s.synchronize()
    assert e.query()


def test_timeout_arguments_return_false_then_true_and_change_nothing():
    # Stream.synchronize, Event.synchronize and wait_all take timeout= (seconds): False when the
    # work is not done by then, True once it is. The held item is Python work: the waits must
    # release the GIL for it to finish.
    s, gate = held_stream()
    e = s.record_event()
    other = streamrt.Stream()
    done = other.record_event()
    assert s.synchronize(timeout=0.01) is False
    assert e.synchronize(timeout=0) is False
    assert streamrt.wait_all([done, e], timeout=0.01) is False
    assert not e.completed and s.pending() == 1
    gate.set()
    assert s.synchronize(timeout=RENDEZVOUS_S) is True
    assert e.synchronize(timeout=RENDEZVOUS_S) is True
    assert streamrt.wait_all([done, e], timeout=RENDEZVOUS_S) is True
    assert s.synchronize() is None and e.synchronize() is None
    assert streamrt.wait_all([e]) is None


def test_timed_out_waits_leave_the_failure_for_a_later_wait():
    s = streamrt.Stream()
    gate = threading.Event()

    def fail():
        gate.wait(RENDEZVOUS_S)
        raise KeyError("late")

    s.launch(fail)
    e = s.record_event()
    assert s.synchronize(timeout=0.01) is False
    assert streamrt.wait_all([e], timeout=0.01) is False
    gate.set()
    with pytest.raises(KeyError, match="late"):
        e.synchronize(timeout=RENDEZVOUS_S)  # reported (rule 10): the stream has nothing left
    assert s.synchronize(timeout=RENDEZVOUS_S) is True


@pytest.mark.parametrize("bad", [-1, float("nan"), float("inf")])
def test_bad_timeouts_are_value_errors(bad):
    s = streamrt.Stream()
    e = s.record_event()
    with pytest.raises(ValueError, match="Stream.synchronize: timeout must be a finite number"):
        s.synchronize(timeout=bad)
    with pytest.raises(ValueError, match="Event.synchronize: timeout must be a finite number"):
        e.synchronize(timeout=bad)
    with pytest.raises(ValueError, match="wait_all: timeout must be a finite number"):
        streamrt.wait_all([e], timeout=bad)
    with pytest.raises(TypeError, match="timeout must be a number of seconds, got str"):
        s.synchronize(timeout="1")


def test_wait_for_times_out_then_succeeds():
    s, gate = held_stream()
    e = s.record_event()
    assert e.wait_for(0.01) is False
    assert not e.completed
    gate.set()
    assert e.wait_for(RENDEZVOUS_S) is True
    with pytest.raises(ValueError, match="timeout_s must be a finite number >= 0"):
        e.wait_for(-1)


def test_event_wait_is_stream_side_and_returns_at_once():
    producer, gate = held_stream()
    consumer = streamrt.Stream()
    e = producer.record_event()
    rec = Recorder()
    e.wait(consumer)  # returns at once although e is pending
    consumer.launch(rec, "consumer ran")
    with streamrt.StreamContext(consumer):
        e.wait()  # current stream: same effect, also returns at once
    time.sleep(0.05)
    assert rec.items == [] and not consumer.query()
    gate.set()
    consumer.synchronize()
    assert rec.items == ["consumer ran"]


def test_poll_loop_as_in_the_seed():
    s, gate = held_stream()
    e = s.record_event()
    polls = 0
    threading.Timer(0.05, gate.set).start()
    deadline = time.monotonic() + RENDEZVOUS_S
    while not e.query():  # the seed's `while not event.poll(): ...`
        polls += 1
        assert time.monotonic() < deadline
        time.sleep(0.001)
    assert polls > 0 and e.completed


def test_reset_returns_to_not_recorded():
    s = streamrt.Stream()
    e = s.record_event()
    e.synchronize()
    assert e.completed
    e.reset()
    assert e.completed is False
    assert e.state == "not_recorded" and e.device is None
    with pytest.raises(streamrt.Error, match="never recorded"):
        e.synchronize()
    e.record(s)  # usable again
    e.synchronize()
    assert e.completed


def test_elapsed_time_measures_the_work_between_records():
    s = streamrt.Stream()
    start = streamrt.Event(enable_timing=True)
    end = streamrt.Event(enable_timing=True)
    start.record(s)
    s.launch(time.sleep, 0.05)
    end.record(s)
    end.synchronize()
    ms = start.elapsed_time(end)
    assert isinstance(ms, float)
    assert ms >= 49.0  # the stream slept 50 ms between the records (a lower bound only)
    assert start.enable_timing and not start.blocking


def test_elapsed_time_errors_name_the_problem():
    s = streamrt.Stream()
    plain_a, plain_b = s.record_event(), s.record_event()
    with pytest.raises(streamrt.Error, match="enable_timing"):
        plain_a.elapsed_time(plain_b)
    a = streamrt.Event(enable_timing=True)
    b = streamrt.Event(enable_timing=True)
    with pytest.raises(streamrt.Error, match="recorded"):
        a.elapsed_time(b)
    held, gate = held_stream()
    a.record(held)
    b.record(held)
    with pytest.raises(streamrt.Error, match="completed"):
        a.elapsed_time(b)
    gate.set()
    b.synchronize()
    assert a.elapsed_time(b) >= 0.0
    # The seed passes the stream; say what to pass instead.
    with pytest.raises(TypeError, match="takes the end Event, not a Stream"):
        a.elapsed_time(held)


def test_errors_are_runtime_errors():
    assert issubclass(streamrt.Error, RuntimeError)
    assert issubclass(streamrt.Cancelled, streamrt.Error)
    with pytest.raises(RuntimeError, match="never recorded"):
        streamrt.Event().synchronize()
    with pytest.raises(streamrt.Error, match="never recorded"):
        streamrt.Event().wait_for(1.0)
    with pytest.raises(streamrt.Error, match="never recorded"):
        streamrt.Stream().wait_event(streamrt.Event())
    with pytest.raises(TypeError, match="expected a streamrt.Stream or None, got list.*record\\(\\) "
                                        "marks the current end"):
        streamrt.Event().record([1, 2])


def test_wait_all_waits_for_every_event():
    streams = [held_stream() for _ in range(3)]
    events = [s.record_event() for s, _ in streams]
    done = threading.Event()

    def waiter():
        streamrt.wait_all(events)
        done.set()

    t = threading.Thread(target=waiter)
    t.start()
    for _, gate in streams[:2]:
        gate.set()
    assert not done.wait(0.05)  # the third is still held
    streams[2][1].set()
    assert done.wait(RENDEZVOUS_S)
    t.join()
    assert all(e.completed for e in events)
    streamrt.wait_all(iter(events))  # any iterable
    streamrt.wait_all([])


def test_wait_all_rejects_non_events_and_unrecorded_events():
    e = streamrt.Stream().record_event()
    with pytest.raises(TypeError, match="item 1 is int, not a streamrt.Event"):
        streamrt.wait_all([e, 3])
    with pytest.raises(streamrt.Error, match="event 1 was never recorded"):
        streamrt.wait_all([e, streamrt.Event()])
    with pytest.raises(TypeError):
        streamrt.wait_all(5)


def test_blocking_event_waits():
    s, gate = held_stream()
    e = streamrt.Event(blocking=True)
    e.record(s)
    assert e.blocking
    threading.Timer(0.02, gate.set).start()
    e.synchronize()
    assert e.completed


def test_rerecording_moves_the_event():
    s = streamrt.Stream()
    e = s.record_event()
    e.synchronize()
    held, gate = held_stream()
    e.record(held)
    assert not e.completed
    gate.set()
    e.synchronize()
    assert e.completed
