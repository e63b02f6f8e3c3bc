#pragma once
// What a captured graph holds; shared by the capture layer (src/core/capture.cpp), which fills it,
// and the graph layer (src/graph/), which instantiates and replays it.
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "streamrt/detail/work.hpp"
#include "streamrt/impl/backend.hpp"

namespace streamrt::detail {

// One captured launch or op. `deps` are indices of earlier nodes (capture order is a topological
// order), sorted and distinct.
struct GraphNode {
  // Shared, not moved: every exec instantiated from the graph calls the same callable, many times.
  std::shared_ptr<Work> work;
  const char* label = nullptr;  // a literal or null
  std::uint64_t stream_id = 0;  // the stream it was captured on (for to_dot)
  std::vector<std::uint32_t> deps;
};

// The completion of the latest replay of an exec made from a graph. Positions recorded during the
// capture (in tensors' tracking state, in events) stand for it once the capture is over, so eager
// work after a replay is ordered after it. Holds no node, so a tensor's tracking state never keeps
// the graph (and its callables, which hold the tensor's storage) alive: no cycle.
struct ReplayTracker {
  std::mutex mutex;
  std::shared_ptr<impl::EventImpl> last;  // guarded by mutex; null before the first replay
};

struct GraphData {
  mutable std::mutex mutex;
  std::vector<GraphNode> nodes;  // guarded by mutex
  bool capturing = false;        // guarded by mutex; a capture is filling `nodes`
  std::shared_ptr<ReplayTracker> replays = std::make_shared<ReplayTracker>();
};

}  // namespace streamrt::detail
