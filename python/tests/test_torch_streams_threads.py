"""Threads and cores: two Python threads with a stream each; torch kernels run with the GIL
released (kernels of two streams overlap in time); install() sets torch's intra-op threads and
OpenBLAS so that streams do not oversubscribe the cores; threads that enter and leave contexts on
their own streams while the main thread drives its own never see an op reach Python again (on a
worker, or on a host thread that helps run queued work while it waits)."""

import ctypes
import os
import subprocess
import sys
import threading
import time

import pytest

import streamrt
from helpers import RENDEZVOUS_S
from torch_streams_util import (  # noqa: F401  (fixture)
    assert_same_results, installed, run_per_seed, srt, torch)


def make_net(seed):
    # Made on the main thread: nn.Linear draws its initial weights from torch's global generator,
    # which two threads would share.
    torch.manual_seed(seed)
    net = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    g = torch.Generator().manual_seed(seed)
    return net, torch.randn(128, 32, generator=g), torch.randn(128, 1, generator=g)


def train(net, x, y, steps, stream):
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    with torch.cpu.StreamContext(stream):
        for _ in range(steps):
            opt.zero_grad()
            torch.nn.functional.mse_loss(net(x), y).backward()
            opt.step()
    return [p.detach().clone() for p in net.parameters()]


def test_two_python_threads_with_a_stream_each(installed):
    expected = {seed: train(*make_net(seed), 10, None) for seed in (1, 2)}
    got = {}
    work = {seed: make_net(seed) for seed in (1, 2)}

    def run(seed):
        got[seed] = train(*work[seed], 10, torch.cpu.Stream())

    run_per_seed(run, (1, 2))
    assert_same_results(expected, got, (1, 2))


def test_kernels_of_two_streams_run_at_the_same_time(installed):
    # Both streams keep getting matmuls until the profiler shows one on each stream overlapping in
    # time. The workers take the GIL only to call the kernel; if the kernel kept it, no two could
    # overlap and this would fail at the rendezvous time-out.
    a = torch.randn(300, 300)
    s1, s2 = torch.cpu.Stream(), torch.cpu.Stream()
    deadline = time.monotonic() + RENDEZVOUS_S
    overlapped = False
    while not overlapped and time.monotonic() < deadline:
        with streamrt.profile() as p:
            for _ in range(4):
                with torch.cpu.StreamContext(s1):
                    torch.mm(a, a)
                with torch.cpu.StreamContext(s2):
                    torch.mm(a, a)
            streamrt.synchronize()
        mm = [r for r in p.records() if r.label.endswith("mm.out") or r.label.endswith("mm")]
        one = [(r.start_ns, r.end_ns) for r in mm if r.stream_id == s1.id]
        two = [(r.start_ns, r.end_ns) for r in mm if r.stream_id == s2.id]
        assert one and two, [r.label for r in p.records()]
        overlapped = any(b1 < e2 and b2 < e1 for b1, e1 in one for b2, e2 in two)
    assert overlapped


def test_install_keeps_torch_threads_and_sets_one_openblas_thread_per_call(workers):
    # The installing thread's own ops (outside contexts, and host ops) keep eager's intra-op
    # threads; OpenBLAS's count is process-wide, so it is one per call for every stream's products.
    before, blas = torch.get_num_threads(), streamrt._blas_threads()
    if blas is not None:
        streamrt._set_blas_threads(2)  # so that the change is seen on a one-core machine too
    srt.install()
    try:
        assert torch.get_num_threads() == before
        assert streamrt._blas_threads() in (None, 1)  # None: not OpenBLAS
    finally:
        srt.uninstall()
        after = streamrt._blas_threads()
        if blas is not None:
            streamrt._set_blas_threads(blas)
    assert torch.get_num_threads() == before
    assert after in (None, 2)


def worker_policy():
    # The scheduling policy an item runs under on a worker. The host waits on a threading.Event,
    # not on the stream, so it runs no item itself.
    seen, done = [], threading.Event()
    s = streamrt.Stream()
    s.launch(lambda: (seen.append(os.sched_getscheduler(0)), done.set()))
    assert done.wait(RENDEZVOUS_S)
    s.synchronize()
    return seen[0]


