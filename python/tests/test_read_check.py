"""The read checker (STREAMRT_READ_CHECK=1): a host read through an alias the runtime cannot see
(a numpy array over a tensor's memory) while a write to that memory is still queued is reported,
naming the op, its stream and the line that queued it, and the process aborts; a program that waits
before it reads runs to the end. Each scenario runs in a fresh interpreter, the queued write held
behind a gate so that the read is early for certain."""

import os
import signal
import subprocess
import sys
import textwrap

import pytest

CHILD_TIMEOUT_S = 120  # a hang fails the test; a run takes a second or two

GATED = """
import threading
import numpy as np
import streamrt
a = np.zeros(1 << 16)  # 512 KiB: whole pages the checker can close
opened = threading.Event()
s = streamrt.Stream()
s.launch(lambda: opened.wait(60))
"""


def run_child(tmp_path, body, check="1"):
    path = tmp_path / "child.py"
    path.write_text(textwrap.dedent(GATED) + textwrap.dedent(body))
    env = dict(os.environ, STREAMRT_READ_CHECK=check)
    return subprocess.run(
        [sys.executable, "-X", "faulthandler", str(path)],
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
        env=env,
    )


def line_of(tmp_path, text):
    lines = (tmp_path / "child.py").read_text().splitlines()
    return next(i + 1 for i, line in enumerate(lines) if text in line)


EARLY_NUMPY_READ = """
t = streamrt.from_numpy(a)
with streamrt.StreamContext(s):
    t.fill_(1.0)  # queued write
print(a[5000])  # early read
opened.set()
"""


def test_an_early_read_through_a_numpy_alias_is_reported(tmp_path):
    proc = run_child(tmp_path, EARLY_NUMPY_READ)
    assert proc.returncode == -signal.SIGABRT, (proc.returncode, proc.stdout, proc.stderr)
    err = proc.stderr
    assert "streamrt read check: a host thread read memory that queued stream work" in err, err
    assert "float64 tensor of shape [65536]" in err, err
    queued_at = f"{tmp_path / 'child.py'}:{line_of(tmp_path, 'queued write')}"
    assert f"'fill' queued at {queued_at} on cpu:0 stream" in err, err
    # faulthandler's traceback names the line that read.
    assert f'child.py", line {line_of(tmp_path, "early read")}' in err, err
    assert proc.stdout == ""  # the old value was never printed


def test_without_the_checker_the_same_read_sees_the_old_value(tmp_path):
    proc = run_child(tmp_path, EARLY_NUMPY_READ, check="0")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "0.0"


def test_a_program_that_waits_before_reading_runs_under_the_checker(tmp_path):
    proc = run_child(
        tmp_path,
        """
        t = streamrt.from_numpy(a)
        with streamrt.StreamContext(s):
            for _ in range(20):
                t.fill_(2.0)
        opened.set()
        s.synchronize()
        print(a[5000], a[-1])
        a[:] = 7.0  # the host writes it too, once the stream is done
        print(t.sum().item())
        """,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["2.0", "2.0", str(7.0 * (1 << 16))]


def test_a_bad_setting_is_a_clear_error(tmp_path):
    proc = run_child(tmp_path, "opened.set()\n" + EARLY_NUMPY_READ, check="yes")
    assert proc.returncode == 1
    assert "STREAMRT_READ_CHECK='yes' is not a setting" in proc.stderr, proc.stderr


def test_an_early_read_of_a_torch_tensors_numpy_alias_is_reported(tmp_path):
    pytest.importorskip("torch")
    proc = run_child(
        tmp_path,
        """
        import torch
        import streamrt.torch
        streamrt.torch.install()
        x = torch.from_numpy(a)
        with torch.cpu.StreamContext(s):
            x.add_(1)  # queued write
        print(a[5000])  # early read
        opened.set()
        """,
    )
    assert proc.returncode == -signal.SIGABRT, (proc.returncode, proc.stdout, proc.stderr)
    queued_at = f"{tmp_path / 'child.py'}:{line_of(tmp_path, 'queued write')}"
    assert f"queued at {queued_at} on cpu:0 stream" in proc.stderr, proc.stderr
    assert "aten::add_" in proc.stderr, proc.stderr
    assert proc.stdout == ""
