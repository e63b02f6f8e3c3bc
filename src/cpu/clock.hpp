#pragma once
// The clock of CPU events and traces: steady_clock (CLOCK_MONOTONIC on Linux, ns resolution).
#include <chrono>
#include <cstdint>

namespace streamrt::cpu {

using Clock = std::chrono::steady_clock;

// Nanoseconds on the monotonic clock.
inline std::int64_t now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

}  // namespace streamrt::cpu
