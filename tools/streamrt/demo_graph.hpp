#pragma once
// The graph scenario of `streamrt demo` (demo_graph.cpp).
#include "streamrt/profiler.hpp"

namespace streamrt_tool {

// Captures a two-stream step once; `runs` times (after one warm-up), alternated, replays it `steps`
// times and runs it eagerly as often; prints the median time per step of each and returns whether
// the results are identical.
bool run_graph_scenario(long steps, long runs);

// `steps` eager steps and `steps` replays of the scenario once more, for `prof` (running), with
// named streams.
void trace_graph_scenario(streamrt::Profiler& prof, long steps);

}  // namespace streamrt_tool
