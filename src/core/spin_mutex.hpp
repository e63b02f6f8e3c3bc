#pragma once
// A mutex for short critical sections that two busy threads take in turn (the host allocating
// tensor memory while a worker frees it): it polls a few dozen times before blocking, so a
// contended lock/unlock pair costs no futex wait and wake-up (several microseconds on a VM). It
// still blocks (std::mutex) when the holder stays, so an oversubscribed machine spins little.
// Meets BasicLockable/Lockable; not recursive.
#include <mutex>

namespace streamrt::core {

class SpinMutex {
 public:
  void lock() {
    for (int i = 0; i < kPolls; ++i) {
      if (mutex_.try_lock()) return;
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#elif defined(__aarch64__)
      asm volatile("yield");
#endif
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
