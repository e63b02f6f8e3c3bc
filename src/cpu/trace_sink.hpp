#pragma once
// The CPU backend's side of the trace hook (impl::Backend::set_tracing, impl::trace_item): what
// feeds the runtime's trace sink. The hot path is tracing_enabled(): one relaxed atomic load per
// enqueued item. Items enqueued while tracing is on carry their enqueue time (non-zero); the
// stream's runner then times them and reports them with trace_item().
#include <atomic>

#include "streamrt/impl/hooks.hpp"

namespace streamrt::cpu {

// One finished item, as reported by the thread that ran it (with impl::trace_item).
using RawTrace = impl::TraceItem;

namespace tracing_detail {
extern std::atomic<bool> enabled;  // set by CpuBackend::set_tracing
}  // namespace tracing_detail

// Relaxed: the flag only decides whether later items are timed; an item enqueued just as tracing
// starts or stops may be missed or included, which a profiler session tolerates. The records
// themselves are published through the runtime's per-thread buffers under mutexes.
inline bool tracing_enabled() noexcept {
  return tracing_detail::enabled.load(std::memory_order_relaxed);
}

}  // namespace streamrt::cpu
