"""The fast path (_streamrt_torch, torch_runner_fast.cpp): an op seen before with the same argument
layouts is enqueued from C++ without Python. Each test warms its ops up (the first call is checked
on the worker, the second teaches the fast path), then checks that the calls under test took the
fast path (its counter) and behave as on the Python path: eager torch's results and layouts,
dependency tracking across streams, host reads that wait, failures, autograd, threads."""

import os
import subprocess
import sys

import pytest

import streamrt
from streamrt import _torch_mode, _torch_submit
from torch_streams_util import (  # noqa: F401  (fixture)
    Gate, assert_same_results, first_then_second, installed, run_per_seed, srt, torch, use_path)


@pytest.fixture
def fast(installed):
    if _torch_mode.path().native is None:
        pytest.skip("the fast path is part of _streamrt_torch's native path")
    assert _torch_mode.path().guard is not None, _torch_submit.unavailable("fast")
    return installed


def fast_ops():
    return _torch_submit.native().fast_counts()[0]


def warm(stream, fn, times=3):
    """Runs fn in a context on `stream` until the fast path knows its ops (checked first run, then
    taught), waiting in between so the first run's check is done."""
    for _ in range(times):
        with torch.cpu.StreamContext(stream):
            fn()
        stream.synchronize()


class counted:
    """Checks that the block enqueued at least `n` ops through the fast path."""

    def __init__(self, n):
        self.n = n

    def __enter__(self):
        self.before = fast_ops()
        return self

    def __exit__(self, *exc):
        if exc[0] is None:
            assert fast_ops() - self.before >= self.n, "the ops did not take the fast path"


A = torch.randn(8, 6)
B = torch.randn(8, 6)
M = torch.randn(6, 5)
I = torch.arange(12, dtype=torch.int64).reshape(3, 4)
IDX = torch.tensor([0, 2, 1])

CASES = {
    "add": lambda: torch.add(A, B),
    "mul by a float": lambda: A * 0.5,
    "sub with alpha": lambda: torch.sub(A, B, alpha=2),
    "mm": lambda: torch.mm(A, M),
    "addmm": lambda: torch.addmm(torch.ones(5), A, M),
    "relu": lambda: torch.relu(A),
    "sum over a dim": lambda: A.sum(dim=1),
    "transposed input": lambda: A.t() + B.t(),
    "int plus int": lambda: I + 2,
    "int plus float": lambda: I + 2.5,
    "cat": lambda: torch.cat([A, B], dim=1),
    "index_select": lambda: torch.index_select(A, 0, IDX),
    "mse_loss (no usable out=)": lambda: torch.nn.functional.mse_loss(A, B),
    "where": lambda: torch.where(A > 0, A, B),
    "softmax": lambda: torch.softmax(A, dim=1),
    "max with indices": lambda: torch.max(A, dim=1),
    "zeros": lambda: torch.zeros(4, 3),
}


@pytest.mark.parametrize("name", list(CASES))
def test_warm_ops_take_the_fast_path_with_eager_results(fast, name):
    fn = CASES[name]
    expected = fn()  # eager (outside any context)
    s = torch.cpu.Stream()
    warm(s, fn)
    with counted(1):
        with torch.cpu.StreamContext(s):
            got = fn()
    pairs = zip(expected, got) if isinstance(expected, tuple) else [(expected, got)]
    for e, g in pairs:
        assert g.dtype == e.dtype and g.shape == e.shape and g.stride() == e.stride()
        assert torch.equal(g, e)


def test_in_place_and_out_calls_take_the_fast_path(fast):
    s = torch.cpu.Stream()
    x, out = torch.zeros(10), torch.zeros(10)
    warm(s, lambda: (x.add_(1), torch.mul(x, 3, out=out)))
    with counted(2):
        with torch.cpu.StreamContext(s):
            r1 = x.add_(1)
            r2 = torch.mul(x, 3, out=out)
    assert r1 is x and r2 is out
    assert x.tolist() == [4.0] * 10 and out.tolist() == [12.0] * 10


def test_layouts_and_the_default_dtype_are_part_of_the_key(fast):
    s = torch.cpu.Stream()
    a = torch.randn(4, 4)
    warm(s, lambda: a + a)
    b = torch.randn(5, 3)
    with torch.cpu.StreamContext(s):
        r = b + b  # another shape: not taken from a's entry
        t = a.t() + a  # other strides
    assert r.shape == (5, 3) and torch.equal(r, b * 2)
    assert torch.equal(t, a.t() + a) and t.stride() == (a.t() + a).stride()
    warm(s, lambda: torch.zeros(3))
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        with torch.cpu.StreamContext(s):
            z = torch.zeros(3)
            f = torch.ones(3, dtype=torch.int32) + 0.5
        assert z.dtype == torch.float64 and f.dtype == torch.float64
    finally:
        torch.set_default_dtype(old)


