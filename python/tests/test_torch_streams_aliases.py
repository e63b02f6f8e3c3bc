"""Memory reached twice is tracked once: torch tensors made over overlapping memory from other start
addresses (numpy slices, DLPack capsules, numpy arrays of streamrt tensors) order against each
other's stream work, and their host reads wait for it, on the installing thread and on threads
that never entered a context. Each test holds the writer behind a gate opened a little later from
another thread, so a read that did not wait would see the old values."""

import numpy as np
import pytest

import streamrt
from helpers import RENDEZVOUS_S
from torch_streams_util import Gate, installed, on_another_thread, srt, torch  # noqa: F401

from streamrt import _torch_mode

N = 20


def queued_adds(t, stream, gate):
    """N queued `t.add_(1)` on `stream`, behind `gate`."""
    gate.hold(stream)
    with torch.cpu.StreamContext(stream):
        for _ in range(N):
            t.add_(1)


@pytest.mark.parametrize("where", ["this thread", "another thread"])
def test_a_numpy_slice_made_after_the_work_reads_after_it(installed, where):
    if where == "another thread" and _torch_mode.path().native is None:
        pytest.skip("threads that never entered a context are guarded by the native marks only")
    a = np.zeros(8, dtype=np.float32)
    t1 = torch.from_numpy(a)
    gate = Gate()
    queued_adds(t1, srt.Stream(), gate)
    t2 = torch.from_numpy(a[4:])  # another start address, made after the work was queued
    gate.open_later()
    if where == "this thread":
        got = t2.tolist()
    else:
        thread, out = on_another_thread(t2.tolist)
        thread.join(RENDEZVOUS_S)
        assert not thread.is_alive() and "error" not in out, out.get("error")
        got = out["value"]
    assert got == [float(N)] * 4


def test_overlapping_fills_on_two_streams_land_in_issue_order(installed):
    a = np.zeros(8, dtype=np.float32)
    whole = torch.from_numpy(a)
    tail = torch.from_numpy(a[4:])
    s1, s2 = srt.Stream(), srt.Stream()
    gate = Gate().hold(s1)
    with torch.cpu.StreamContext(s1):
        whole.fill_(1)
    with torch.cpu.StreamContext(s2):
        tail.fill_(2)  # must wait for the fill held on s1: it would run at once otherwise
    gate.open_later()
    streamrt.synchronize()
    assert a.tolist() == [1.0] * 4 + [2.0] * 4


def test_a_dlpack_capsule_of_a_pending_tensor_reads_after_its_writer(installed):
    x = torch.zeros(6)
    gate = Gate()
    queued_adds(x, srt.Stream(), gate)
    capsule = torch.utils.dlpack.to_dlpack(x)  # a capsule, not the tensor: no hook sees it
    y = streamrt.from_dlpack(capsule)
    gate.open_later()
    assert y.numpy().tolist() == [float(N)] * 6


def test_a_torch_tensor_over_a_streamrt_tensors_numpy_array_reads_after_its_writer(installed):
    x = streamrt.zeros([8])
    arr = x.numpy()  # exposes x's memory
    s = streamrt.Stream()
    gate = Gate().hold(s)
    with streamrt.StreamContext(s):
        x.fill_(3.0)
    t = torch.from_numpy(arr[2:])
    gate.open_later()
    assert t.tolist() == [3.0] * 6
