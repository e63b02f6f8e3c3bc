"""The torch examples (examples/python/) run as users run them, each in a fresh interpreter; and a
fresh interpreter that installs streamrt.torch and exits with torch work queued finishes it."""

import os
import pathlib
import subprocess
import sys

import pytest

pytest.importorskip("torch", reason="torch is not importable here: the torch examples need it")

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples" / "python"
TIMEOUT_S = 300  # a hang fails; the examples take a few seconds


def run(*argv):
    proc = subprocess.run([sys.executable, *map(str, argv)], capture_output=True, text=True,
                          timeout=TIMEOUT_S, env=dict(os.environ))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_the_seed_example_with_one_added_line_runs():
    source = (EXAMPLES / "seed_torch_streams.py").read_text()
    assert "streamrt.torch.install(cuda=True)" in source
    run(EXAMPLES / "seed_torch_streams.py")


def test_the_ensemble_example_runs():
    out = run(EXAMPLES / "ensemble_torch_streams.py", "--nets", "3", "--width", "64", "--batch",
              "16", "--steps", "3")
    assert out.count("loss") == 3 and "ms per step" in out


def test_exit_with_queued_torch_work_finishes_it():
    out = run("-c", "\n".join([
        "import torch, streamrt.torch",
        "streamrt.torch.install()",
        "s = torch.cpu.Stream()",
        "x = torch.zeros(1000)",
        "with torch.cpu.StreamContext(s):",
        "    for _ in range(100):",
        "        x.add_(1)",
        "import atexit",
        "atexit.register(lambda: print('sum', float(torch._C._TensorBase.sum(x))))",
    ]))
    assert "sum 100000.0" in out
