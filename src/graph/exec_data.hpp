#pragma once
// An instantiated graph: the replay plan and the launch state of a GraphExec.
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "graph_data.hpp"

namespace streamrt::detail {

// Nodes grouped for replay. A segment is a chain (each node the only successor of the one before
// it, which is its only dependency): it runs inline, no scheduling between its nodes. A level is
// a set of segments whose dependencies are all in earlier levels: its segments run in parallel.
struct ReplayPlan {
  std::vector<std::shared_ptr<Work>> keep;       // the callables, alive while the plan is
  std::vector<Work*> order;                      // nodes by level, then segment, then chain order
  std::vector<std::uint32_t> segment_begin;      // segment s = order[sb[s], sb[s + 1])
  std::vector<std::uint32_t> level_begin;        // level l = segments [lb[l], lb[l + 1])
  std::vector<std::vector<std::uint32_t>> deps;  // per node in capture order (for update())
  // Per level: the work its segments did in the latest replay (sum over segments, ns; -1 before
  // the first). Levels with less work than a parallel hand-over costs run inline. Relaxed: a
  // heuristic read and written by the (serialized) replays of one exec; no data is published.
  std::unique_ptr<std::atomic<std::int64_t>[]> level_work_ns;
};

// Builds the plan of `nodes` (in capture order, a topological order).
std::shared_ptr<const ReplayPlan> make_plan(const std::vector<GraphNode>& nodes);

// Runs one replay of `plan` on this thread (and the workers for parallel levels). Rethrows the
// first failure; nodes after it are skipped.
void run_plan(const ReplayPlan& plan);

struct ExecData {
  std::mutex mutex;
  std::shared_ptr<const ReplayPlan> plan;           // guarded by mutex; swapped by update()
  std::shared_ptr<capture::ReplayTracker> replays;  // guarded by mutex
  std::shared_ptr<impl::EventImpl> last_launch;     // guarded by mutex; end of the latest launch
  std::uint64_t last_stream_id = 0;                 // guarded by mutex
  Device last_device;                               // guarded by mutex
};

}  // namespace streamrt::detail
