"""torch matmuls on streamrt streams: one stream against two, with the baseline in the same run.

Each stream gets its share of N float32 1000x1000 ``torch.matmul`` calls, one launched item per
call (torch releases the GIL inside its kernels, so items on different streams overlap). Printed:
the median time of one and of two streams over the repetitions, and their ratio, for the BLAS
thread settings below, so the effect of who owns the cores is visible:

* ``default``: the process as ``import streamrt`` leaves it (streamrt sets OpenBLAS, which torch
  also calls for its matmuls, to one thread per call: the streams are the parallelism);
* ``openblas=all``: OpenBLAS's own thread pool at every core (OpenBLAS's default without
  streamrt): one stream then uses both cores, and two streams contend for that one pool.

Usage: PYTHONPATH=build/python /usr/bin/python3 bench/torch_streams.py [--n 16] [--reps 5]
Write the machine load (uptime) next to any figure you quote (docs/performance.md).
"""

import argparse
import os
import statistics
import time

import torch

import streamrt


def run(streams, n, a, b):
    start = time.perf_counter()
    for i in range(n):
        streams[i % len(streams)].launch(torch.matmul, a, b)
    for s in streams:
        s.synchronize()
    return time.perf_counter() - start


def measure(label, n, reps, size):
    a = torch.randn(size, size)
    b = torch.randn(size, size)
    one = [streamrt.Stream()]
    two = [streamrt.Stream(), streamrt.Stream()]
    run(one, 2, a, b)  # warm-up: BLAS buffers, workers
    run(two, 2, a, b)
    t1, t2 = [], []
    for _ in range(reps):  # interleaved, so drifting load hits both alike
        t1.append(run(one, n, a, b))
        t2.append(run(two, n, a, b))
    m1, m2 = statistics.median(t1), statistics.median(t2)
    print(
        f"{label:14s} one stream {m1 * 1e3:8.1f} ms   two streams {m2 * 1e3:8.1f} ms   "
        f"speed-up {m1 / m2:4.2f}x   ({n} matmuls {size}x{size}, median of {reps})"
    )
    return m1 / m2


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=16, help="matmuls per run (split over the streams)")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--size", type=int, default=1000)
    args = p.parse_args()
    print(
        f"cores {os.cpu_count()}, streamrt workers {streamrt.get_num_threads()}, "
        f"torch threads {torch.get_num_threads()}, load {os.getloadavg()[0]:.2f}"
    )
    print(f"OpenBLAS threads now: {streamrt._blas_threads()}")
    measure("default", args.n, args.reps, args.size)
    streamrt._set_blas_threads(os.cpu_count() or 1)
    measure("openblas=all", args.n, args.reps, args.size)
    streamrt._set_blas_threads(1)
    print(f"load after {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
