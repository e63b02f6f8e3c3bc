"""Completion callbacks: fn(event) and fn(event, error), run once after completion on a worker
thread (or at once when already complete); exceptions in them go to sys.unraisablehook."""

import sys
import threading

import pytest

import streamrt
from helpers import RENDEZVOUS_S, Recorder


def test_callback_runs_after_completion_with_the_same_event_object():
    s = streamrt.Stream()
    gate = threading.Event()
    s.launch(gate.wait, RENDEZVOUS_S)
    e = s.record_event()
    called = threading.Event()
    seen = []

    def on_done(ev):
        seen.append((ev, ev.completed, threading.current_thread() is threading.main_thread()))
        called.set()

    e.add_done_callback(on_done)
    assert not called.wait(0.05)  # not before the work finished
    gate.set()
    assert called.wait(RENDEZVOUS_S)
    assert len(seen) == 1
    ev, completed, on_main = seen[0]
    assert ev is e and completed and not on_main


def test_callback_on_a_complete_event_runs_at_once():
    e = streamrt.Stream().record_event()
    e.synchronize()
    seen = []
    e.add_done_callback(seen.append)  # a builtin method: no error argument
    assert seen == [e]


def test_callback_with_error_argument():
    s = streamrt.Stream()
    ok = s.record_event()
    results = Recorder()
    done = threading.Semaphore(0)

    def on_done(ev, error):
        results((ev, error))
        done.release()

    ok.add_done_callback(on_done)
    raised = RuntimeError("work failed")

    def fail():
        raise raised

    s.launch(fail)
    bad = s.record_event()
    bad.add_done_callback(on_done)
    for _ in range(2):
        assert done.acquire(timeout=RENDEZVOUS_S)
    by_event = {id(ev): err for ev, err in results.items}
    assert by_event[id(ok)] is None
    assert by_event[id(bad)] is raised
    with pytest.raises(RuntimeError, match="work failed"):
        s.synchronize()


def test_callback_error_argument_for_a_runtime_error():
    e = streamrt.Stream().record_event()
    e.synchronize()
    got = []
    e.add_done_callback(lambda ev, err=None: got.append(err))  # binds two: gets the error (None)
    assert got == [None]


def test_exception_in_callback_goes_to_unraisablehook(monkeypatch):
    reported = []
    hooked = threading.Event()

    def hook(unraisable):
        reported.append((unraisable.exc_type, str(unraisable.exc_value), unraisable.object))
        hooked.set()

    monkeypatch.setattr(sys, "unraisablehook", hook)
    s = streamrt.Stream()
    gate = threading.Event()
    s.launch(gate.wait, RENDEZVOUS_S)
    e = s.record_event()

    def broken(ev):
        raise ValueError("bug in callback")

    e.add_done_callback(broken)
    gate.set()
    assert hooked.wait(RENDEZVOUS_S)
    assert reported == [(ValueError, "bug in callback", broken)]
    # The runtime keeps working.
    rec = Recorder()
    s.launch(rec, 1)
    s.synchronize()
    assert rec.items == [1]


def test_callback_may_launch_more_work():
    a, b = streamrt.Stream(), streamrt.Stream()
    rec = Recorder()
    finished = threading.Event()
    a.launch(rec, "a")
    e = a.record_event()

    def chain(ev):
        b.launch(rec, "b from callback")
        b.launch(finished.set)

    e.add_done_callback(chain)
    assert finished.wait(RENDEZVOUS_S)
    assert rec.items == ["a", "b from callback"]


def test_bad_callbacks_are_rejected():
    e = streamrt.Stream().record_event()
    with pytest.raises(TypeError, match="must be callable"):
        e.add_done_callback(3)
    with pytest.raises(TypeError, match="must accept \\(event\\) or \\(event, error\\)"):
        e.add_done_callback(lambda: None)
    with pytest.raises(streamrt.Error, match="never recorded"):
        streamrt.Event().add_done_callback(print)
