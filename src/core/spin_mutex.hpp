#pragma once
// A mutex for short critical sections that two busy threads take in turn (the host allocating
// tensor memory while a worker frees it; the host tracking a tensor's accesses): an uncontended
// lock/unlock pair is two inlined atomic operations (no call into libpthread), a contended lock
// polls a few dozen times before it blocks, so a hand-over costs no futex wait and wake-up
// (several microseconds on a VM). It still blocks (C++20 atomic wait, a futex) when the holder
// stays, so an oversubscribed machine spins little. The three-state word is Drepper's "Futexes
// are tricky" mutex 2: unlock only calls notify when someone may be asleep.
// Meets BasicLockable/Lockable; not recursive.
#include <atomic>

#include "core/cpu_relax.hpp"

namespace streamrt::core {

class SpinMutex {
 public:
  void lock() {
    // Acquire on every path that takes the lock: the critical section's reads see what the
    // previous holder wrote before its release in unlock().
    int c = kFree;
    if (state_.compare_exchange_strong(c, kLocked, std::memory_order_acquire,
                                       std::memory_order_relaxed)) {
      return;
    }
    for (int i = 0; i < kPolls; ++i) {
      cpu_relax();
      // Relaxed peek: only the CAS below takes the lock (and orders with acquire).
      c = state_.load(std::memory_order_relaxed);
      if (c == kFree && state_.compare_exchange_strong(c, kLocked, std::memory_order_acquire,
                                                       std::memory_order_relaxed)) {
        return;
      }
    }
    // Slow path: mark the word "waiters may sleep" so the holder's unlock wakes one; the
    // exchange returning kFree means this thread took the lock (marked contended, which at
    // worst costs one spare wake-up).
    c = state_.exchange(kContended, std::memory_order_acquire);
    while (c != kFree) {
      state_.wait(kContended, std::memory_order_relaxed);
      c = state_.exchange(kContended, std::memory_order_acquire);
    }
  }

  bool try_lock() {
    int c = kFree;
    // Acquire on success for the same reason as lock().
    return state_.compare_exchange_strong(c, kLocked, std::memory_order_acquire,
                                          std::memory_order_relaxed);
  }

  void unlock() {
    // Release: publishes the critical section's writes to the next holder's acquire.
    if (state_.exchange(kFree, std::memory_order_release) == kContended) state_.notify_one();
  }

 private:
  static constexpr int kFree = 0;
  static constexpr int kLocked = 1;     // held, nobody asleep
  static constexpr int kContended = 2;  // held, a waiter may be asleep in wait()
  // About a microsecond of polling: longer than the critical sections it guards.
  static constexpr int kPolls = 64;
  std::atomic<int> state_{kFree};
};

}  // namespace streamrt::core
