#pragma once
// What a graph holds: the nodes a stream capture recorded (core/capture_state.hpp fills it through
// the Recording interface), which instantiation turns into replay plans (exec_data.hpp).
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "core/capture_state.hpp"
#include "streamrt/detail/work.hpp"

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

struct GraphData final : capture::Recording {
  mutable std::mutex mutex;
  std::vector<GraphNode> nodes;  // guarded by mutex
  bool capturing = false;        // guarded by mutex; a capture is filling `nodes`
  // Guarded by mutex: replaced by Graph::clear(), so that a new capture starts afresh.
  std::shared_ptr<capture::ReplayTracker> tracker = std::make_shared<capture::ReplayTracker>();

  void start() override;
  std::uint32_t add(Work work, const char* label, std::uint64_t stream_id,
                    std::vector<std::uint32_t> deps) override;
  std::vector<char> ancestors(const std::vector<std::uint32_t>& from) const override;
  void finish(bool keep) noexcept override;
  std::shared_ptr<capture::ReplayTracker> replays() const override;
};

}  // namespace streamrt::detail
