#pragma once
// A per-thread sleep/wake slot on a futex. unpark() before park() is not lost: park() then returns
// at once. Spurious returns are possible (stale unparks from earlier waits); callers re-check.
// A futex rather than a mutex + condition variable: unpark() of a thread that is not asleep is one
// atomic exchange and no system call, and a sleeper is woken by one FUTEX_WAKE. The futex is used
// directly (it is what C++20 atomic::wait uses) because atomic::wait has no time-out.
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <ctime>
#include <memory>
#include <type_traits>
#include <vector>

#include "core/cpu_relax.hpp"

namespace streamrt::cpu {

class Parker {
 public:
  // Wakes the owner, or makes its next park() return at once. Thread-safe, never blocks.
  void unpark() noexcept {
    // Release: the woken owner's acquire (park) sees what the waker wrote before unparking.
    if (state_.exchange(kNotified, std::memory_order_release) == kParked) wake();
  }

  // Sleeps until unparked or `deadline` (steady clock); true when unparked. Owner thread only.
  template <class TimePoint>
  bool park_until(const TimePoint& deadline) {
    return park_impl(&deadline);
  }

  // Sleeps until unparked. Owner thread only.
  void park() { park_impl<std::chrono::steady_clock::time_point>(nullptr); }

 private:
  static constexpr int kEmpty = 0, kNotified = 1, kParked = -1;

  template <class TimePoint>
  bool park_impl(const TimePoint* deadline) {
    static_assert(std::is_same_v<typename TimePoint::clock, std::chrono::steady_clock>,
                  "deadlines are steady_clock time points (CLOCK_MONOTONIC)");
    // Acquire: pairs with unpark's release. kNotified -> kEmpty returns at once; kEmpty -> kParked
    // announces the sleep to unpark (which then makes the system call).
    if (state_.fetch_sub(1, std::memory_order_acquire) == kNotified) return true;
    for (;;) {
      timespec ts{};
      if (deadline != nullptr) {
        const auto ns =
            std::chrono::duration_cast<std::chrono::nanoseconds>(deadline->time_since_epoch())
                .count();
        if (ns <= std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count()) {
          // Time is up: leave kParked; an unpark that came in between still counts.
          return state_.exchange(kEmpty, std::memory_order_acquire) == kNotified;
        }
        ts.tv_sec = static_cast<time_t>(ns / 1000000000);
        ts.tv_nsec = static_cast<long>(ns % 1000000000);
      }
      // FUTEX_WAIT_BITSET takes an absolute CLOCK_MONOTONIC time (steady_clock on Linux). It
      // returns at once if the state is no longer kParked (an unpark came first).
      syscall(SYS_futex, reinterpret_cast<int*>(&state_), FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG,
              kParked, deadline != nullptr ? &ts : nullptr, nullptr, FUTEX_BITSET_MATCH_ANY);
      int expected = kNotified;
      // Acquire: see what the unparking thread wrote.
      if (state_.compare_exchange_strong(expected, kEmpty, std::memory_order_acquire)) return true;
      // Spurious wake-up (signal, stale wake): sleep again.
    }
  }

  void wake() noexcept {
    syscall(SYS_futex, reinterpret_cast<int*>(&state_), FUTEX_WAKE | FUTEX_PRIVATE_FLAG, 1, nullptr,
            nullptr, 0);
  }

  static_assert(sizeof(std::atomic<int>) == sizeof(int), "the futex word is the atomic itself");
  std::atomic<int> state_{kEmpty};
};

// This thread's parker. Shared so that a continuation registered by a wait that has since timed
// out can still unpark it safely after the thread has gone. Held through a trivially
// destructible pointer and released by a thread-exit hook (core/thread_exit.hpp), so that a
// thread's first wait registers no C++ thread_local destructor (which glibc cannot survive
// failing to allocate).
namespace parker_detail {
inline constinit thread_local std::shared_ptr<Parker>* tls_parker = nullptr;
// Makes the thread's parker (a new one per call if no exit hook is left). Throws bad_alloc.
std::shared_ptr<Parker> new_thread_parker();
}  // namespace parker_detail

inline std::shared_ptr<Parker> this_thread_parker() {
  if (auto* p = parker_detail::tls_parker) [[likely]] {
    return *p;
  }
  return parker_detail::new_thread_parker();
}

// In a child of fork(): a continuation of the parent may still name this thread's parker and unpark
// it at a random later point. Gives the thread a new parker; the old one is leaked on purpose.
void renew_this_thread_parker();

using core::cpu_relax;

}  // namespace streamrt::cpu
