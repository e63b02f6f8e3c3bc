#pragma once
// The runtime's side of the trace hook (impl::Backend::set_tracing, impl::trace_item): per-thread
// buffers that backends fill, and the switch the profiler flips in every backend.
#include <cstdint>
#include <vector>

#include "streamrt/impl/hooks.hpp"

namespace streamrt::core {

// Turns tracing on in every backend, and in backends registered later; false (and nothing
// changes) when it already was on.
bool tracing_start();
// Turns tracing off in every backend.
void tracing_stop();
// Moves out every item reported so far, from all threads.
std::vector<impl::TraceItem> tracing_collect();

}  // namespace streamrt::core
