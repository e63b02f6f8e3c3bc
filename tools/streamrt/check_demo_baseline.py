"""Structural check of `streamrt demo`'s one-stream baseline: with --streams 1 both sides of each
comparison run the same work on one stream, so every printed speedup must be close to 1. A cold
baseline (first-touch page faults, workers asleep, outputs kept alive by queued work) showed as a
"speedup" of one stream over itself. The bounds are wide: this is not a timing target.

usage: check_demo_baseline.py STREAMRT_TOOL OUT_DIR"""

import re
import subprocess
import sys

LOW, HIGH = 0.8, 1.25


def main():
    tool, out = sys.argv[1], sys.argv[2]
    cmd = [tool, "demo", "--streams", "1", "--runs", "15", "--out", out]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    sys.stdout.write(run.stdout)
    sys.stderr.write(run.stderr)
    if run.returncode != 0:
        print(f"FAILED: {' '.join(cmd)} exited with {run.returncode}")
        return 1
    speedups = [float(m) for m in re.findall(r"^\s+speedup ([0-9.]+)x", run.stdout, re.M)]
    if len(speedups) != 2:
        print(f"FAILED: expected the speedups of scenarios 1 and 2, found {speedups}")
        return 1
    bad = [x for x in speedups if not LOW <= x <= HIGH]
    if bad:
        print(f"FAILED: one stream against itself printed speedups {speedups}; each must be "
              f"within {LOW}-{HIGH}x (is the one-stream baseline warmed up?)")
        return 1
    print(f"one stream against itself: speedups {speedups}, within {LOW}-{HIGH}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
