"""Dependency tracking of torch tensors across streams, as for streamrt tensors: read-after-write,
write-after-read and write-after-write; views share their base's tracking; in-place ops and out=
are writes; memory shared with streamrt tensors through DLPack is tracked once. Each test holds
the first access behind a gate: without tracking, the second would run first."""

import gc
import weakref

import pytest

import streamrt
from torch_streams_util import (  # noqa: F401  (fixture)
    Gate, first_then_second, installed, srt, torch)


@pytest.fixture
def streams(installed):
    return torch.cpu.Stream(), torch.cpu.Stream()


@pytest.fixture
def held(streams):
    """The two streams and a gate holding the first: what it is given waits until gate.open()."""
    s1, s2 = streams
    return s1, s2, Gate().hold(s1)


def test_read_after_write(held):
    x = torch.zeros(100)
    # second() waits for the fill on s1 (stream-side: the call returns at once)
    _, y = first_then_second(*held, lambda: x.fill_(5), lambda: x + 1)
    assert y.tolist() == [6.0] * 100


def test_write_after_read(held):
    x = torch.ones(100)
    # the fill on s2 must wait until s1 has read x
    y, _ = first_then_second(*held, lambda: x * 3, lambda: x.fill_(7))
    assert y.tolist() == [3.0] * 100
    assert x.tolist() == [7.0] * 100


def test_write_after_write(held):
    x = torch.zeros(100)
    # the fill on s2 must land after s1's
    first_then_second(*held, lambda: x.fill_(1), lambda: x.fill_(2))
    assert x.tolist() == [2.0] * 100


def test_views_share_their_bases_tracking(held):
    s1, s2, gate = held
    base = torch.zeros(10, 10)
    with torch.cpu.StreamContext(s1):
        base.fill_(4)  # writes the base
    with torch.cpu.StreamContext(s2):
        col = base[:, 3].clone()  # reads a view: waits for the base's writer
        base.t()[2].fill_(9)  # writes through a view of a view: after s1's write
    gate.open()
    assert col.tolist() == [4.0] * 10
    assert base[:, 2].tolist() == [9.0] * 10 and base[0, 3].item() == 4.0


def test_in_place_and_out_are_writes(held):
    s1, s2, gate = held
    a = torch.full((50,), 2.0)
    out = torch.zeros(50)
    with torch.cpu.StreamContext(s1):
        torch.mul(a, 3, out=out)
        a.add_(1)
    with torch.cpu.StreamContext(s2):
        r1 = out + 0
        r2 = a + 0
    gate.open()
    assert r1.tolist() == [6.0] * 50 and r2.tolist() == [3.0] * 50


def test_torch_op_then_streamrt_op_on_the_same_memory(held):
    # A torch tensor handed to streamrt (DLPack): one tracking for both sides.
    s1, s2, gate = held
    t = torch.zeros(64)
    with torch.cpu.StreamContext(s1):
        t.add_(3)  # torch, held
    with streamrt.cpu.StreamContext(s2):
        viewed = streamrt.from_dlpack(t)
        doubled = streamrt.mul(t, 2.0)  # a streamrt op on the torch tensor: waits for s1
    assert viewed.data_ptr() == torch._C._TensorBase.data_ptr(t)  # shared (no wait to ask)
    assert not doubled.ready()
    gate.open()
    assert doubled.numpy().tolist() == [6.0] * 64
    # And the other way: a streamrt write, then a torch op reading the torch tensor.
    gate2 = Gate().hold(s2)
    with streamrt.cpu.StreamContext(s2):
        viewed.fill_(8.0)
    with torch.cpu.StreamContext(s1):
        back = t * 1
    gate2.open()
    assert back.tolist() == [8.0] * 64


def test_streamrt_tensor_shared_with_torch_is_tracked_once(held):
    s1, s2, gate = held
    x = streamrt.zeros(64)
    r = torch.from_dlpack(x)
    assert r.data_ptr() == x.data_ptr()
    with streamrt.cpu.StreamContext(s1):
        x.fill_(4.0)  # streamrt, held
    with torch.cpu.StreamContext(s2):
        y = r + 1  # torch op on the shared memory: waits for the streamrt write
    assert not srt.ready(y)
    gate.open()
    assert y.tolist() == [5.0] * 64
    gate2 = Gate().hold(s2)
    with torch.cpu.StreamContext(s2):
        r.mul_(10)  # torch write, held
    gate2.open_later()
    assert x.numpy().tolist() == [40.0] * 64  # a streamrt read of the same memory waits
    assert r.tolist() == [40.0] * 64


def test_record_stream_keeps_the_memory_until_the_stream_gets_there(streams):
    s1, _ = streams
    gate = Gate().hold(s1)
    t = torch.ones(1000)
    alive = weakref.ref(t)
    t.record_stream(s1)
    del t
    gc.collect()
    assert alive() is not None  # the stream still holds it
    gate.open()
    s1.synchronize()
    gc.collect()
    assert alive() is None


def test_record_stream_still_takes_torchs_streams(streams):
    t = torch.ones(3)
    with pytest.raises((TypeError, RuntimeError)):
        t.record_stream(object())
