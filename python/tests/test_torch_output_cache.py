"""The outputs of ops on streams come from streamrt.torch's output cache (docs/torch.md, "Memory"):
freed outputs' memory is handed out again, never while queued work still writes it, up to a limit
the user sets, and empty_cache() gives it back."""

import pytest

import streamrt
from streamrt import _torch_mode, _torch_submit
from torch_streams_util import Gate, installed, srt, torch  # noqa: F401  (fixture)

pytestmark = pytest.mark.skipif(
    _torch_submit.native() is None,
    reason="streamrt._streamrt_torch is not built here: outputs are torch's own, nothing cached")


@pytest.fixture
def default_limit():
    yield
    srt.set_cache_limit(128 << 20)


def loop_of_adds(n, s):
    a, b = torch.randn(64, 64), torch.randn(64, 64)
    with torch.cpu.StreamContext(s):
        for _ in range(n):
            c = a + b
    s.synchronize()
    assert torch.equal(c, a + b)


def test_outputs_of_stream_ops_reuse_freed_outputs(installed):
    if _torch_mode.path().native is None:
        # (its work items hold Python objects, released later through the tracker registry)
        pytest.skip("the Python path's outputs are cached too, but freed later")
    s = torch.cpu.Stream()
    a, b = torch.randn(64, 64), torch.randn(64, 64)
    loop_of_adds(10, s)
    before = srt.cache_stats()
    for _ in range(50):
        with torch.cpu.StreamContext(s):
            c = a + b  # the last one's output was freed (below): its memory is handed out again
        s.synchronize()
        assert torch.equal(c, a + b)
        del c
    after = srt.cache_stats()
    assert after["hits"] - before["hits"] >= 50


def test_a_freed_output_is_not_handed_out_while_queued_work_writes_it(installed):
    held, free = torch.cpu.Stream(), torch.cpu.Stream()
    a, b = torch.randn(64, 64), torch.randn(64, 64)
    gate = Gate().hold(held)
    with torch.cpu.StreamContext(held):
        dropped = a + b  # queued behind the gate: it writes its output later
    del dropped  # the user's reference goes; the queued op still holds the memory
    with torch.cpu.StreamContext(free):
        kept = a * b  # a new output of the same size, written now
    free.synchronize()
    gate.open()
    held.synchronize()
    assert torch.equal(kept, a * b)  # the held op's write did not land in it


def test_the_cache_keeps_at_most_its_limit(installed, default_limit):
    s = torch.cpu.Stream()
    srt.set_cache_limit(0)
    loop_of_adds(50, s)
    assert srt.cache_stats()["cached_bytes"] == 0
    srt.set_cache_limit(64 << 20)
    loop_of_adds(50, s)
    stats = srt.cache_stats()
    assert 0 < stats["cached_bytes"] <= 64 << 20
    assert stats["limit_bytes"] == 64 << 20
    srt.set_cache_limit(1 << 10)  # shrinks what it holds at once
    assert srt.cache_stats()["cached_bytes"] <= 1 << 10


def test_empty_cache_gives_every_kept_block_back(installed):
    loop_of_adds(50, torch.cpu.Stream())
    assert srt.cache_stats()["cached_bytes"] > 0
    srt.empty_cache()
    assert srt.cache_stats()["cached_bytes"] == 0


def test_set_cache_limit_refuses_what_is_no_count_of_bytes():
    with pytest.raises(ValueError, match="0 or more"):
        srt.set_cache_limit(-1)
    with pytest.raises(TypeError, match="int count of bytes"):
        srt.set_cache_limit(1.5)
    with pytest.raises(TypeError, match="int count of bytes"):
        srt.set_cache_limit(True)


def test_an_output_resized_later_keeps_working(installed):
    s = torch.cpu.Stream()
    a = torch.randn(64, 64)
    with torch.cpu.StreamContext(s):
        y = a * 2
    s.synchronize()
    y.resize_(300, 300)  # reallocates through the storage's allocator: the cache's
    y.fill_(3.0)
    assert float(y.sum()) == 3.0 * 300 * 300
    with torch.cpu.StreamContext(s):
        y.mul_(2)
    s.synchronize()
    assert float(y.sum()) == 6.0 * 300 * 300


def test_outputs_freed_on_the_workers_after_a_loop_come_back_to_the_cache(installed):
    # The user drops each output while its op is still queued: the worker frees it when the op
    # finished, from another thread than the one that allocated it. (Below the size from which a
    # queued op's dropped output is handed to the next output instead: test_torch_output_reuse.)
    s = torch.cpu.Stream()
    a = torch.randn(128, 256)
    gate = Gate().hold(s)
    with torch.cpu.StreamContext(s):
        for _ in range(20):
            a * 2
    srt.empty_cache()
    gate.open()
    s.synchronize()
    assert srt.cache_stats()["cached_bytes"] >= 20 * 128 * 256 * 4
    streamrt.synchronize()


def test_a_full_cache_keeps_the_sizes_in_use_now(installed, default_limit):
    if _torch_mode.path().native is None:
        pytest.skip("the Python path's outputs are cached too, but freed later")
    srt.set_cache_limit(1 << 20)
    s = torch.cpu.Stream()
    a, b = torch.randn(256, 256), torch.randn(200, 200)
    with torch.cpu.StreamContext(s):
        old = [a * 2 for _ in range(8)]  # 256 KiB each: freed below, they fill the cache
    s.synchronize()
    del old
    assert srt.cache_stats()["cached_bytes"] > (1 << 20) - (300 << 10)
    before = srt.cache_stats()["hits"]
    for _ in range(20):
        with torch.cpu.StreamContext(s):
            y = b * 2  # another size: its freed block takes the place of the oldest kept ones
        s.synchronize()
        del y
    assert srt.cache_stats()["hits"] - before >= 19
