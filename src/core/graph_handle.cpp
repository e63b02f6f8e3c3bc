// The device-agnostic Graph handle and GraphCapture; instantiation and replay are in src/graph/.
#include <exception>
#include <string>

#include "capture.hpp"
#include "graph_data.hpp"
#include "streamrt/error.hpp"
#include "streamrt/graph.hpp"

namespace streamrt {

std::string_view to_string(CaptureMode mode) noexcept {
  switch (mode) {
    case CaptureMode::Global:
      return "global";
    case CaptureMode::ThreadLocal:
      return "thread_local";
    case CaptureMode::Relaxed:
      return "relaxed";
  }
  return "unknown";
}

Graph::Graph() : data_(std::make_shared<detail::GraphData>()) {}

Graph Graph::from_data(std::shared_ptr<detail::GraphData> d) noexcept {
  Graph g;
  g.data_ = std::move(d);
  return g;
}

std::size_t Graph::num_nodes() const {
  std::lock_guard lock(data_->mutex);
  return data_->nodes.size();
}

std::size_t Graph::num_edges() const {
  std::lock_guard lock(data_->mutex);
  std::size_t n = 0;
  for (const auto& node : data_->nodes) n += node.deps.size();
  return n;
}

void Graph::clear() {
  std::vector<detail::GraphNode> dropped;  // destroyed after the lock: callables may call back
  {
    std::lock_guard lock(data_->mutex);
    if (data_->capturing) {
      throw Error(api::member("Graph", "clear") +
                  ": the graph is being captured into; end the capture first");
    }
    dropped.swap(data_->nodes);
    // Positions recorded by the old capture keep the old tracker; a new capture starts afresh.
    data_->replays = std::make_shared<detail::ReplayTracker>();
  }
}

GraphCapture::GraphCapture(Stream& stream, Graph& graph, CaptureMode mode)
    : stream_(stream), exceptions_(std::uncaught_exceptions()) {
  stream_.begin_capture(graph, mode);
}

GraphCapture::~GraphCapture() noexcept(false) {
  if (std::uncaught_exceptions() > exceptions_) {
    // Leaving by an exception: end the capture, report nothing more (the first error wins).
    try {
      stream_.end_capture();
    } catch (...) {
    }
    return;
  }
  stream_.end_capture();
}

}  // namespace streamrt
