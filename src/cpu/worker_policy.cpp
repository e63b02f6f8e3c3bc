// Worker scheduling policy (worker_policy.hpp).
#include "worker_policy.hpp"

#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "streamrt/error.hpp"

namespace streamrt::cpu {
namespace {

// 0, or the errno of the refusal. SCHED_OTHER and SCHED_BATCH share static priority 0, so Linux
// lets any thread switch its process's threads between them without privileges; a sandbox
// (seccomp) may still refuse.
int apply(pid_t tid, bool batch) noexcept {
  sched_param p{};
  p.sched_priority = 0;
  return sched_setscheduler(tid, batch ? SCHED_BATCH : SCHED_OTHER, &p) == 0 ? 0 : errno;
}

pid_t this_tid() noexcept {
  return static_cast<pid_t>(syscall(SYS_gettid));
}

}  // namespace

void WorkerPolicy::join() noexcept {
  const pid_t tid = this_tid();
  std::lock_guard lock(mutex_);
  try {
    tids_.push_back(tid);
  } catch (...) {
    // Out of memory: the worker keeps the default policy and is not tracked (it is never changed
    // by a later set_batch either, so no stale id can be reached). A performance setting only.
    return;
  }
  // A refusal here leaves this worker preempting as by default: set_batch() already reported the
  // OS's refusal to the caller that asked for it (or the environment asked before any worker ran;
  // then every worker is refused alike and worker_batch() still says what was asked).
  if (batch_) (void)apply(tid, true);
}

void WorkerPolicy::leave() noexcept {
  const pid_t tid = this_tid();
  std::lock_guard lock(mutex_);
  auto it = std::find(tids_.begin(), tids_.end(), tid);
  if (it != tids_.end()) tids_.erase(it);
}

void WorkerPolicy::set_batch(bool batch) {
  std::lock_guard lock(mutex_);
  for (std::size_t i = 0; i < tids_.size(); ++i) {
    if (const int err = apply(tids_[i], batch); err != 0) {
      for (std::size_t j = 0; j < i; ++j) (void)apply(tids_[j], batch_);  // all or nothing
      throw Error(std::string("set_worker_batch(") + (batch ? "true" : "false") +
                  "): the OS refused to change a worker's scheduling policy (sched_setscheduler: " +
                  std::strerror(err) +
                  "); the workers keep their policy. A sandbox that filters "
                  "sched_setscheduler must allow it, or leave the setting off");
    }
  }
  batch_ = batch;
}

bool WorkerPolicy::batch() const {
  std::lock_guard lock(mutex_);
  return batch_;
}

}  // namespace streamrt::cpu
