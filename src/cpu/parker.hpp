#pragma once
// A per-thread sleep/wake slot. unpark() before park() is not lost: park() then returns at once.
// Spurious returns are possible (stale unparks from earlier waits); callers always re-check.
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <vector>

namespace streamrt::cpu {

class Parker {
 public:
  // Wakes the owner, or makes its next park() return at once. Thread-safe; never blocks long.
  void unpark() noexcept {
    {
      std::lock_guard lock(mutex_);
      notified_ = true;
    }
    cv_.notify_one();
  }

  // Sleeps until unparked or `deadline`; true when unparked. Owner thread only.
  template <class TimePoint>
  bool park_until(const TimePoint& deadline) {
    std::unique_lock lock(mutex_);
    if (!cv_.wait_until(lock, deadline, [&] { return notified_; })) return false;
    notified_ = false;
    return true;
  }

  // Sleeps until unparked. Owner thread only.
  void park() {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] { return notified_; });
    notified_ = false;
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool notified_ = false;
};

// This thread's parker. Shared so that a continuation registered by a wait that has since timed
// out can still unpark it safely after the thread has gone. Thread-local destructors run before
// atexit handlers, so a wait during exit (finishing pending work) gets a fresh parker.
namespace parker_detail {
inline thread_local bool destroyed = false;  // trivially destructible: readable during exit
struct Holder {
  std::shared_ptr<Parker> parker = std::make_shared<Parker>();
  ~Holder() { destroyed = true; }
};
inline thread_local Holder holder;
}  // namespace parker_detail

inline std::shared_ptr<Parker> this_thread_parker() {
  if (parker_detail::destroyed) return std::make_shared<Parker>();
  return parker_detail::holder.parker;
}

// In a child of fork(): another thread may have held this thread's parker lock at the fork, and it
// would stay locked. Gives the thread a new parker; the old one is leaked, never destroyed locked.
inline void renew_this_thread_parker() {
  if (parker_detail::destroyed) return;
  static auto* const abandoned = new std::vector<std::shared_ptr<Parker>>;  // stays reachable
  abandoned->push_back(std::move(parker_detail::holder.parker));
  parker_detail::holder.parker = std::make_shared<Parker>();
}

// A pause for spin loops: lets the sibling hyper-thread run and saves power.
inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace streamrt::cpu
