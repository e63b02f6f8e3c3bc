"""docs/torch.md's Python examples run as written, each in a fresh interpreter (install() changes
torch process-wide), on whichever torch this suite runs with."""

import pathlib
import re
import subprocess
import sys

import pytest

pytest.importorskip("torch", reason="torch is not importable here: streamrt.torch is untested")

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "torch.md"
BLOCKS = re.findall(r"^```python\n(.*?)^```", DOC.read_text(), flags=re.S | re.M)


def test_the_doc_has_examples():
    assert BLOCKS, f"no ```python block in {DOC}"


@pytest.mark.parametrize("code", BLOCKS, ids=[f"block{i + 1}" for i in range(len(BLOCKS))])
def test_doc_example_runs(code):
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
