#!/bin/bash
# The figure run of docs/performance.md: the cases behind the project's targets, one after the
# other, with the load average before, between the parts and after. Run it on an otherwise idle machine
# from the repository root after `make build`:
#
#   bench/figures.sh [OUT]        (default OUT: build/figures)
#
# Every part writes its output under OUT; a summary of each goes to stdout. The MPI parts run only
# when build/bench/streamrt_mpi_bench exists (MPI found at build time).
set -u
BUILD=${BUILD:-build}
OUT=$(mkdir -p "${1:-$BUILD/figures}" && cd "${1:-$BUILD/figures}" && pwd)
BUILD=$(cd "$BUILD" && pwd)
export PYTHONPATH=$BUILD/python
load() { echo "== $(date -u +%H:%M:%S) UTC, load average $(cut -d' ' -f1-3 /proc/loadavg): $1"; }

load "start"
# The stream cases and the peers beside them (every peer in the same run: bench/streamrt_compare,
# the streamrt tool's bench built with oneTBB, Asio and OpenCL).
# The bench prints one progress line per job on stderr ("[ k/n ...] case peer median"); its
# tables go to OUT/*/table.md.
"$BUILD/bench/streamrt_compare" bench --out "$OUT/runtime" --filter \
  '^(round_trip|enqueue/streams=(1|4)|record_poll|record_wait|handoff|callback|overlap|idle|granularity/item=(1|10)us/streams=(1|2|4|16)|many_streams/streams=(1|4096))/' \
  2>&1 | grep -E '^\[' | tee "$OUT/runtime.txt"
"$BUILD/bench/streamrt_bench" --benchmark_filter=QueueMemory 2>&1 | grep -E 'QueueMemory|bytes' \
  | tee "$OUT/queue_memory.txt"
# 10 us items on a stream in a 1-worker partition while bulk streams saturate the other workers,
# against the same stream in the shared pool, idle and under that load.
"$BUILD/bench/streamrt_partition_latency" 20000 | tee "$OUT/partition_latency.txt"
load "after the runtime cases"
/usr/bin/python3 bench/py_launch.py | tee "$OUT/py_launch.txt"
/usr/bin/python3 bench/ops_vs_numpy.py --reps 5 | tee "$OUT/ops_vs_numpy.txt"
"$BUILD/bench/streamrt_ops_host_cost" | tee "$OUT/ops_host_cost.txt"
load "after the ops cases"
# streamrt.torch: unchanged torch code on streams against eager torch (host cost per op, the
# seed's products, training steps, large ops).
/usr/bin/python3 bench/torch_install.py | tee "$OUT/torch.txt"
load "after the torch cases"
"$BUILD/bench/streamrt_compare" bench --out "$OUT/matmul" --filter '^matmul/(2048|256x64)/' \
  2>&1 | grep -E '^\[' | tee "$OUT/matmul.txt"
# One and two streams of 256^2 products against direct OpenBLAS (its own threads) and two plain
# threads of single-threaded calls, in the same binary.
"$BUILD/bench/streamrt_ops_bench" --benchmark_filter='SmallMatmuls' 2>&1 | grep -E '^BM_' \
  | tee "$OUT/ops_matmul.txt"
if [ -x "$BUILD/bench/streamrt_mpi_bench" ]; then
  load "after the matmul cases"
  # As root (CI, containers) Open MPI wants these; two ranks on a two-core machine oversubscribe.
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  export OMPI_MCA_rmaps_base_oversubscribe=1
  mpirun -np 2 "$BUILD/bench/streamrt_mpi_bench" | tee "$OUT/mpi.txt"
  mpirun -np 2 -x STREAMRT_NUM_THREADS=1 "$BUILD/bench/streamrt_mpi_bench" | tee "$OUT/mpi_1worker.txt"
  # The same with the workers under the default policy (streamrt::mpi sets SCHED_BATCH here).
  mpirun -np 2 -x STREAMRT_WORKER_BATCH=0 "$BUILD/bench/streamrt_mpi_bench" | tee "$OUT/mpi_nobatch.txt"
  mpirun -np 2 "$BUILD/examples/example_distributed_mlp" --steps 20 --hidden 512 --out 256 \
    --trace-dir "$OUT" | tee "$OUT/demo.txt"
fi
load "end"