def warm_pair(first, second):
    """Two new streams on which first() and second() have been warmed up: their next calls take
    the fast path."""
    s1, s2 = torch.cpu.Stream(), torch.cpu.Stream()
    warm(s1, first)
    warm(s2, second)
    return s1, s2


def test_read_after_write(fast):
    x = torch.zeros(100)
    s1, s2 = warm_pair(lambda: x.fill_(5), lambda: x + 1)
    with counted(2):
        # the add on s2 must wait for the fill on s1
        _, y = first_then_second(s1, s2, Gate().hold(s1), lambda: x.fill_(5), lambda: x + 1)
    assert y.tolist() == [6.0] * 100


def test_write_after_read(fast):
    x = torch.ones(100)
    s1, s2 = warm_pair(lambda: x * 3, lambda: x.fill_(7))
    x.copy_(torch.ones(100))
    with counted(2):
        # the fill on s2 must wait until s1 has read x
        y, _ = first_then_second(s1, s2, Gate().hold(s1), lambda: x * 3, lambda: x.fill_(7))
    assert y.tolist() == [3.0] * 100
    assert x.tolist() == [7.0] * 100


def test_write_after_write(fast):
    x = torch.zeros(100)
    s1, s2 = warm_pair(lambda: x.add_(1), lambda: x.mul_(2))
    x.zero_()
    with counted(2):
        # the product on s2 must land after s1's add
        first_then_second(s1, s2, Gate().hold(s1), lambda: x.add_(1), lambda: x.mul_(2))
    assert x.tolist() == [2.0] * 100


def test_views_share_their_bases_tracking(fast):
    s1, s2 = torch.cpu.Stream(), torch.cpu.Stream()
    base = torch.zeros(10, 10)
    warm(s1, lambda: base.fill_(4))
    warm(s2, lambda: (base[:, 3].clone(), base.t()[2].fill_(9)))
    base.zero_()
    gate = Gate().hold(s1)
    with counted(3):
        with torch.cpu.StreamContext(s1):
            base.fill_(4)
        with torch.cpu.StreamContext(s2):
            col = base[:, 3].clone()  # reads a view: waits for the base's writer
            base.t()[2].fill_(9)  # writes through a view of a view
    gate.open()
    assert col.tolist() == [4.0] * 10
    assert base[:, 2].tolist() == [9.0] * 10 and base[0, 3].item() == 4.0


def test_host_reads_wait_for_fast_path_work(fast):
    s = torch.cpu.Stream()
    x = torch.ones(50)
    warm(s, lambda: (x + 1, x.mul_(1)))
    gate = Gate().hold(s)
    with counted(2):
        with torch.cpu.StreamContext(s):
            y = x + 1
            x.mul_(3)
    gate.open_later()
    assert y.tolist() == [2.0] * 50  # waits for the held add
    gate2 = Gate().hold(s)
    with torch.cpu.StreamContext(s):
        x.mul_(1)
    gate2.open_later()
    assert x.numpy().tolist() == [3.0] * 50  # waits for the held in-place writes


def test_a_kernel_failure_on_the_fast_path_follows_the_stream_rules(fast):
    s = torch.cpu.Stream()
    a = torch.randn(4, 3)
    good, bad = torch.tensor([0, 1]), torch.tensor([0, 9])
    warm(s, lambda: torch.index_select(a, 0, good))
    with counted(1):
        with torch.cpu.StreamContext(s):
            r = torch.index_select(a, 0, bad)  # out of range: found by the kernel on the worker
    with pytest.raises(IndexError):
        r.tolist()
    with torch.cpu.StreamContext(s):
        ok = torch.index_select(a, 0, good)  # not sticky: later work goes on
    assert torch.equal(ok, a[:2])


def mlp(seed):
    torch.manual_seed(seed)
    net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    return net, torch.optim.SGD(net.parameters(), lr=0.05)


def train(net, opt, x, y, steps, stream=None):
    for _ in range(steps):
        with torch.cpu.StreamContext(stream):
            opt.zero_grad()
            torch.nn.functional.mse_loss(net(x), y).backward()
            opt.step()
        if stream is not None and _ < 2:
            stream.synchronize()  # (the first steps' checked runs, so the rest are fast)
    return [p.detach().clone() for p in net.parameters()]


