#pragma once
// A partition's shared state (cpu::Partition in include/streamrt/cpu.hpp): its own worker pool,
// kept while the handle or any of its streams lives. See docs/design.md, "Partitions".
#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "worker_pool.hpp"

namespace streamrt::cpu {

class CpuBackend;
class PartitionState;

// The backend's record of a partition, from its creation until its workers are given back
// (after the state is gone): what the checks of new partitions count and compare against.
struct PartitionEntry {
  const PartitionState* state;  // identity only: never dereferenced through the entry
  std::weak_ptr<PartitionState> handle;
  std::vector<int> cores;
  int workers;
};

class PartitionState {
 public:
  // Starts `workers` workers (pinned to `cores` when it is not empty: one worker per core). The
  // backend has checked the numbers and reserved the workers (CpuBackend::new_partition). Throws
  // Error when the OS refuses a thread or a pinning.
  PartitionState(CpuBackend& backend, int workers, std::vector<int> cores, Schedule schedule);
  // Has a helper thread stop the workers (after their current task; queued tasks run first) and
  // then give their count back to the shared pool (see partition.cpp for why not this thread).
  ~PartitionState();
  PartitionState(const PartitionState&) = delete;
  PartitionState& operator=(const PartitionState&) = delete;

  // The pool; a fork child starts a new one here on first use (with the backend's current spin
  // and batch settings). Throws Error as the constructor.
  WorkerPool& pool();
  // The pool if it is running (null in a fork child until first use).
  WorkerPool* pool_if_started() const noexcept { return pool_.load(std::memory_order_acquire); }
  int workers() const noexcept { return workers_; }
  const std::vector<int>& cores() const noexcept { return cores_; }

  // fork() (fork.cpp): the lock pool() builds under, held across the fork; in the child the
  // pool (whose threads do not exist there) is abandoned.
  void lock_for_fork() { mutex_.lock(); }
  void unlock_after_fork() { mutex_.unlock(); }
  void abandon_pool_in_fork_child() noexcept;

 private:
  WorkerPool* build() const;

  CpuBackend& backend_;
  const int workers_;
  const std::vector<int> cores_;
  const Schedule schedule_;
  std::mutex mutex_;
  std::atomic<WorkerPool*> pool_{nullptr};  // owned; written under mutex_
};

}  // namespace streamrt::cpu
