#!/usr/bin/env python3
"""streamrt's element-wise ops, reductions and random fills side by side with numpy and torch (CPU)
in one process, plus the machine's memory bandwidth measured in the same run (a STREAM-style
triad, a = b + s*c, on warm pages), and the per-op host cost on 16-element tensors.

    PYTHONPATH=build/python /usr/bin/python3 bench/ops_vs_numpy.py [--n 16777216] [--reps 7]

Every figure is the median of --reps runs after one warm-up. streamrt's time includes waiting for
the result (t.wait()); numpy and torch compute synchronously. numpy is single-threaded; torch runs
with torch.set_num_threads(w) next to streamrt's w workers. The load average is printed before
and after: figures taken on a busy machine say so (docs/performance.md).
"""

import argparse
import os
import statistics
import threading
import time

import numpy as np

import streamrt

try:
    import torch
except ImportError as e:  # the column is skipped with the reason printed
    torch = None
    TORCH_MISSING = str(e)


def median_times(fn, reps):
    """(wall, cpu) medians in seconds. CPU time is the whole process's (every thread): on a busy
    machine it still shows the work done when wall time mostly shows waiting for a core."""
    fn()  # warm-up (pages, caches, lazy initialisation)
    walls, cpus = [], []
    for _ in range(reps):
        c0, t0 = time.process_time(), time.perf_counter()
        fn()
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    return statistics.median(walls), statistics.median(cpus)


def median_time(fn, reps):
    return median_times(fn, reps)[0]


def triad_bandwidth(n, threads, reps):
    """GB/s of a = b + s*c over `threads` threads on disjoint slices (24 bytes per float64
    element moved, STREAM's count). Single pass: torch.add(b, c, alpha=s, out=a); numpy (two
    passes) only when torch is missing, then counted as the two passes it makes."""
    a = np.zeros(n)
    b = np.ones(n)
    c = np.full(n, 2.0)
    bounds = [(i * n // threads, (i + 1) * n // threads) for i in range(threads)]
    if torch is not None:
        ta, tb, tc = (torch.from_numpy(x) for x in (a, b, c))
        torch.set_num_threads(1)
        parts = [(ta[lo:hi], tb[lo:hi], tc[lo:hi]) for lo, hi in bounds]

        def kernel(p):
            torch.add(p[1], p[2], alpha=3.0, out=p[0])

        moved = 24 * n
    else:
        parts = [(a[lo:hi], b[lo:hi], c[lo:hi]) for lo, hi in bounds]

        def kernel(p):
            np.multiply(p[2], 3.0, out=p[0])
            np.add(p[0], p[1], out=p[0])

        moved = 40 * n

    def run():
        if threads == 1:
            kernel(parts[0])
            return
        ts = [threading.Thread(target=kernel, args=(p,)) for p in parts]
        for t in ts:
            t.start()
        for t in ts:
            t.join()

    return moved / median_time(run, reps) / 1e9


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=4096 * 4096, help="elements (float32)")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--workers", default="1,2", help="streamrt worker counts")
    args = ap.parse_args()
    n, reps = args.n, args.reps
    workers = [int(w) for w in args.workers.split(",")]
    print(f"load average before: {os.getloadavg()[0]:.2f}  (cores: {os.cpu_count()})")
    print(f"n = {n} float32 ({4 * n / 2**20:.0f} MiB per tensor), median of {reps}")
    if torch is None:
        print(f"torch column skipped: {TORCH_MISSING}")

    bw = {w: triad_bandwidth(n // 2, w, reps) for w in workers}
    for w in workers:
        print(f"memory bandwidth (triad, {w} thread{'s' if w > 1 else ''}): {bw[w]:.1f} GB/s")

    rng = np.random.default_rng(0)
    a_np = rng.standard_normal(n, dtype=np.float32)
    b_np = rng.standard_normal(n, dtype=np.float32) + 3.0  # no zeros: div stays finite
    a_st, b_st = streamrt.from_numpy(a_np.copy()), streamrt.from_numpy(b_np.copy())
    a_t = torch.from_numpy(a_np.copy()) if torch is not None else None
    b_t = torch.from_numpy(b_np.copy()) if torch is not None else None
    gen = np.random.default_rng(1)

    # (name, bytes moved per element or None for compute-bound, numpy, streamrt, torch)
    cases = [
        ("add a+b", 12, lambda: a_np + b_np, lambda: (a_st + b_st).wait(),
         lambda: a_t + b_t),
        ("mul a*b", 12, lambda: a_np * b_np, lambda: (a_st * b_st).wait(),
         lambda: a_t * b_t),
        ("div a/b", 12, lambda: a_np / b_np, lambda: (a_st / b_st).wait(),
         lambda: a_t / b_t),
        ("scale a*2", 8, lambda: a_np * np.float32(2), lambda: (a_st * 2.0).wait(),
         lambda: a_t * 2.0),
        ("relu", 8, lambda: np.maximum(a_np, np.float32(0)), lambda: streamrt.relu(a_st).wait(),
         lambda: torch.relu(a_t)),
        ("sum", 4, lambda: a_np.sum(), lambda: streamrt.sum(a_st).item(), lambda: a_t.sum()),
        ("rand", None, lambda: gen.random(n, dtype=np.float32),
         lambda: streamrt.rand(n, seed=1).wait(), lambda: torch.rand(n)),
        ("randn", None, lambda: gen.standard_normal(n, dtype=np.float32),
         lambda: streamrt.randn(n, seed=1).wait(), lambda: torch.randn(n)),
    ]
    head = "| op | numpy ms (cpu ms) |"
    for w in workers:
        head += f" streamrt {w}w ms (cpu ms) | vs numpy (cpu) | of triad |"
        if torch is not None:
            head += f" torch {w}t ms |"
    print()
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for name, per_elem, f_np, f_st, f_t in cases:
        t_np, c_np = median_times(f_np, reps)
        row = f"| {name} | {t_np * 1e3:.2f} ({c_np * 1e3:.1f}) |"
        for w in workers:
            streamrt.set_num_threads(w)
            t_st, c_st = median_times(f_st, reps)
            frac = "-"
            if per_elem is not None:
                frac = f"{per_elem * n / t_st / 1e9 / bw[w] * 100:.0f}%"
            row += (f" {t_st * 1e3:.2f} ({c_st * 1e3:.1f}) | {t_np / t_st:.2f}x"
                    f" ({c_np / max(c_st, 1e-9):.2f}x) | {frac} |")
            if torch is not None:
                torch.set_num_threads(w)
                row += f" {median_time(f_t, reps) * 1e3:.2f} |"
        print(row, flush=True)

    # Host cost per op on 16-element tensors (launch path; no waiting inside the timed loop).
    print()
    small_np = np.ones(16, np.float32)
    small = streamrt.ones(16)
    small.wait()
    k = 20000

    def launches():
        for _ in range(k):
            small + small

    def numpy_ops():
        for _ in range(k):
            small_np + small_np

    for w in workers:
        streamrt.set_num_threads(w)
        t = median_time(lambda: (launches(), streamrt.synchronize()), reps)
        print(f"per-op cost, 16 elements, {w} worker(s): streamrt {t / k * 1e6:.2f} us "
              f"(launch + run, Python), numpy {median_time(numpy_ops, reps) / k * 1e6:.2f} us")
    print(f"\nload average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
