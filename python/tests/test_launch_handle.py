"""Stream.launch(fn, *args) returns a handle from which fn's result, or its exception, is taken
once it ran (concurrent.futures.Future's calls): s.launch(torch.matmul, a, b) is useful."""

import threading

import numpy as np
import pytest

import streamrt
from helpers import RENDEZVOUS_S


def test_result_is_what_the_callable_returned(workers):
    workers(2)
    s = streamrt.Stream()
    gate = threading.Event()
    s.launch(gate.wait, RENDEZVOUS_S)
    h = s.launch(np.add, np.ones(3), 2.0)
    assert isinstance(h, streamrt.LaunchHandle)
    assert not h.done()
    with pytest.raises(TimeoutError):
        h.result(timeout=0.01)
    gate.set()
    assert h.result().tolist() == [3.0, 3.0, 3.0]
    assert h.done() and h.exception() is None
    assert h.result() is h.result()  # the same object each time
    assert h.event.query()


def test_keyword_arguments_and_none(workers):
    s = streamrt.Stream()
    assert s.launch(dict, a=1, b=2).result() == {"a": 1, "b": 2}
    assert s.launch(lambda: None).result() is None


def test_the_callables_exception_is_raised_by_result(workers):
    s = streamrt.Stream()

    def fail():
        raise KeyError("missing")

    h = s.launch(fail)
    with pytest.raises(KeyError, match="missing") as info:
        h.result()
    # result() reported it (rule 10): later work on the stream runs, and exception() gives the
    # failure again (raised anew, chained to the original).
    assert s.launch(int, "7").result() == 7
    e = h.exception()
    assert isinstance(e, KeyError) and (e is info.value or e.__cause__ is info.value)


def test_a_callable_skipped_after_a_failure_raises_that_failure(workers):
    s = streamrt.Stream()
    s.launch(lambda: 1 / 0)
    skipped = s.launch(lambda: "never")
    with pytest.raises(ZeroDivisionError):
        skipped.result()


def test_torch_matmul_as_launched_work():
    torch = pytest.importorskip("torch", reason="torch is not importable here")
    a, b = torch.randn(64, 64), torch.randn(64, 64)
    s1, s2 = streamrt.Stream(), streamrt.Stream()
    h1, h2 = s1.launch(torch.matmul, a, b), s2.launch(torch.matmul, b, a)
    assert torch.allclose(h1.result(), a @ b) and torch.allclose(h2.result(), b @ a)


def test_other_streams_can_wait_on_the_handles_event(workers):
    workers(2)
    s1, s2 = streamrt.Stream(), streamrt.Stream()
    order = []
    gate = threading.Event()
    s1.launch(gate.wait, RENDEZVOUS_S)
    h = s1.launch(order.append, "first")
    s2.wait_event(h.event)
    h2 = s2.launch(order.append, "second")
    gate.set()
    h2.result()
    assert order == ["first", "second"]
