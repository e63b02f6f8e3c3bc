#pragma once
// How streamrt::mpi adapts the runtime to ranks that share a machine's cores. See
// docs/distributed.md ("Ranks sharing cores").
#include <mpi.h>

namespace streamrt::mpi::detail {

// The poll that idle workers get when the cores are oversubscribed (set_worker_spin).
inline constexpr long kSharedCoresSpinUs = 5;

// True when the ranks of `comm` on this machine, with their workers and host threads, want more
// cores than they have: the ranks' threads per machine exceed its cores, or one rank's threads
// exceed the cores it may run on. Collective over `comm` (MPI_Comm_split_type).
bool cores_oversubscribed(MPI_Comm comm);

// When the cores are oversubscribed, lowers the runtime's worker poll (set_worker_spin) to
// kSharedCoresSpinUs, unless STREAMRT_WORKER_SPIN_US sets it or it is already shorter, and runs the
// workers under SCHED_BATCH (set_worker_batch), unless STREAMRT_WORKER_BATCH sets it. A worker
// polling 50 us after each item holds a core that another rank needs to make progress (a small
// all_reduce then waits for its peer's time slice); a worker woken by the host's launch that
// preempts the host on the same core stalls the host's enqueue and synchronize while the other
// rank waits for both (docs/distributed.md, "Ranks sharing cores"). Collective over `comm`. Never
// throws: both are tunings, and a failure leaves them as they are.
void fit_workers_to_shared_cores(MPI_Comm comm) noexcept;

}  // namespace streamrt::mpi::detail
