"""Rule 10 as Python users meet it: a failure raised by any wait (tensor read, Event.synchronize,
wait_all, Stream.synchronize) is reported: work submitted after that wait runs, nothing is printed
again at exit, and a failure raised a second time is a fresh exception that says so, chained to
the original, with a traceback of its own raise only."""

import os
import subprocess
import sys
import textwrap
import threading
import traceback

import pytest

import streamrt
from helpers import RENDEZVOUS_S, Recorder

SUBPROCESS_TIMEOUT_S = 120


def int_div_by_zero():
    return streamrt.tensor([1, 2], dtype=streamrt.int64) / streamrt.tensor(
        [1, 0], dtype=streamrt.int64
    )


def test_a_failure_raised_by_a_tensor_read_lets_later_ops_run():
    x = int_div_by_zero()
    with pytest.raises(streamrt.Error, match="integer division by zero"):
        x.numpy()
    # A REPL session: the next op on the same stream runs, and nothing is left to report.
    y = streamrt.ones(2) + 1
    assert y.numpy().tolist() == [2.0, 2.0]
    streamrt.default_stream().synchronize()
    streamrt.synchronize()


def test_a_failure_raised_by_an_event_wait_lets_later_work_run():
    s = streamrt.Stream()
    rec = Recorder()
    s.launch(lambda: 1 / 0)
    failed = s.record_event()
    gate = threading.Event()
    s.launch(gate.wait, RENDEZVOUS_S)  # keeps the stream busy: the report is queued, not at once
    s.launch(rec, "submitted before the report: skipped")
    with pytest.raises(ZeroDivisionError):
        failed.synchronize()
    s.launch(rec, "submitted after the report: runs")
    gate.set()
    s.synchronize()  # nothing left to report
    assert rec.items == ["submitted after the report: runs"]


def test_wait_all_reports_only_the_failure_it_raises():
    a, b = streamrt.Stream(), streamrt.Stream()
    a.launch(lambda: {}["a"])
    b.launch(lambda: [][1])
    events = [a.record_event(), b.record_event()]
    with pytest.raises(KeyError):
        streamrt.wait_all(events)
    a.synchronize()  # reported by wait_all
    with pytest.raises(IndexError):  # never raised before: still there for its stream
        b.synchronize()


def failed_event(exc):
    """A stream whose one job (failing_job) raises `exc`, and an event recorded after that job."""
    s = streamrt.Stream()

    def failing_job():
        raise exc

    s.launch(failing_job)
    return s, s.record_event()


def test_a_failure_raised_again_is_a_fresh_exception_that_says_so():
    s, e = failed_event(LookupError("the original"))
    with pytest.raises(LookupError) as first:
        e.synchronize()
    with pytest.raises(LookupError) as second:
        e.synchronize()  # an older event still covers the failed work
    assert second.value is not first.value
    assert second.value.__cause__ is first.value
    assert second.value.args == ("the original",)
    notes = getattr(second.value, "__notes__", [])
    text = "".join(traceback.format_exception(second.value))
    assert "raised again" in text and f"cpu:0 stream {s.id}" in text, text
    assert "submit that work again" in text, (text, notes)
    assert "failing_job" in text  # the original, chained, keeps the worker's frames


def test_tracebacks_do_not_accumulate_across_raises():
    s, e = failed_event(ValueError("x"))

    def first_waiter():
        e.synchronize()

    def second_waiter():
        e.synchronize()

    with pytest.raises(ValueError) as first:
        first_waiter()
    first_names = [f.f_code.co_name for f, _ in traceback.walk_tb(first.value.__traceback__)]
    assert "first_waiter" in first_names and "failing_job" in first_names
    with pytest.raises(ValueError) as second:
        second_waiter()
    names = [f.f_code.co_name for f, _ in traceback.walk_tb(second.value.__traceback__)]
    assert "second_waiter" in names
    assert "first_waiter" not in names, names  # no frames of the earlier raise
    # The original's traceback was reset to the worker's frames, not the first raise's.
    cause_names = [
        f.f_code.co_name for f, _ in traceback.walk_tb(second.value.__cause__.__traceback__)
    ]
    assert "failing_job" in cause_names and "first_waiter" not in cause_names, cause_names


def test_a_streamrt_error_raised_again_says_where_and_what_to_do():
    x = int_div_by_zero()
    z = x + 1  # computed before the report: skipped
    with pytest.raises(streamrt.Error) as first:
        x.numpy()
    assert "raised again" not in str(first.value)
    with pytest.raises(streamrt.Error) as again:
        z.numpy()
    msg = str(again.value)
    assert "integer division by zero" in msg
    assert "raised again" in msg and "submit that work again" in msg, msg
    assert "cpu:0 stream 0" in msg, msg


def test_error_classes_show_the_package_name():
    assert streamrt.Error.__module__ == "streamrt"
    assert streamrt.Error.__qualname__ == "Error"
    assert streamrt.Cancelled.__module__ == "streamrt"
    with pytest.raises(streamrt.Error) as info:
        streamrt.Event().synchronize()
    text = "".join(traceback.format_exception_only(info.value))
    assert text.startswith("streamrt.Error: "), text


def run_script(body):
    script = "import streamrt, sys\n" + textwrap.dedent(body)
    return subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=SUBPROCESS_TIMEOUT_S,
        env=dict(os.environ),
    )


def test_a_failure_caught_at_a_read_is_not_reported_again_at_exit():
    proc = run_script(
        """
        x = streamrt.tensor([1], dtype=streamrt.int64) / streamrt.tensor([0], dtype=streamrt.int64)
        try:
            x.numpy()
        except streamrt.Error as e:
            print("caught:", e)
        """
    )
    assert proc.returncode == 0, proc.stderr
    assert "caught: " in proc.stdout
    assert "never synchronized" not in proc.stderr, proc.stderr
    assert "never reported" not in proc.stderr, proc.stderr


def test_a_failure_nobody_saw_is_still_reported_at_exit():
    # The control for the test above: the same failure, not read, is reported.
    proc = run_script(
        """
        x = streamrt.tensor([1], dtype=streamrt.int64) / streamrt.tensor([0], dtype=streamrt.int64)
        """
    )
    assert proc.returncode == 0, proc.stderr
    assert "never synchronized" in proc.stderr and "integer division by zero" in proc.stderr
