#pragma once
// The scheduling policy the CPU workers run under: the OS default, or SCHED_BATCH, under which a
// worker woken for new work does not preempt the thread running on its core (set_worker_batch,
// STREAMRT_WORKER_BATCH). See docs/design.md, "Workers that give way".
#include <sys/types.h>

#include <mutex>
#include <vector>

namespace streamrt::cpu {

// The thread ids of one pool's workers and the policy they run under. A worker joins as it starts
// and leaves before it exits, so a change never reaches a thread id the kernel has given to
// another thread since.
class WorkerPolicy {
 public:
  explicit WorkerPolicy(bool batch) : batch_(batch) {}
  WorkerPolicy(const WorkerPolicy&) = delete;
  WorkerPolicy& operator=(const WorkerPolicy&) = delete;

  // Called by a worker as it starts: records it and applies the current policy to it. Never
  // throws.
  void join() noexcept;
  // Called by a worker before it exits. Never throws.
  void leave() noexcept;
  // Applies the policy to every worker now and to those that start later. Throws Error naming the
  // OS's reason when it refuses (the setting is then unchanged; workers changed before the refusal
  // are set back). Thread-safe; blocks only on the short registry lock.
  void set_batch(bool batch);
  bool batch() const;

 private:
  mutable std::mutex mutex_;
  bool batch_;               // guarded by mutex_
  std::vector<pid_t> tids_;  // guarded by mutex_
};

}  // namespace streamrt::cpu
