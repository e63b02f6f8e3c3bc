"""Exit of ranks whose collective can never complete: rank 0 all-reduces 4 elements, rank 1
100,000 (the other ranks none). Each rank's Work.wait(5) returns False; exit then waits at most
STREAMRT_EXIT_TIMEOUT seconds, says so, and aborts the job instead of hanging for ever.

usage: exit_mismatch.py MPIEXEC PYTHON (runs itself under MPIEXEC -n 2 with the argument 'rank')"""

import os
import subprocess
import sys
import time

RANK_SCRIPT = """
import streamrt
import streamrt.distributed as dist
dist.init_process_group()
n = 4 if dist.get_rank() == 0 else 100_000
t = streamrt.ones(n)
work = dist.all_reduce(t)
print(f"rank {dist.get_rank()} wait(5): {work.wait(timeout=5)}", flush=True)
"""


def main():
    mpiexec, python = sys.argv[1:3]
    env = dict(os.environ, STREAMRT_EXIT_TIMEOUT="3")
    start = time.monotonic()
    try:
        run = subprocess.run([mpiexec, "-n", "2", python, "-c", RANK_SCRIPT], env=env,
                             capture_output=True, text=True, timeout=240)
    except subprocess.TimeoutExpired as e:
        print(f"FAILED: the job did not end within 240 s (exit hangs); output: {e.stdout!r}")
        return 1
    took = time.monotonic() - start
    sys.stdout.write(run.stdout)
    sys.stderr.write(run.stderr)
    ok = True
    if "wait(5): False" not in run.stdout:
        print("FAILED: no rank saw its mismatched all_reduce time out")
        ok = False
    if "leaving at exit without the stream work still queued or running" not in run.stderr:
        print("FAILED: no rank said it left at exit without the queued communication")
        ok = False
    if run.returncode == 0:
        print("FAILED: the job exited 0 although a rank gave up on its communication")
        ok = False
    print(f"the job ended after {took:.1f} s with exit code {run.returncode}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
