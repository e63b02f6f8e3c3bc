"""The caching allocator from Python: counters, reuse, empty_cache, the cache limit and its
environment variable (a bad value is a clear error)."""

import os
import subprocess
import sys

import pytest

import streamrt

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
    with pytest.raises(ValueError, match="bytes must be >= 0"):
        streamrt.set_memory_cache_limit(-1)


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