@pytest.fixture
def default_worker_policy():
    """The workers under the default policy for the test, the setting restored after; skipped
    where STREAMRT_WORKER_BATCH decides the policy, or where the OS refuses SCHED_BATCH."""
    if "STREAMRT_WORKER_BATCH" in os.environ:
        pytest.skip("STREAMRT_WORKER_BATCH is set: install() leaves the policy to it")
    saved = streamrt.get_worker_batch()
    try:
        streamrt.set_worker_batch(True)
    except streamrt.Error as e:
        pytest.skip(f"this machine refuses SCHED_BATCH: {e}")
    streamrt.set_worker_batch(False)
    yield
    streamrt.set_worker_batch(saved)


def test_install_runs_the_workers_under_sched_batch_and_uninstall_restores(
        workers, default_worker_policy):
    # The thread that enqueues shares the cores with the workers: a woken worker must not preempt
    # it. Workers started after install() get the policy too.
    workers(1)
    srt.install()
    try:
        assert streamrt.get_worker_batch() is True
        assert worker_policy() == os.SCHED_BATCH
        workers(3)
        assert {worker_policy() for _ in range(6)} == {os.SCHED_BATCH}
    finally:
        srt.uninstall()
    assert streamrt.get_worker_batch() is False
    assert worker_policy() == os.SCHED_OTHER
    assert os.sched_getscheduler(0) == os.SCHED_OTHER  # the host thread is never changed


def test_uninstall_keeps_a_worker_policy_that_install_did_not_set(workers, default_worker_policy):
    streamrt.set_worker_batch(True)  # the user's own, before install()
    srt.install()
    srt.uninstall()
    assert streamrt.get_worker_batch() is True
    srt.install()
    streamrt.set_worker_batch(False)  # the user's own, while installed
    srt.uninstall()
    assert streamrt.get_worker_batch() is False
    assert worker_policy() == os.SCHED_OTHER


def test_install_leaves_the_worker_policy_to_streamrt_worker_batch():
    code = ("import os, streamrt, streamrt.torch as srt\n"
            "srt.install()\n"
            "print('batch', streamrt.get_worker_batch())\n")
    env = dict(os.environ, STREAMRT_WORKER_BATCH="0")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=RENDEZVOUS_S)
    assert out.returncode == 0, out.stderr
    assert "batch False" in out.stdout, out.stdout


def test_the_host_keeps_its_torch_threads_while_workers_run_on_one(installed):
    # Each item sets one intra-op thread on the thread that runs it; the host's waits (timed, in
    # slices) run no item, so the host's own ops keep the count it had, eager's.
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        streamrt.set_num_threads(1)
        s = srt.Stream()
        a = torch.ones(64, 64)
        for _ in range(20):
            with torch.cpu.StreamContext(s):
                y = a @ a
            s.synchronize()
            torch.cpu.synchronize()
            assert y[0, 0].item() == 64.0
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


FRESH_THREADS = """
import threading
import torch
import streamrt.torch as srt

def fresh_threads_count():
    out = []
    t = threading.Thread(target=lambda: out.append(torch.get_num_threads()))
    t.start()
    t.join()
    return out[0]

before = fresh_threads_count()  # what a new thread starts with (it asks for its own only)
srt.install()
a = torch.ones(256, 256)
s = torch.cpu.Stream()
with torch.cpu.StreamContext(s):
    for _ in range(8):
        a = a @ torch.ones(256, 256) / 256
s.synchronize()
print(before, fresh_threads_count(), torch.get_num_threads())
"""


