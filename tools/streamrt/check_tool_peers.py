#!/usr/bin/env python3
"""The installed streamrt tool loads no library streamrt does not need (no oneTBB, OpenCL or
Boost): its `bench --list` runs streamrt and the peers that need none, and lists the others as
left out, pointing to bench/streamrt_compare. Usage: check_tool_peers.py TOOL"""
import subprocess
import sys

tool = sys.argv[1]
libs = subprocess.run(["ldd", tool], check=True, capture_output=True, text=True).stdout
for lib in ("libtbb", "libOpenCL", "libboost"):
    assert lib not in libs, f"{tool} links {lib}:\n{libs}"
jobs = subprocess.run([tool, "bench", "--list", "--filter", "^round_trip/"], check=True,
                      capture_output=True, text=True).stdout.splitlines()
runnable = {j for j in jobs if "(skipped" not in j}
left_out = {j.split()[0]: j for j in jobs if "(skipped" in j}
for peer in ("streamrt", "async", "thread_queue"):
    assert f"round_trip/{peer}" in runnable, (peer, jobs)
for peer in ("tbb_strand", "tbb_group", "asio_strand", "opencl"):
    line = left_out.get(f"round_trip/{peer}", "")
    assert "streamrt_compare" in line, (peer, jobs)
print("the installed tool's bench: streamrt, async and thread_queue run; oneTBB, Asio and OpenCL "
      "are left to streamrt_compare")
