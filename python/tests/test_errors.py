"""Exceptions raised by launched callables: re-raised as raised (type, object, traceback), later
work skipped, the stream usable again after the report."""

import threading
import traceback

import pytest

import streamrt
from helpers import RENDEZVOUS_S, Recorder


class CustomError(Exception):
    pass


def frame_names(exc):
    return [frame.f_code.co_name for frame, _ in traceback.walk_tb(exc.__traceback__)]


def test_exception_is_reraised_with_original_type_object_and_traceback():
    raised = CustomError("boom", 42)

    def inner_failure():
        raise raised

    def launched_job():
        inner_failure()

    s = streamrt.Stream()
    s.launch(launched_job)
    with pytest.raises(CustomError) as info:
        s.synchronize()
    assert info.value is raised
    assert info.value.args == ("boom", 42)
    names = frame_names(info.value)
    # The frames of the launched callable are in the traceback, below the synchronize() caller.
    assert "launched_job" in names and "inner_failure" in names
    assert names.index("launched_job") < names.index("inner_failure")
    text = "".join(traceback.format_exception(info.value))
    assert "raise raised" in text


def test_work_after_a_failure_is_skipped_and_stream_recovers():
    s = streamrt.Stream()
    rec = Recorder()
    s.launch(rec, "before")
    s.launch(lambda: {}["missing"])
    s.launch(rec, "skipped: runs on the failed stream's results")
    with pytest.raises(KeyError, match="missing"):
        s.synchronize()
    assert rec.items == ["before"]
    s.synchronize()  # reported once
    s.launch(rec, "after")
    s.synchronize()
    assert rec.items == ["before", "after"]


def test_event_after_a_failure_reports_it():
    s = streamrt.Stream()
    s.launch(lambda: int("not a number"))
    e = s.record_event()
    with pytest.raises(ValueError, match="invalid literal"):
        e.synchronize()
    assert e.state == "failed"
    assert e.completed
    with pytest.raises(ValueError):
        streamrt.wait_all([e])  # the event still covers the failed work
    s.synchronize()  # the event wait reported it (rule 10): nothing left for the stream


def test_failure_is_inherited_by_a_waiting_stream():
    producer, consumer = streamrt.Stream(), streamrt.Stream()
    rec = Recorder()
    producer.launch(lambda: 1 / 0)
    consumer.wait_stream(producer)
    consumer.launch(rec, "must not run")
    with pytest.raises(ZeroDivisionError):
        consumer.synchronize()
    assert rec.items == []
    with pytest.raises(ZeroDivisionError):
        producer.synchronize()


def test_device_synchronize_reraises():
    s = streamrt.Stream()
    s.launch(lambda: [][1])
    with pytest.raises(IndexError):
        streamrt.synchronize()


def test_synchronize_of_own_stream_inside_work_raises_instead_of_deadlocking():
    s = streamrt.Stream()
    s.launch(lambda: streamrt.current_stream().synchronize())
    with pytest.raises(streamrt.Error, match="deadlock"):
        s.synchronize()


def test_base_exceptions_are_carried_too():
    s = streamrt.Stream()

    def stop():
        raise KeyboardInterrupt("from a stream")

    s.launch(stop)
    with pytest.raises(KeyboardInterrupt, match="from a stream"):
        s.synchronize()


def test_cancel_drops_queued_python_work():
    s = streamrt.Stream()
    gate = threading.Event()
    started = threading.Event()
    rec = Recorder()

    def first():
        started.set()
        assert gate.wait(RENDEZVOUS_S)
        rec("first")

    s.launch(first)
    assert started.wait(RENDEZVOUS_S)
    for i in range(5):
        s.launch(rec, i)
    after = s.record_event()
    assert s.pending() == 6
    assert s.cancel() == 5  # the running item is not dropped
    gate.set()
    s.synchronize()  # the caller asked for the cancel: no error here
    assert rec.items == ["first"]
    with pytest.raises(streamrt.Cancelled, match=r"dropped by Stream\.cancel\(\)"):
        after.synchronize()
    assert after.state == "cancelled"
    s.launch(rec, "after cancel")  # the stream stays usable
    s.synchronize()
    assert rec.items == ["first", "after cancel"]
    assert s.pending() == 0 and s.cancel() == 0
