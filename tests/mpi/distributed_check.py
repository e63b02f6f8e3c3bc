"""streamrt.distributed under mpirun (run by CTest as mpi_python_np2): the torch.distributed-shaped
API, results against numpy references, stream-ordered work, failures, time-outs and an mpi4py
communicator. Run with `python3 -m mpi4py` so that an exception on one rank aborts the job
(MPI_Abort) instead of leaving the other ranks waiting; check() aborts with the reason."""

import threading

import numpy as np
from mpi4py import MPI  # initialises MPI (MPI_THREAD_MULTIPLE); streamrt uses the same MPI

import streamrt
import streamrt.distributed as dist

assert dist.is_available(), "streamrt was built without MPI"
dist.init_process_group()
rank, size = dist.get_rank(), dist.get_world_size()
assert dist.is_initialized()


def check(cond, what):
    if not cond:
        print(f"rank {rank}: FAILED: {what}", flush=True)
        MPI.COMM_WORLD.Abort(1)


def data(r, n, dtype):
    return ((np.arange(n) % 13 + 1) * (r + 1)).astype(dtype)


# all_reduce of every op and dtype against numpy, on the current stream and on another stream.
for dtype, sdtype in ((np.float32, streamrt.float32), (np.float64, streamrt.float64),
                      (np.int32, streamrt.int32), (np.int64, streamrt.int64)):
    every = np.stack([data(r, 1000, dtype) for r in range(size)])
    for op, ref in ((dist.ReduceOp.SUM, every.sum(0)), (dist.ReduceOp.MAX, every.max(0)),
                    (dist.ReduceOp.MIN, every.min(0)), (dist.ReduceOp.PRODUCT, every.prod(0))):
        t = streamrt.from_numpy(data(rank, 1000, dtype).copy())
        work = dist.all_reduce(t, op=op)
        check(isinstance(work, dist.Work), "all_reduce returns a Work")
        check(work.wait() is True, "wait() returns True")
        check(work.is_completed(), "is_completed after wait")
        check(np.array_equal(t.numpy(), ref.astype(dtype)), f"all_reduce {op} {dtype.__name__}")

s = streamrt.Stream()
t = streamrt.from_numpy(data(rank, 4096, np.float32))
work = dist.all_reduce(t, op=dist.ReduceOp.AVG, stream=s)
# No wait: reading the tensor waits for the communication (dependency tracking).
avg = np.stack([data(r, 4096, np.float32) for r in range(size)]).mean(0)
check(np.allclose(t.numpy(), avg), "AVG on a side stream, read through tracking")
check(work.is_completed(), "the read waited for the all_reduce")

# broadcast, all_gather_into_tensor, reduce_scatter_tensor, all_to_all_single.
b = streamrt.from_numpy(data(rank, 10, np.int64))
dist.broadcast(b, src=size - 1).wait()
check(np.array_equal(b.numpy(), data(size - 1, 10, np.int64)), "broadcast")
out = streamrt.zeros([10 * size], dtype=streamrt.float64)
dist.all_gather_into_tensor(out, streamrt.from_numpy(data(rank, 10, np.float64))).wait()
check(np.array_equal(out.numpy(), np.concatenate([data(r, 10, np.float64) for r in range(size)])),
      "all_gather_into_tensor")
part = streamrt.zeros([5], dtype=streamrt.float64)
dist.reduce_scatter_tensor(part, streamrt.from_numpy(data(rank, 5 * size, np.float64))).wait()
full = np.stack([data(r, 5 * size, np.float64) for r in range(size)]).sum(0)
check(np.array_equal(part.numpy(), full[5 * rank:5 * rank + 5]), "reduce_scatter_tensor")
a2a = streamrt.zeros([3 * size], dtype=streamrt.int32)
dist.all_to_all_single(a2a, streamrt.from_numpy(data(rank, 3 * size, np.int32))).wait()
want = np.concatenate([data(r, 3 * size, np.int32)[3 * rank:3 * rank + 3] for r in range(size)])
check(np.array_equal(a2a.numpy(), want), "all_to_all_single")

# Stream order: an op enqueued before the all_reduce on the same stream is seen by it.
s2 = streamrt.Stream()
with streamrt.stream(s2):
    x = streamrt.full([8], float(rank + 1))
    dist.all_reduce(x)
    y = x * 2.0
