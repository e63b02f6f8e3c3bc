// Outputs of torch ops on streams are allocated by the calling thread when the op is enqueued, from
// glibc's main heap, and freed by the workers in completion order while the host allocates the
// next ones, so the heap fills with free holes that glibc keeps resident: memory well above eager
// torch's, not leaked (docs/torch.md, "Memory"). malloc_trim(0) gives it back but costs
// milliseconds under the arena's lock, so a worker trims at most once per kInterval, and only when
// the heap's break grew by kGrowth since the last trim: a steady loop pays nothing.
#include "torch_runner_trim.hpp"

#include <malloc.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>

namespace streamrt::python::torch_runner {
namespace {

constexpr std::chrono::milliseconds kInterval{250};
constexpr std::uintptr_t kGrowth = std::uintptr_t{64} << 20;

std::atomic<std::int64_t> g_next_look_ns{0};
std::atomic<std::uintptr_t> g_break_at_last_trim{0};  // 0: no look yet

std::int64_t now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::uintptr_t heap_break() noexcept {
  return reinterpret_cast<std::uintptr_t>(sbrk(0));
}

// Whether this thread takes the look due now (one thread per interval).
bool my_turn() noexcept {
  const std::int64_t now = now_ns();
  std::int64_t next = g_next_look_ns.load(std::memory_order_relaxed);
  // (relaxed: a time-out, not a synchronization; the exchange elects one thread per look)
  return now >= next &&
         g_next_look_ns.compare_exchange_strong(
             next, now + std::chrono::duration_cast<std::chrono::nanoseconds>(kInterval).count(),
             std::memory_order_relaxed);
}

}  // namespace

void give_back_heap_memory() noexcept {
  if (!my_turn()) return;
  const std::uintptr_t now = heap_break();
  // (relaxed: only the elected thread reads and writes it, a quarter of a second apart)
  const std::uintptr_t last = g_break_at_last_trim.load(std::memory_order_relaxed);
  if (last == 0) {  // the first look: where the heap starts
    g_break_at_last_trim.store(now, std::memory_order_relaxed);
    return;
  }
  if (now < last + kGrowth) return;
  malloc_trim(0);
  g_break_at_last_trim.store(heap_break(), std::memory_order_relaxed);
}

}  // namespace streamrt::python::torch_runner
