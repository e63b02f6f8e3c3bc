#pragma once
// A partition's shared state (cpu::Partition in include/streamrt/cpu.hpp): its own worker pool
// (PartitionState, which the partition's streams refer to), and what keeps the workers reserved
// (PartitionLease, held by the Partition handles and by the handles of its streams). See
// docs/design.md, "Partitions".
#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "worker_pool.hpp"

namespace streamrt::cpu {

class CpuBackend;
class PartitionLease;
class PartitionState;

// The backend's record of a partition, from its creation until its workers are given back
// (after the lease is gone and the streams are idle): what the checks of new partitions count
// and compare against.
struct PartitionEntry {
  const PartitionState* state;  // identity only: never dereferenced through the entry
  std::weak_ptr<PartitionState> handle;
  std::weak_ptr<PartitionLease> lease;  // expired: the workers are on their way back
  std::vector<int> cores;
  int workers;
};

// The partition's pool, referred to by each of its streams (CpuStream::pool()) for as long as the
// stream object lives: events, tensors and cached memory may keep a stream long after its last
// handle, so this does not keep the workers (PartitionLease does).
class PartitionState {
 public:
  // Starts `workers` workers (pinned to `cores` when it is not empty: one worker per core). The
  // backend has checked the numbers and reserved the workers (CpuBackend::new_partition). Throws
  // Error when the OS refuses a thread or a pinning.
  PartitionState(CpuBackend& backend, int workers, std::vector<int> cores, Schedule schedule);
  // A pool still here was never retired (its lease could not start the thread that retires it):
  // its workers, parked, are left as they are, as that thread may be one of them.
  ~PartitionState() = default;
  PartitionState(const PartitionState&) = delete;
  PartitionState& operator=(const PartitionState&) = delete;

  // The pool; a fork child starts a new one here on first use (with the backend's current spin
  // and batch settings); after retire(), the backend's shared pool (work that still reaches a
  // stream of a retired partition runs there). Throws Error as the constructor.
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

  // Stops the workers of a partition that never ran anything (new_partition could not make its
  // lease), on the calling thread; nothing is given back. Blocks until they exit.
  void stop_unused() noexcept;

  // Process exit (CpuBackend::shutdown): stops the pool's workers, unless retire() has taken it.
  // Under mutex_, so that retire() never destroys the pool while this stops it.
  void shutdown_pool();

  // The lease is gone: waits until no stream of the partition has unfinished work, stops the
  // workers (after their current task; queued tasks, callbacks among them, run first) and gives
  // their count back to the shared pool. Blocks; call it on a thread of its own (see
  // PartitionLease). Never throws.
  void retire() noexcept;

 private:
  WorkerPool* build() const;

  CpuBackend& backend_;
  const int workers_;
  const std::vector<int> cores_;
  const Schedule schedule_;
  std::mutex mutex_;
  std::atomic<WorkerPool*> pool_{nullptr};  // owned; written under mutex_
  bool retired_ = false;                    // guarded by mutex_
};

// What keeps a partition's workers reserved: held by its cpu::Partition handles and by the
// handles of the streams made in it (Partition::new_stream), never by the stream objects, which
// events, tensors and cached memory keep long after their handles. When the last reference goes,
// a helper thread retires the partition's pool (PartitionState::retire).
class PartitionLease {
 public:
  explicit PartitionLease(std::shared_ptr<PartitionState> state) noexcept
      : state_(std::move(state)) {}
  ~PartitionLease();
  PartitionLease(const PartitionLease&) = delete;
  PartitionLease& operator=(const PartitionLease&) = delete;

  const std::shared_ptr<PartitionState>& state() const noexcept { return state_; }

 private:
  std::shared_ptr<PartitionState> state_;
};

}  // namespace streamrt::cpu
