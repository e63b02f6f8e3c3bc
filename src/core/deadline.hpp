#pragma once
// Deadlines from time-outs, saturating: a time-out longer than the clock can count from now
// (nanoseconds::max(), a Python timeout of 1e10 seconds) becomes the clock's last instant instead
// of wrapping into the past, and a negative one is a poll. Waits on steady_clock throughout.
#include <chrono>
#include <optional>

namespace streamrt::detail {

using SteadyClock = std::chrono::steady_clock;

//! now + timeout, clamped to [now, SteadyClock::time_point::max()]. Never blocks.
inline SteadyClock::time_point deadline_after(std::chrono::nanoseconds timeout) noexcept {
  const auto now = SteadyClock::now();
  if (timeout <= std::chrono::nanoseconds::zero()) return now;
  const auto room = SteadyClock::time_point::max() - now;
  if (timeout >= std::chrono::duration_cast<std::chrono::nanoseconds>(room)) {
    return SteadyClock::time_point::max();
  }
  return now + std::chrono::duration_cast<SteadyClock::duration>(timeout);
}

//! deadline_after(*timeout), or none for no time-out. Never blocks.
inline std::optional<SteadyClock::time_point> deadline_after(
    std::optional<std::chrono::nanoseconds> timeout) noexcept {
  if (!timeout) return std::nullopt;
  return deadline_after(*timeout);
}

}  // namespace streamrt::detail