def test_threads_that_ask_after_stream_work_get_eagers_torch_threads():
    # torch initialises a thread's count lazily from a process-wide one, which torch's own setter
    # changes: work items setting their thread's count must leave it alone.
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(streamrt.__file__)))
    proc = subprocess.run([sys.executable, "-c", FRESH_THREADS], capture_output=True,
                          text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    before, new_thread, main_thread = proc.stdout.split()
    if before == "1":
        pytest.skip("a new thread gets one intra-op thread here anyway (one core, or torch 1.13)")
    assert new_thread == before and main_thread == before, proc.stdout


IMPORT_KEEPS_BLAS = """
import ctypes, os
import torch
try:
    lib = ctypes.CDLL("libopenblas.so.0", mode=os.RTLD_NOLOAD | os.RTLD_NOW)
except OSError:
    lib = None
a = torch.randn(300, 300, generator=torch.Generator().manual_seed(0))
before = (a @ a, lib.openblas_get_num_threads() if lib else None)
import streamrt
after = (a @ a, lib.openblas_get_num_threads() if lib else None)
print(torch.equal(before[0], after[0]), before[1], after[1])
"""


def test_importing_streamrt_changes_no_eager_setting_or_result():
    # OpenBLAS at two threads (its default on two cores, set here for any machine): before, the
    # import set one thread per call, process-wide, which changed eager products' bits.
    env = dict(os.environ, OPENBLAS_NUM_THREADS="2", PYTHONPATH=os.path.dirname(
        os.path.dirname(os.path.abspath(streamrt.__file__))))
    proc = subprocess.run([sys.executable, "-c", IMPORT_KEEPS_BLAS], capture_output=True,
                          text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    same, before, after = proc.stdout.split()
    assert same == "True" and before == after, proc.stdout


def one_thread(fn):
    """fn() on this thread with one intra-op thread, as work items run (a reduction's bits depend
    on how many threads share it)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return fn()
    finally:
        torch.set_num_threads(before)


def run_threads(n, rounds, size):
    g = torch.Generator().manual_seed(n)
    a, b = torch.randn(size, size, generator=g), torch.randn(size, size, generator=g)
    expected = one_thread(lambda: (a @ b).sum())  # as a stream's kernels run
    main_stream = torch.cpu.Stream()
    with torch.cpu.StreamContext(main_stream):  # the main thread has used contexts before
        (a @ b).sum()
    main_stream.synchronize()
    failures, results = [], [[] for _ in range(n)]
    start = threading.Barrier(n + 1, timeout=RENDEZVOUS_S)

    def work(k):
        stream = torch.cpu.Stream()
        try:
            start.wait()
            for _ in range(rounds):
                with torch.cpu.StreamContext(stream):
                    out = (a @ b).sum()
                stream.synchronize()
                results[k].append(out)
        except BaseException as e:  # noqa: BLE001  (every failure is the test's finding)
            failures.append(f"thread {k}: {e!r}")

    threads = [threading.Thread(target=work, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    start.wait()
    mine = []
    for _ in range(rounds // 10 + 1):
        with torch.cpu.StreamContext(main_stream):
            mine.append((a @ b).sum())
        main_stream.synchronize()
    for t in threads:
        t.join(RENDEZVOUS_S)
    assert not any(t.is_alive() for t in threads), "a thread did not finish"
    assert failures == []
    for out in [x for r in results for x in r] + mine:
        assert torch.equal(out, expected)
    assert [len(r) for r in results] == [rounds] * n


@pytest.mark.parametrize("n", [2, 4, 8])
def test_threads_on_their_own_streams_never_fail(installed, n):
    run_threads(n, 1000, 32)


def test_two_threads_of_large_products(installed):
    run_threads(2, 8, 1000)


def _mkl_threads():
    """MKL's thread count for the calling thread (PyPI's torch links MKL into libtorch_cpu), or
    None where torch has no MKL (Debian's torch: OpenBLAS)."""
    try:
        lib = ctypes.CDLL(os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so"))
        return lib.mkl_get_max_threads
    except (OSError, AttributeError):
        return None


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="one core: every thread defaults to one")
def test_a_worker_multiplies_on_one_thread(installed):
    # torch's thread counts are per thread (OpenMP's, and MKL's local one): install() sets the
    # installing thread's, and a worker must not keep the default (every core) for its products,
    # or two streams oversubscribe the cores.
    mkl_threads = _mkl_threads()
    if mkl_threads is None:
        pytest.skip("this torch has no MKL (its products are OpenBLAS's, set process-wide)")
    streamrt.set_num_threads(1)  # one worker: the product and the probe below run on it
    s = srt.Stream()
    seen, done = [], threading.Event()
    a = torch.ones(64, 64)
    with torch.cpu.StreamContext(s):
        y = a @ a
    s.launch(lambda: (seen.append(mkl_threads()), done.set()))
    assert done.wait(RENDEZVOUS_S)  # (an event, not a stream wait: the host runs no item)
    assert seen == [1] and y[0, 0].item() == 64.0
