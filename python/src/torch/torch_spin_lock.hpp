#pragma once
// A lock for a few dozen instructions held by a host thread and a worker at once (a pool's list):
// it spins, since a sleeping mutex would put a wake-up system call on the host for most ops, and
// gives its core up after a short spin, for a holder preempted on a busy core.

#include <atomic>
#include <thread>

namespace streamrt::python::torch_runner {

//! A test-and-test-and-set lock (BasicLockable). Never throws; thread-safe.
class SpinLock {
 public:
  void lock() noexcept {
    // Acquire: what the last holder wrote under the lock is visible from here.
    while (held_.exchange(true, std::memory_order_acquire)) {
      for (int spins = 0; held_.load(std::memory_order_relaxed); ++spins) {
        if (spins < 64) {
          relax();
        } else {
          std::this_thread::yield();
        }
      }
    }
  }
  // Release: publishes this holder's writes to the next.
  void unlock() noexcept { held_.store(false, std::memory_order_release); }
  //! In a child of fork(), whose only thread holds nothing: free whoever held it in the parent.
  void reset_in_child() noexcept { held_.store(false, std::memory_order_relaxed); }

 private:
  static void relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }

  std::atomic<bool> held_{false};
};

}  // namespace streamrt::python::torch_runner