check(np.array_equal(y.numpy(), np.full(8, 2.0 * size * (size + 1) / 2, np.float32)),
      "op -> all_reduce -> op on one stream")

# Failures: a receive of the wrong size raises streamrt.Error naming MPI's error; a Work whose
# communication cannot finish yet times out.
peer = rank ^ 1
if peer < size:
    if rank % 2 == 0:
        dist.send(streamrt.ones([16]), peer, tag=5).wait()
    else:
        work = dist.recv(streamrt.zeros([8]), peer, tag=5)
        try:
            work.wait()
            check(False, "a truncated receive did not raise")
        except streamrt.Error as e:
            check("MPI_ERR_TRUNCATE" in str(e) and "recv" in str(e), f"error text: {e}")
        # work.wait() reported the failure (rule 10): the stream runs work submitted after it.
        z = streamrt.full([4], 3.0) + 1.0
        streamrt.current_stream().synchronize()
        check(np.array_equal(z.numpy(), np.full(4, 4.0, np.float32)),
              "the stream runs new work after the reported receive failure")
    dist.barrier().wait()
    if rank % 2 == 0:
        r = streamrt.zeros([4])
        w = dist.recv(r, peer, tag=6)
        check(w.wait(timeout=0.05) is False, "wait(timeout) on an unfinished receive")
        MPI.COMM_WORLD.send(1, dest=peer, tag=7)
        check(w.wait(timeout=60) is True, "receive after the go")
        check(np.array_equal(r.numpy(), np.full(4, 9.0, np.float32)), "received data")
    else:
        MPI.COMM_WORLD.recv(source=peer, tag=7)
        dist.send(streamrt.full([4], 9.0), peer, tag=6).wait()

# torch tensors, as every op takes them: shared, written in place; after streamrt.torch.install()
# torch's own reads wait for the communication.
try:
    import torch
except ImportError:
    torch = None
if torch is not None:
    import streamrt.torch as srt

    tt = torch.from_numpy(data(rank, 1000, np.float32))
    dist.all_reduce(tt).wait()
    every = np.stack([data(r, 1000, np.float32) for r in range(size)]).sum(0)
    check(np.array_equal(tt.numpy(), every), "all_reduce of a torch tensor, in place")
    out = torch.zeros(10 * size, dtype=torch.float64)
    dist.all_gather_into_tensor(out, torch.from_numpy(data(rank, 10, np.float64))).wait()
    check(np.array_equal(out.numpy(), np.concatenate([data(r, 10, np.float64) for r in range(size)])),
          "all_gather_into_tensor of torch tensors")
    srt.install()
    side = streamrt.Stream()
    gate = threading.Event()
    side.launch(gate.wait, 60)  # holds the communication back
    tt = torch.from_numpy(data(rank, 4096, np.float32))
    work = dist.all_reduce(tt, stream=side)
    threading.Timer(0.2, gate.set).start()
    every = np.stack([data(r, 4096, np.float32) for r in range(size)]).sum(0)
    check(np.array_equal(tt.numpy(), every), "a torch read waits for the all_reduce (installed)")
    check(work.is_completed(), "the torch read waited")
    with torch.cpu.StreamContext(side):
        doubled = tt * 2  # a torch op after the collective, tracked on the same memory
    dist.all_reduce(tt, stream=side)
    check(np.array_equal(doubled.numpy(), 2 * every), "torch op ordered before the next all_reduce")
    check(np.array_equal(tt.numpy(), size * every), "second all_reduce of the torch tensor")
    srt.uninstall()

# An mpi4py communicator: a split into halves, checked against mpi4py's own allreduce.
dist.destroy_process_group()
half = MPI.COMM_WORLD.Split(color=rank % 2, key=rank)
dist.init_process_group(comm=half)
check(dist.get_world_size() == half.Get_size() and dist.get_rank() == half.Get_rank(),
      "rank/size of the mpi4py communicator")
t = streamrt.from_numpy(data(rank, 100, np.float64))
dist.all_reduce(t).wait()
ref = half.allreduce(data(rank, 100, np.float64), op=MPI.SUM)
check(np.array_equal(t.numpy(), ref), "all_reduce on an mpi4py communicator")
try:
    dist.init_process_group(comm=half)
    check(False, "a second init_process_group was accepted")
except RuntimeError:
    pass
print(f"rank {rank}/{size}: streamrt.distributed OK", flush=True)
