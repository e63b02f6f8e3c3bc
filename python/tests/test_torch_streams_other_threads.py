"""Pending state travels with the tensor: a thread that never entered a stream context (a logging
thread, a thread started before install()) waits for the queued work on a tensor before any torch
op, number conversion or buffer protocol reads it, and before a write lands under queued
readers."""

import operator
import struct

import numpy as np
import pytest

from helpers import RENDEZVOUS_S
from torch_streams_util import (  # noqa: F401  (fixture)
    Gate, held_write, installed, on_another_thread, srt, torch)
from streamrt import _torch_mode

N = 6

READS = {
    "mean().item()": lambda t: t.mean().item(),
    "sum": lambda t: float(t.sum()) / N,
    "torch.equal": lambda t: 5.0 if torch.equal(t, torch.full((N,), 5.0)) else 0.0,
    "(t > 0).all()": lambda t: 5.0 if bool((t > 4).all()) else 0.0,
    "clone": lambda t: t.clone()[0].item(),
    "float(t[0])": lambda t: float(t[0]),
    "int(t[0])": lambda t: float(int(t[0])),
    "bool": lambda t: 5.0 if bool(t[0] == 5) else 0.0,
    "operator.index": lambda t: float(operator.index(t.to(torch.int64)[0])),
    "a view taken after the write": lambda t: t[2:4].max().item(),
    "complex(t[0])": lambda t: complex(t[0]).real,
    "format(t[0])": lambda t: float(format(t[0], ".1f")),
    "repr": lambda t: 5.0 if "5." in repr(t) else 0.0,
    "tolist": lambda t: t.tolist()[0],
    "t.numpy()": lambda t: float(t.numpy()[0]),
    "numpy.asarray": lambda t: float(np.asarray(t)[0]),
    "numpy.from_dlpack": lambda t: float(np.from_dlpack(t)[0]),
    "memoryview of t.numpy()": lambda t: struct.unpack_from("f", memoryview(t.numpy()))[0],
    "bytes of t.numpy()": lambda t: struct.unpack_from("f", bytes(t.numpy()))[0],
}


def native_or_skip():
    if _torch_mode.path().native is None:
        pytest.skip("pending marks are part of _streamrt_torch's native path")


@pytest.mark.parametrize("read", list(READS), ids=list(READS))
def test_a_thread_outside_contexts_waits_before_reading(installed, read):
    native_or_skip()
    s = torch.cpu.Stream()
    x = torch.zeros(N)
    gate = held_write(s, x, 5.0)
    thread, out = on_another_thread(lambda: READS[read](x))
    gate.open_later()
    thread.join(RENDEZVOUS_S)
    assert not thread.is_alive()
    assert "error" not in out, out.get("error")
    assert out["value"] == 5.0


def test_a_write_outside_contexts_waits_for_queued_readers(installed):
    native_or_skip()
    s = torch.cpu.Stream()
    x = torch.full((N,), 3.0)
    gate = Gate().hold(s)
    with torch.cpu.StreamContext(s):
        y = x * 2  # queued: reads x
    thread, out = on_another_thread(lambda: x.fill_(7.0))
    gate.open_later()
    thread.join(RENDEZVOUS_S)
    assert not thread.is_alive() and "error" not in out
    assert y.tolist() == [6.0] * N and x.tolist() == [7.0] * N


def test_a_failure_reaches_the_other_thread(installed):
    native_or_skip()
    s = torch.cpu.Stream()
    x = torch.zeros(N)
    gate = Gate().hold(s)
    with torch.cpu.StreamContext(s):
        x.index_fill_(0, torch.tensor([N + 10]), 1.0)  # an index out of range, in the kernel
    thread, out = on_another_thread(lambda: x.sum().item())
    gate.open_later()
    thread.join(RENDEZVOUS_S)
    assert isinstance(out.get("error"), IndexError), out


def test_the_mark_goes_once_the_work_is_done(installed):
    native_or_skip()
    s = torch.cpu.Stream()
    x = torch.zeros(N)
    plain = torch.zeros(N)
    with torch.cpu.StreamContext(s):
        x.add_(1)
    native = _torch_mode.path().native
    assert native.marked(x) and not native.marked(plain)
    s.synchronize()
    x.sum()  # the first op after the work finds nothing pending and drops the mark
    assert not native.marked(x)
