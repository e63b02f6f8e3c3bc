#pragma once
// A mutex for short critical sections that two busy threads take in turn (the host allocating
// tensor memory while a worker frees it): it polls a few dozen times before blocking, so a
// contended lock/unlock pair costs no futex wait and wake-up (several microseconds on a VM). It
// still blocks (std::mutex) when the holder stays, so an oversubscribed machine spins little.
// Meets BasicLockable/Lockable; not recursive.
#include <mutex>

#include "core/cpu_relax.hpp"

namespace streamrt::core {

class SpinMutex {
 public:
  void lock() {
    for (int i = 0; i < kPolls; ++i) {
      if (mutex_.try_lock()) return;
      cpu_relax();
    }
    mutex_.lock();
  }
  bool try_lock() { return mutex_.try_lock(); }
  void unlock() { mutex_.unlock(); }

 private:
  // About a microsecond of polling: longer than the critical sections it guards.
  static constexpr int kPolls = 64;
  std::mutex mutex_;
};

}  // namespace streamrt::core
