#pragma once
// The graph scenario of `streamrt demo` (demo_graph.cpp).
#include "streamrt/profiler.hpp"

namespace streamrt_tool {

// Captures a two-stream step once, replays it `steps` times and runs it eagerly as often; prints
// the time per step of each and returns whether the results are identical.
bool run_graph_scenario(streamrt::Profiler& prof, long steps);

}  // namespace streamrt_tool
