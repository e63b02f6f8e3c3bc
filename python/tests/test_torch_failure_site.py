"""Failures of torch ops run on streams say where they came from (docs/torch.md, "Failures"): the
exception a later read raises keeps eager torch's type and message and carries a note naming the
op and the line that queued it, on every way an op is enqueued (the Python path, the native
runner, the fast path); STREAMRT_LAUNCH_BLOCKING=1 raises it at that line instead."""

import os
import subprocess
import sys
import textwrap

import pytest

from streamrt import _torch_mode
from torch_streams_util import installed, srt, torch  # noqa: F401  (fixture)

HERE = os.path.basename(__file__)
CHILD_TIMEOUT_S = 120  # a hang fails the test; a normal run takes a few seconds


def notes(e):
    return "\n".join(getattr(e, "__notes__", []))


def line_after():
    """The line number after the caller's line (the call under test is put there)."""
    return sys._getframe(1).f_lineno + 1


def test_a_kernel_failure_read_later_names_the_op_and_the_line(installed):
    x = torch.arange(5.0)
    s = torch.cpu.Stream()
    with torch.cpu.StreamContext(s):
        line = line_after()
        bad = torch.index_select(x, 0, torch.tensor([1, 50]))  # out of range: fails on a worker
        after = bad * 2  # depends on it: skipped, and raises the same failure
    with pytest.raises(IndexError, match="out of range") as info:
        after.tolist()
    assert "aten::index_select" in notes(info.value), notes(info.value)
    assert f"{HERE}:{line}" in notes(info.value), notes(info.value)


def test_the_line_is_the_users_not_torchs_python_wrappers(installed):
    # torch.nn.functional.embedding is Python code of torch's that calls the op: the note names
    # the line here that called it.
    weight = torch.randn(4, 3)
    s = torch.cpu.Stream()
    with torch.cpu.StreamContext(s):
        line = line_after()
        out = torch.nn.functional.embedding(torch.tensor([9]), weight)
    with pytest.raises(IndexError) as info:
        out.tolist()
    assert f"{HERE}:{line}" in notes(info.value), notes(info.value)


def test_the_fast_path_names_the_line_too(installed):
    if _torch_mode.path().guard is None:
        pytest.skip("the fast path is part of _streamrt_torch's native path")
    fast_ops = _torch_mode.path().native.fast_counts
    x = torch.arange(5.0)
    good, bad = torch.tensor([0, 1]), torch.tensor([0, 50])
    s = torch.cpu.Stream()
    for _ in range(3):  # checked on its first run, then taught to the fast path
        with torch.cpu.StreamContext(s):
            torch.index_select(x, 0, good)
        s.synchronize()
    before = fast_ops()[0]
    with torch.cpu.StreamContext(s):
        line = line_after()
        r = torch.index_select(x, 0, bad)
    assert fast_ops()[0] > before, "the op did not take the fast path"
    with pytest.raises(IndexError) as info:
        r.tolist()
    assert f"{HERE}:{line}" in notes(info.value), notes(info.value)


SCRIPT = """
    import traceback
    import torch
    import streamrt.torch
    streamrt.torch.install()
    x = torch.arange(5.0)
    try:
        with torch.cpu.StreamContext(torch.cpu.Stream()):
            for _ in range(3):  # (the fast path would know the op from the second time on)
                r = torch.index_select(x, 0, torch.tensor([1, 50]))  # line 10
        r.tolist()  # line 11
    except IndexError as e:
        print("raised at line", traceback.extract_tb(e.__traceback__)[0].lineno)
"""


@pytest.mark.parametrize("value, line", [("1", 10), ("0", 11)])
def test_launch_blocking_raises_a_torch_failure_at_its_line(value, line):
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(SCRIPT)], capture_output=True, text=True,
        timeout=CHILD_TIMEOUT_S, env=dict(os.environ, STREAMRT_LAUNCH_BLOCKING=value))
    assert proc.returncode == 0, proc.stderr
    assert f"raised at line {line}\n" in proc.stdout, proc.stdout + proc.stderr
