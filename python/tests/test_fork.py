"""os.fork() and multiprocessing with stream work queued: fork waits for it (up to the fork
time-out), so a child (a DataLoader worker) reads finished results as it would eagerly; work that
cannot finish in time runs in the parent only and the child's reads of it raise Cancelled saying
why. Each case runs in a fresh interpreter, which is killed if it hangs."""

import os

import pytest

import streamrt
from helpers import run_python

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork()")

CHILD_TIMEOUT_S = 300  # a hang fails; each case takes a second or two


def run_script(body, env=None):
    proc = run_python(body, CHILD_TIMEOUT_S, env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


# The parent forks, the child checks and leaves with os._exit(code); the parent exits with the
# child's code (after finishing its own work).
FORK_AND_CHECK = """
    import os, time, threading
    import streamrt

    def fork_and_check(check):
        pid = os.fork()
        if pid == 0:
            try:
                code = check()
            except BaseException as e:  # noqa: BLE001 (the child reports whatever it saw)
                print("child:", type(e).__name__, e, flush=True)
                code = 9
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        return os.waitstatus_to_exitcode(status)
"""


def test_os_fork_waits_for_queued_work_and_the_child_reads_its_results():
    # The stream's first item is a Python callable: it needs the GIL, which os.fork() holds
    # through the C++ fork handler, so the wait must happen before, without it.
    run_script(
        FORK_AND_CHECK
        + """
    s = streamrt.Stream()
    with streamrt.cpu.StreamContext(s):
        s.launch(time.sleep, 0.3)
        x = streamrt.ones(1000)
        for _ in range(10):
            x = x + 1
    code = fork_and_check(lambda: 0 if x.sum().item() == 11000.0 else 3)
    assert x.sum().item() == 11000.0  # ran once, in the parent
    raise SystemExit(code)
    """,
        env={"STREAMRT_FORK_TIMEOUT": "120"},
    )


def test_a_failure_waited_for_before_a_fork_is_still_reported_in_the_parent():
    proc = run_script(
        FORK_AND_CHECK
        + """
    s = streamrt.Stream()
    s.launch(time.sleep, 0.3)
    s.launch(lambda: 1 / 0)
    e = s.record_event()

    def check():
        try:
            e.synchronize()
        except ZeroDivisionError:
            return 0  # the failure, not Cancelled: the work ran before the fork
        return 3

    code = fork_and_check(check)
    try:
        s.synchronize()
        code = code or 4
    except ZeroDivisionError:
        pass
    raise SystemExit(code)
    """,
        env={"STREAMRT_FORK_TIMEOUT": "120"},
    )
    assert "never reported" not in proc.stderr, proc.stderr


def test_os_fork_gives_up_after_its_time_out_and_the_child_is_told_why():
    # The stream is held until the parent sets the gate, after the fork: the wait cannot succeed,
    # and without its bound the parent would hang here.
    proc = run_script(
        FORK_AND_CHECK
        + """
    gate = threading.Event()
    s = streamrt.Stream()
    s.launch(gate.wait, 120)
    with streamrt.cpu.StreamContext(s):
        x = streamrt.ones(4) + 1

    def check():
        try:
            x.sum().item()
        except streamrt.Cancelled as e:
            text = str(e)
            ok = "forked" in text and "time-out of 0.3 s" in text and "STREAMRT_FORK_TIMEOUT" in text
            return 0 if ok else 3
        return 4

    code = fork_and_check(check)
    gate.set()
    assert x.sum().item() == 8.0
    raise SystemExit(code)
    """,
        env={"STREAMRT_FORK_TIMEOUT": "0.3"},
    )
    assert "fork() went ahead with stream work unfinished" in proc.stderr, proc.stderr


def test_work_dropped_in_the_child_is_released_once_the_interpreter_is_usable_again():
    # The child drops the parent's unfinished work inside the C fork handler, before Python has
    # reset its GIL there; releasing its Python references then can hang the child (the GIL may
    # await a hand-over to a parent thread that is gone). They are released in the interpreter's
    # after-fork hook instead, which runs after this script's own (registered first).
    run_script(
        """
    import os
    hooks_ran = []
    os.register_at_fork(after_in_child=lambda: hooks_ran.append(True))
    """
        + FORK_AND_CHECK
        + """
    parent = os.getpid()
    released_in_child = []

    class Work:
        def __call__(self):
            pass

        def __del__(self):
            if os.getpid() != parent:
                released_in_child.append(bool(hooks_ran))

    gate = threading.Event()
    s = streamrt.Stream()
    s.launch(gate.wait, 120)
    s.launch(Work())  # queued behind the gate: dropped in the child

    code = fork_and_check(lambda: 0 if released_in_child == [True] else 3)
    gate.set()
    s.synchronize()
    raise SystemExit(code)
    """,
        env={"STREAMRT_FORK_TIMEOUT": "0.3"},
    )


def test_fork_time_out_setting():
    before = streamrt.get_fork_timeout()
    try:
        streamrt.set_fork_timeout(2.5)
        assert streamrt.get_fork_timeout() == 2.5
        streamrt.set_fork_timeout(0)
        assert streamrt.get_fork_timeout() == 0
        for bad in (-1, 86401, float("inf"), float("nan")):
            with pytest.raises(ValueError, match="from 0 to 86400 seconds"):
                streamrt.set_fork_timeout(bad)
    finally:
        streamrt.set_fork_timeout(before)


def test_a_bad_fork_time_out_in_the_environment_names_the_variable():
    proc = run_python("import streamrt; streamrt.ones(2).sum().item()", CHILD_TIMEOUT_S,
                      {"STREAMRT_FORK_TIMEOUT": "soon"})
    assert proc.returncode != 0
    assert "STREAMRT_FORK_TIMEOUT='soon'" in proc.stderr, proc.stderr


# ---- torch: DataLoader worker processes ---------------------------------------------------------


def test_dataloader_workers_over_a_dataset_normalised_on_a_stream_match_eager():
    pytest.importorskip("torch", reason="needs torch")
    run_script(
        """
    import time
    import torch
    import streamrt, streamrt.torch
    from torch.utils.data import DataLoader, TensorDataset

    torch.manual_seed(0)
    raw = torch.rand(256, 16)
    labels = torch.arange(256)
    eager = (raw - raw.mean(0)) / raw.std(0)

    streamrt.torch.install()
    s = torch.cpu.Stream()
    with torch.cpu.StreamContext(s):
        s.launch(time.sleep, 0.3)  # the normalisation is still queued when the workers fork
        data = (raw - raw.mean(0)) / raw.std(0)
    loader = DataLoader(TensorDataset(data, labels), batch_size=32, num_workers=2)
    got, order = [], []
    for x, y in loader:
        got.append(x)
        order.append(y)
    assert torch.equal(torch.cat(order), labels)
    assert torch.equal(torch.cat(got), eager), "differs from eager"
    print("ok", flush=True)
    """,
        env={"STREAMRT_FORK_TIMEOUT": "120"},
    )


def test_a_fork_with_torch_outputs_freed_meanwhile_does_not_wait_out_its_time_out():
    # The queued ops' outputs are freed by the workers while fork()'s handler waits for them: the
    # output cache and the prepared-op pool must not be locked across that wait. A fork() from C
    # (no Python hook waits first, as for os.fork), with ctypes releasing the GIL meanwhile.
    pytest.importorskip("torch", reason="needs torch")
    run_script(
        """
    import ctypes, os, time
    import torch
    import streamrt.torch
    streamrt.torch.install()
    s = torch.cpu.Stream()
    a = torch.ones(256, 256)
    with torch.cpu.StreamContext(s):
        s.launch(time.sleep, 0.3)
        for _ in range(50):
            a * 2  # dropped at once: the worker frees each output
        kept = a + 1
    start = time.monotonic()
    pid = ctypes.CDLL(None).fork()
    if pid == 0:
        os._exit(0)
    assert time.monotonic() - start < 60, "fork() waited out its time-out"
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert bool((kept == 2).all())
    with torch.cpu.StreamContext(s):
        y = a * 3
    assert bool((y == 3).all())
    """,
        env={"STREAMRT_FORK_TIMEOUT": "120"},
    )
