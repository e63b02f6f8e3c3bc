"""Runs a Python code block of a document under mpirun, as a reader would: the ```python block
whose first line starts with MARKER is written to a file and started with `MPIEXEC -n NP PYTHON -m
mpi4py FILE` (an exception on one rank aborts the job). Fails when the block is missing or the
run fails.

usage: run_doc_snippet.py DOC MARKER MPIEXEC NP PYTHON WORK_DIR"""

import os
import pathlib
import re
import subprocess
import sys


def main():
    doc, marker, mpiexec, np, python, work = sys.argv[1:7]
    blocks = re.findall(r"^```python\n(.*?)^```", pathlib.Path(doc).read_text(), re.M | re.S)
    code = [b for b in blocks if b.startswith(marker)]
    if len(code) != 1:
        print(f"FAILED: {doc} has {len(code)} python blocks starting with {marker!r}")
        return 1
    os.makedirs(work, exist_ok=True)
    script = pathlib.Path(work) / "snippet.py"
    script.write_text(code[0])
    cmd = [mpiexec, "-n", np, python, "-m", "mpi4py", str(script)]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=work)
    sys.stdout.write(run.stdout)
    sys.stderr.write(run.stderr)
    if run.returncode != 0:
        print(f"FAILED: {' '.join(cmd)} exited with {run.returncode}")
        return 1
    if run.stdout.count("all-reduced gradient") != int(np):
        print("FAILED: not every rank printed its result")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
