"""The caching allocator from Python: counters, reuse, empty_cache, the cache limit and its
environment variable (a bad value is a clear error)."""

import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import streamrt
from helpers import RENDEZVOUS_S, held_stream

N = 1 << 20  # 4 MiB of float32


def test_stats_count_use_hits_and_release():
    streamrt.empty_cache()
    streamrt.reset_peak_memory_stats()
    s0 = streamrt.memory_stats()
    assert set(s0) == {
        "bytes_in_use",
        "bytes_cached",
        "peak_bytes_in_use",
        "allocations",
        "cache_hits",
        "releases",
        "cache_limit",
    }
    t = streamrt.empty(N)
    s1 = streamrt.memory_stats()
    assert s1["bytes_in_use"] >= s0["bytes_in_use"] + 4 * N
    assert s1["allocations"] == s0["allocations"] + 1
    del t
    s2 = streamrt.memory_stats()
    assert s2["bytes_in_use"] == s0["bytes_in_use"]
    assert s2["bytes_cached"] >= 4 * N
    u = streamrt.empty(N)  # same size class: served from the cache
    assert streamrt.memory_stats()["cache_hits"] == s2["cache_hits"] + 1
    del u
    streamrt.empty_cache()
    s3 = streamrt.memory_stats()
    assert s3["bytes_cached"] == 0
    assert s3["peak_bytes_in_use"] >= s0["bytes_in_use"] + 4 * N


def test_cache_limit_bounds_cached_bytes():
    streamrt.set_memory_cache_limit(1 << 20)
    try:
        for n in range(1000, 300000, 7919):
            streamrt.empty(n)
            assert streamrt.memory_stats()["bytes_cached"] <= 1 << 20
        assert streamrt.memory_stats()["cache_limit"] == 1 << 20
    finally:
        streamrt.set_memory_cache_limit(1 << 30)
    with pytest.raises(ValueError, match="bytes=-1 is out of range; it must be from 0 to"):
        streamrt.set_memory_cache_limit(-1)


def queued_loop(iterations):
    """`out = streamrt.matmul(a, b)` `iterations` times on one stream held at a gate, so every
    product is still queued when the host drops its result. Returns the bytes the loop added to
    the pool (in use plus cached), its peak in use and its cache hits."""
    a = streamrt.randn(256, 256, seed=1)
    b = streamrt.randn(256, 256, seed=2)
    expected = a.numpy() @ b.numpy()
    streamrt.empty_cache()
    streamrt.reset_peak_memory_stats()
    before = streamrt.memory_stats()
    s = streamrt.cpu.Stream()
    gate = threading.Event()
    s.launch(gate.wait, RENDEZVOUS_S)
    with streamrt.cpu.StreamContext(s):
        for _ in range(iterations):
            out = streamrt.matmul(a, b)
    after = streamrt.memory_stats()
    gate.set()
    s.synchronize()
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-4, atol=1e-3)
    pool = lambda st: st["bytes_in_use"] + st["bytes_cached"]
    return (pool(after) - pool(before), after["peak_bytes_in_use"] - before["bytes_in_use"],
            after["cache_hits"] - before["cache_hits"])


def test_queued_loop_on_one_stream_reuses_its_results_at_once():
    block = 256 * 256 * 4
    short_pool, _, _ = queued_loop(5)
    pool, peak, hits = queued_loop(25)
    assert peak <= 3 * block, "results in use grew with the loop of queued products"
    assert pool <= 3 * block, "the pool grew with the loop of queued products"
    assert pool == short_pool, "the pool depends on the loop length"
    assert hits >= 25 - 2, "dropped results were not reused by their stream"


def run_with_limit(value):
    env = dict(os.environ, STREAMRT_CACHE_LIMIT=value)
    code = "import streamrt; streamrt.zeros(3).numpy(); print(streamrt.memory_stats()['cache_limit'])"
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=120)


def test_environment_variable_sets_the_limit():
    r = run_with_limit("64M")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str(64 << 20)


def test_bad_environment_value_is_a_clear_error():
    r = run_with_limit("lots")
    assert r.returncode != 0
    assert "STREAMRT_CACHE_LIMIT='lots' is not a size" in r.stderr
    assert "512M" in r.stderr


def test_imports_of_overlapping_numpy_views_order_on_two_streams():
    # Another start address, the same memory: the tail's fill waits for the whole's (held back),
    # so it lands last. Without that it would run at once and be overwritten.
    a = np.zeros(8, dtype=np.float32)
    whole = streamrt.from_numpy(a)
    tail = streamrt.from_numpy(a[4:])
    s1, gate = held_stream()
    s2 = streamrt.Stream()
    with streamrt.StreamContext(s1):
        whole.fill_(1.0)
    with streamrt.StreamContext(s2):
        tail.fill_(2.0)
    threading.Timer(0.2, gate.set).start()
    streamrt.synchronize()
    assert a.tolist() == [1.0] * 4 + [2.0] * 4
