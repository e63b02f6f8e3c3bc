"""Nothing leaks: after a loop of 10,000 enqueued torch ops, the tensors, their storages, the
trackers and streamrt's allocator are back where they started."""

import gc

import streamrt
from streamrt import _torch_tracking
from streamrt._torch_compat import untyped_storage as storage_of
from torch_streams_util import installed, srt, torch  # noqa: F401  (fixture)

_expired = torch.UntypedStorage._expired
_free = torch.UntypedStorage._free_weak_ref


def live_tensors():
    gc.collect()
    kinds = (torch.Tensor, torch.nn.Parameter)
    return sum(1 for o in gc.get_objects() if type(o) in kinds)  # (type(): no attribute access)


def settle():
    streamrt.synchronize()
    gc.collect()
    _torch_tracking.sweep()


def test_ten_thousand_enqueued_ops_leave_nothing_behind(installed):
    s1, s2 = torch.cpu.Stream(), torch.cpu.Stream()
    x = torch.randn(64, 64)

    def run(iterations, watch):
        y = x
        for i in range(iterations):
            with torch.cpu.StreamContext(s1 if i % 2 else s2):  # cross-stream hand-offs too
                y = torch.tanh(y) * 0.5 + x  # 3 ops, 3 new tensors
                if i % 100 == 0:
                    watch.append(storage_of(y)._weak_ref())
        return y

    run(50, [])  # warm-up: plans, meta cache, first trackers
    settle()
    tensors, entries, stats = live_tensors(), _torch_tracking.entry_count(), streamrt.memory_stats()
    watched = []
    y = run(3334, watched)  # 10,002 ops
    assert torch.isfinite(y).all()
    del y
    settle()
    try:
        assert all(_expired(w) for w in watched)  # every watched storage was freed
    finally:
        for w in watched:
            _free(w)
    assert live_tensors() <= tensors
    assert _torch_tracking.entry_count() <= entries
    after = streamrt.memory_stats()
    assert after["bytes_in_use"] == stats["bytes_in_use"]


def test_uninstall_drops_every_tracker(workers):
    workers(2)
    settle()
    before = _torch_tracking.entry_count()  # storages of earlier tests' tensors still alive
    srt.install()
    s = torch.cpu.Stream()
    with torch.cpu.StreamContext(s):
        ys = [torch.ones(10) * i for i in range(20)]
    del ys
    srt.uninstall()
    gc.collect()
    _torch_tracking.sweep()
    assert _torch_tracking.entry_count() <= before