def test_training_steps_on_the_fast_path_match_eager(fast):
    g = torch.Generator().manual_seed(3)
    x, y = torch.randn(64, 16, generator=g), torch.randn(64, 4, generator=g)
    expected = train(*mlp(0), x, y, 8)
    with counted(100):  # forward, backward and the optimizer's updates
        got = train(*mlp(0), x, y, 8, torch.cpu.Stream())
    for e, r in zip(expected, got):
        assert torch.allclose(e, r, rtol=1e-5, atol=1e-6)


def test_two_threads_on_the_fast_path(fast):
    g = torch.Generator().manual_seed(4)
    data = {seed: (torch.randn(64, 16, generator=g), torch.randn(64, 4, generator=g))
            for seed in (1, 2)}
    expected = {seed: train(*mlp(seed), *data[seed], 20) for seed in (1, 2)}
    nets = {seed: mlp(seed) for seed in (1, 2)}
    got = {}

    def run(seed):
        got[seed] = train(*nets[seed], *data[seed], 20, torch.cpu.Stream())

    with counted(200):
        run_per_seed(run, (1, 2))
    assert_same_results(expected, got, (1, 2))


def test_unusual_calls_leave_the_fast_path(fast):
    s = torch.cpu.Stream()
    a = torch.randn(3)
    warm(s, lambda: a + a)
    m = torch.empty(3, device="meta")
    before = fast_ops()
    with torch.cpu.StreamContext(s):
        r = m + m  # meta tensors: not stream work
        torch.manual_seed(5)
        n = torch.randn(3)  # random numbers: a host op, eager's numbers
    assert fast_ops() == before
    assert r.device.type == "meta"
    torch.manual_seed(5)
    assert torch.equal(n, torch.randn(3))


def test_uninstall_stops_the_fast_path(fast):
    s = torch.cpu.Stream()
    a = torch.randn(3)
    warm(s, lambda: a + a)
    srt.uninstall()
    try:
        before = fast_ops()
        with streamrt.cpu.StreamContext(s):
            r = a + a  # torch as it was: eager
        assert fast_ops() == before and torch.equal(r, a * 2)
    finally:
        srt.install()
    streamrt.synchronize()


def test_the_registry_hand_over_keeps_shares(fast):
    # Switching paths hands the tracker registry over between its C++ and Python forms: memory
    # shared with a streamrt tensor before is still tracked once after, both ways.
    s1, s2 = torch.cpu.Stream(), torch.cpu.Stream()
    x = streamrt.zeros(64)
    r = torch.from_dlpack(x)  # shared while the C++ registry is used

    def check(value):
        gate = Gate().hold(s1)
        with streamrt.cpu.StreamContext(s1):
            x.fill_(value)  # a streamrt write, held
        with torch.cpu.StreamContext(s2):
            y = r + 1  # a torch read of the same memory: must wait for it
        gate.open()
        assert y.tolist() == [value + 1] * 64

    for native in (False, True):
        srt.uninstall()
        use_path("native" if native else "python")
        srt.install()
        check(4.0 + native)


SEVERAL_OUTPUTS = r"""
import sys
import torch
import streamrt
import streamrt.torch as srt
from streamrt import _torch_mode
_torch_mode.use(None if sys.argv[1] == "native" else "python")
srt.install()
a = torch.randn(64, 32)
s = torch.cpu.Stream()
values, indices = torch.empty(64), torch.empty(64, dtype=torch.int64)
expected = [torch.max(a, dim=1), torch.sort(a, dim=1), torch.topk(a, 3)]
for _ in range(300):
    with torch.cpu.StreamContext(s):
        got = [torch.max(a, dim=1), torch.sort(a, dim=1), torch.topk(a, 3)]
        torch.max(a, dim=1, out=(values, indices))
    s.synchronize()
    for e, g in zip(expected, got):
        assert torch.equal(e[0], g[0]) and torch.equal(e[1], g[1])
    assert torch.equal(values, expected[0][0]) and torch.equal(indices, expected[0][1])
srt.uninstall()
print("ok")
"""


@pytest.mark.parametrize("path", ["native", "python"])
def test_ops_returning_several_out_tensors_keep_them_alive(path):
    # max/sort/topk return a tuple of references to their out= tensors; the work item's copies of
    # those must outlive torch's boxed call (a use after free, then a double free, otherwise). In
    # a child: the failure this guards against aborts the process.
    if path == "native" and _torch_submit.native() is None:
        pytest.skip("_streamrt_torch was not built")
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(
        streamrt.__file__))))
    proc = subprocess.run([sys.executable, "-c", SEVERAL_OUTPUTS, path], capture_output=True,
                          text=True, timeout=300, env=env)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]
