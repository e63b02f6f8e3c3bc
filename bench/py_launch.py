#!/usr/bin/env python3
"""Host cost of streamrt's Python launch path against numpy, in one process:

- a no-op Python callable launched on a stream (per launch; the stream is synchronized at the end
  of each batch, so the figure includes the work's run on a worker),
- Stream.synchronize() on an idle stream,
- `a + b` on two 16-element float32 tensors (streamrt, result left queued) against numpy,
- the launch and `a + b` again without reading the caller's line for failure messages
  (`_set_launch_origins(False)`), alternated with the default batch by batch: that read's cost.

    PYTHONPATH=build/python /usr/bin/python3 bench/py_launch.py [--n 20000] [--reps 7]

Medians of --reps batches of --n calls, after a warm-up batch. The load average is printed
before and after (docs/performance.md says why it matters).
"""

import argparse
import os
import statistics
import time

import numpy as np

import streamrt


def per_call(batch, n, reps):
    batch(n)  # warm-up
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        batch(n)
        times.append((time.perf_counter() - t0) / n)
    return statistics.median(times)


def per_call_ab(batch, n, reps):
    """Medians per call with origins read (the default) and not, batches alternated."""
    batch(n)  # warm-up
    times = {True: [], False: []}
    for _ in range(reps):
        for on in (True, False):
            streamrt._streamrt._set_launch_origins(on)
            t0 = time.perf_counter()
            batch(n)
            times[on].append((time.perf_counter() - t0) / n)
    streamrt._streamrt._set_launch_origins(True)
    return statistics.median(times[True]), statistics.median(times[False])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--reps", type=int, default=7)
    args = ap.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    s = streamrt.Stream()

    def noop():
        pass

    def launches(n):
        for _ in range(n):
            s.launch(noop)
        s.synchronize()

    def syncs(n):
        for _ in range(n):
            s.synchronize()

    a = streamrt.ones(16)
    b = streamrt.ones(16)

    def adds(n):
        with streamrt.StreamContext(s):
            for _ in range(n):
                a + b
        s.synchronize()

    na = np.ones(16, np.float32)
    nb = np.ones(16, np.float32)

    def np_adds(n):
        for _ in range(n):
            na + nb

    rows = [
        ("no-op Python launch", per_call(launches, args.n, args.reps)),
        ("Stream.synchronize(), idle stream", per_call(syncs, args.n, args.reps)),
        ("a + b, 16 float32 (streamrt)", per_call(adds, args.n, args.reps)),
        ("a + b, 16 float32 (numpy)", per_call(np_adds, args.n, args.reps)),
    ]
    for name, batch in (("no-op Python launch", launches), ("a + b, 16 float32 (streamrt)", adds)):
        on, off = per_call_ab(batch, args.n, args.reps)
        rows += [(name + ", A/B: origins read", on), (name + ", A/B: not read", off)]
    for name, sec in rows:
        print(f"{name:40s} {sec * 1e9:9.0f} ns")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
