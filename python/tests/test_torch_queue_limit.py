"""A thread launching torch ops waits once its stream has set_queue_limit() items queued, until half
of them finished; never for a stream that finishes nothing (held), so it never hangs there."""

import threading

import pytest

from helpers import RENDEZVOUS_S
from streamrt import _streamrt as _C
from streamrt import _torch_mode
from torch_streams_util import Gate, installed, srt, torch  # noqa: F401  (fixture)


@pytest.fixture
def limit_of(installed):
    def set_to(items):
        srt.set_queue_limit(items)
        return installed

    before = srt.queue_limit()
    yield set_to
    srt.set_queue_limit(**before)


def queue_depths(s, n, size=300):
    """Launches n slow torch ops on `s` (each much longer than its launch; a new output of size²
    floats each) and returns the number of items queued on `s` after each launch returned."""
    x, w = torch.randn(size, size), torch.randn(size, size)
    depths = []
    with torch.cpu.StreamContext(s):
        torch.mm(x, w)  # (a first call is checked before the fast path takes the next ones)
    s.synchronize()
    with torch.cpu.StreamContext(s):
        for _ in range(n):
            y = torch.mm(x, w)
            depths.append(s.pending())
    s.synchronize()
    assert torch.allclose(y, torch.mm(x, w))
    return depths


def test_a_launch_waits_while_its_stream_has_the_limit_queued(limit_of):
    limit_of(8)
    waits = _C._torch_queue_limit_waits()
    assert max(queue_depths(torch.cpu.Stream(), 60)) <= 8
    assert _C._torch_queue_limit_waits() > waits


def test_no_limit_lets_the_queue_grow(limit_of):
    # What the limit prevents: the host runs ahead of the stream by every op it launches.
    limit_of(0)
    assert max(queue_depths(torch.cpu.Stream(), 60)) > 8


def test_a_launch_waits_while_its_stream_holds_too_many_output_bytes(limit_of):
    if _torch_mode.path().native is None:
        pytest.skip("the Python path counts items only: its outputs are allocated in Python")
    limit_of(0)
    srt.set_queue_limit(nbytes=8 << 20)
    # 1 MiB per output; one call may still take the dispatch mode's path, which counts no bytes
    assert max(queue_depths(torch.cpu.Stream(), 40, size=512)) <= 9


def test_no_byte_limit_lets_the_outputs_pile_up(limit_of):
    limit_of(0)
    srt.set_queue_limit(nbytes=0)
    assert max(queue_depths(torch.cpu.Stream(), 40, size=512)) > 8


def test_a_held_stream_is_waited_for_once_then_not_until_it_moves(limit_of):
    limit_of(4)
    s = torch.cpu.Stream()
    gate = Gate().hold(s)
    a = torch.randn(64, 64)
    out = {}

    def launch():
        with torch.cpu.StreamContext(s):
            out["y"] = [a + i for i in range(30)]

    waits = _C._torch_queue_limit_waits()
    t = threading.Thread(target=launch)
    t.start()
    t.join(RENDEZVOUS_S)
    assert not t.is_alive()  # the launches did not hang behind the gate
    assert _C._torch_queue_limit_waits() - waits == 1  # waited once, then let it be
    gate.open()
    s.synchronize()
    assert all(torch.equal(y, a + i) for i, y in enumerate(out["y"]))


def test_each_held_stream_is_waited_for_once(limit_of):
    # A thread alternating between held streams past the limit gives each up once, not at every
    # switch.
    limit_of(4)
    streams = [torch.cpu.Stream() for _ in range(3)]
    gates = [Gate().hold(s) for s in streams]
    a = torch.randn(64, 64)
    waits = _C._torch_queue_limit_waits()
    ys = []
    for i in range(30):
        with torch.cpu.StreamContext(streams[i % 3]):
            ys.append(a + i)
    assert _C._torch_queue_limit_waits() - waits == 3
    for gate in gates:
        gate.open()
    for s in streams:
        s.synchronize()
    assert all(torch.equal(y, a + i) for i, y in enumerate(ys))


def test_a_stream_that_moved_again_is_waited_for_again(limit_of):
    limit_of(8)
    s = torch.cpu.Stream()
    gate = Gate().hold(s)
    a = torch.randn(64, 64)
    with torch.cpu.StreamContext(s):
        held = [a + i for i in range(12)]  # past the limit: one wait, given up
    gate.open()
    s.synchronize()  # (the Python path's items need the GIL this thread holds while it launches)
    assert max(queue_depths(s, 60)) <= 8  # the stream moved: this thread waits for it again
    assert all(torch.equal(y, a + i) for i, y in enumerate(held))


def test_set_queue_limit_refuses_what_is_no_limit():
    before = srt.queue_limit()
    with pytest.raises(ValueError, match="2 or more"):
        srt.set_queue_limit(1)
    with pytest.raises(ValueError, match="2 or more"):
        srt.set_queue_limit(-3)
    with pytest.raises(TypeError, match="int count"):
        srt.set_queue_limit(2.0)
    with pytest.raises(ValueError, match="0 \\(no limit\\) or more"):
        srt.set_queue_limit(nbytes=-1)
    with pytest.raises(TypeError, match="nbytes is an int count"):
        srt.set_queue_limit(nbytes="1M")
    assert srt.queue_limit() == before


def test_stream_work_launching_ops_never_waits_for_its_own_stream(limit_of):
    limit_of(4)
    s = torch.cpu.Stream()
    a = torch.randn(64, 64)
    out = {}

    def work():  # runs on s: the ops it launches queue behind it, on s
        with torch.cpu.StreamContext(s):
            out["y"] = [a + i for i in range(20)]

    waits = _C._torch_queue_limit_waits()
    s.launch(work)
    s.synchronize()
    assert _C._torch_queue_limit_waits() == waits
    assert all(torch.equal(y, a + i) for i, y in enumerate(out["y"]))
