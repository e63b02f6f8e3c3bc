#pragma once
// Tracing of stream work items for streamrt::Profiler. The hot path is tracing_enabled(): one
// relaxed atomic load per enqueued item. Items enqueued while tracing is on carry their enqueue
// time (non-zero); the stream's runner then times them and calls trace_item().
#include <atomic>
#include <cstdint>
#include <vector>

#include "streamrt/device.hpp"

namespace streamrt::cpu {

// One finished item, as recorded by the thread that ran it. `label` points to static storage
// (op names are literals; Stream::launch documents that labels must outlive the work).
struct RawTrace {
  Device device;
  std::uint64_t stream_id = 0;
  int priority = 0;
  const char* label = nullptr;
  std::int64_t enqueue_ns = 0;
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  int worker = -1;
};

namespace tracing_detail {
extern std::atomic<bool> enabled;
}  // namespace tracing_detail

// Relaxed: the flag only decides whether later items are timed; an item enqueued just as tracing
// starts or stops may be missed or included, which a profiler session tolerates. The records
// themselves are published through per-thread buffers under mutexes.
inline bool tracing_enabled() noexcept {
  return tracing_detail::enabled.load(std::memory_order_relaxed);
}

// Turns tracing on; false (and nothing changes) when it already was on.
bool tracing_start() noexcept;
// Turns tracing off.
void tracing_stop() noexcept;
// Appends a record to this thread's buffer. Never throws (a record that cannot be stored is
// dropped and counted, see tracing_dropped()).
void trace_item(const RawTrace& record) noexcept;
// Moves out every record stored so far, from all threads.
std::vector<RawTrace> tracing_collect();
// Records lost because memory ran out.
std::uint64_t tracing_dropped() noexcept;

}  // namespace streamrt::cpu
