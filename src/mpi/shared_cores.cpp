// Ranks sharing a machine's cores (shared_cores.hpp).
#include "shared_cores.hpp"

#include <sched.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "streamrt/cpu.hpp"

namespace streamrt::mpi::detail {

bool cores_oversubscribed(MPI_Comm comm) {
  MPI_Comm node = MPI_COMM_NULL;
  if (MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) != MPI_SUCCESS) {
    return false;
  }
  int local_ranks = 1;
  MPI_Comm_size(node, &local_ranks);
  MPI_Comm_free(&node);
  // A rank's busy threads: its workers and the host thread that launches and waits.
  const long threads = static_cast<long>(cpu::num_threads()) + 1;
  const long machine = static_cast<long>(std::thread::hardware_concurrency());
  cpu_set_t mask;
  CPU_ZERO(&mask);
  const long own = sched_getaffinity(0, sizeof mask, &mask) == 0 ? CPU_COUNT(&mask) : machine;
  return (machine > 0 && local_ranks * threads > machine) || (own > 0 && threads > own);
}

namespace {

bool user_set(const char* name) {
  const char* env = std::getenv(name);
  return env != nullptr && *env != '\0';
}

}  // namespace

void fit_workers_to_shared_cores(MPI_Comm comm) noexcept {
  bool shared = false;
  try {
    // Every rank takes part in the split (collective), whatever it decides after.
    shared = cores_oversubscribed(comm);
  } catch (...) {
    return;  // could not tell: the workers stay as they are
  }
  if (!shared) return;
  try {
    const auto spin = std::chrono::microseconds(kSharedCoresSpinUs);
    if (!user_set("STREAMRT_WORKER_SPIN_US") && cpu::worker_spin() > spin) {
      cpu::set_worker_spin(spin);
    }
  } catch (...) {
    // A bad runtime setting is reported by the first stream; the poll stays as it is.
  }
  try {
    if (!user_set("STREAMRT_WORKER_BATCH")) cpu::set_worker_batch(true);
  } catch (...) {
    // The OS refused the policy (a sandbox), or a bad runtime setting that the first stream
    // reports: the workers keep the default policy, which is slower here, never wrong.
  }
}

}  // namespace streamrt::mpi::detail
