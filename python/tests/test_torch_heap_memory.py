"""Memory glibc keeps free inside its main heap after torch work on streams goes back to the system:
a worker that runs a torch op trims the heap once it has grown well past the last look (at most
every quarter of a second). Fresh interpreters, so that the heap is this test's alone."""

import os
import subprocess
import sys

import pytest

import streamrt
from torch_streams_util import torch  # noqa: F401  (skips without torch)
from streamrt import _torch_submit

pytestmark = pytest.mark.skipif(
    _torch_submit.native() is None, reason="the trim is the native runner's (_streamrt_torch)")

HOLES = """
import os, time
import torch
import streamrt.torch as srt

def resident_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

srt.install()
s = torch.cpu.Stream()
a = torch.ones(8)

def one_op_on_a_worker():
    with torch.cpu.StreamContext(s):
        a.add_(1)
    s.synchronize()

one_op_on_a_worker()  # the first look: where the heap starts
time.sleep(0.3)
# 300 MB of heap chunks (each under glibc's mmap threshold), touched, then all freed but the last:
# free memory inside the heap, which glibc keeps resident (the last chunk holds its top)
blocks = [torch.ones(25_000) for _ in range(3_000)]
last = blocks[-1]
del blocks
before = resident_mb()
one_op_on_a_worker()
after = resident_mb()
print(round(before), round(after), a[0].item())
"""


def test_a_worker_gives_back_free_heap_memory_once_the_heap_grew():
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(streamrt.__file__)))
    proc = subprocess.run([sys.executable, "-c", HOLES], capture_output=True, text=True,
                          timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    before, after, value = proc.stdout.split()
    assert float(value) == 3.0
    assert int(before) - int(after) > 200, (
        f"resident {before} MB before the op on a worker, {after} MB after: nothing given back")
