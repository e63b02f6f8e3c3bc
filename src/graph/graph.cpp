// The Graph handle and what a graph holds (GraphData, the Recording a stream capture fills).
#include "streamrt/graph.hpp"

#include <exception>
#include <sstream>
#include <string>

#include "graph_access.hpp"
#include "streamrt/error.hpp"
#include "support/escape.hpp"

namespace streamrt {

namespace detail {

void GraphData::start() {
  std::lock_guard lock(mutex);
  if (capturing) {
    throw Error(api::member("Stream", "begin_capture") +
                ": the graph is already being captured into by another stream");
  }
  if (!nodes.empty()) {
    throw Error(api::member("Stream", "begin_capture") + ": the graph already holds " +
                std::to_string(nodes.size()) + " nodes; capture into an empty graph (call " +
                api::member("Graph", "clear") + "() first)");
  }
  capturing = true;
}

std::uint32_t GraphData::add(Work work, const char* label, std::uint64_t stream_id,
                             std::vector<std::uint32_t> deps) {
  GraphNode node;
  node.work = std::make_shared<Work>(std::move(work));
  node.label = label;
  node.stream_id = stream_id;
  node.deps = std::move(deps);
  std::lock_guard lock(mutex);
  const auto index = static_cast<std::uint32_t>(nodes.size());
  nodes.push_back(std::move(node));
  return index;
}

std::vector<char> GraphData::ancestors(const std::vector<std::uint32_t>& from) const {
  std::lock_guard lock(mutex);
  std::vector<char> seen(nodes.size(), 0);
  std::vector<std::uint32_t> todo = from;
  while (!todo.empty()) {
    const std::uint32_t n = todo.back();
    todo.pop_back();
    if (seen[n]) continue;
    seen[n] = 1;
    for (auto d : nodes[n].deps) todo.push_back(d);
  }
  return seen;
}

void GraphData::finish(bool keep) noexcept {
  std::vector<GraphNode> dropped;  // destroyed after the lock: callables may call back
  std::lock_guard lock(mutex);
  capturing = false;
  if (!keep) dropped.swap(nodes);
}

std::shared_ptr<capture::ReplayTracker> GraphData::replays() const {
  std::lock_guard lock(mutex);
  return tracker;
}

}  // namespace detail

Graph::Graph() : data_(std::make_shared<detail::GraphData>()) {}

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
    data_->tracker = std::make_shared<capture::ReplayTracker>();
  }
}

GraphExec Graph::instantiate() const {
  std::lock_guard lock(data_->mutex);
  if (data_->capturing) {
    throw Error(api::member("Graph", "instantiate") + ": the graph is being captured into; call " +
                api::member("Stream", "end_capture") + " first");
  }
  auto exec = std::make_shared<detail::ExecData>();
  exec->plan = detail::make_plan(data_->nodes);
  exec->replays = data_->tracker;
  return detail::GraphAccess::make_exec(std::move(exec));
}

std::string Graph::to_dot() const {
  std::lock_guard lock(data_->mutex);
  std::ostringstream out;
  out << "digraph streamrt_graph {\n  node [shape=box];\n";
  for (std::size_t i = 0; i < data_->nodes.size(); ++i) {
    const auto& node = data_->nodes[i];
    out << "  n" << i << " [label=\"" << i
        << ": "
        // DOT's quoted strings take the escapes of a JSON string (\", \\, \n).
        << detail::json_escape(node.label != nullptr ? node.label : "launch") << "\\nstream "
        << node.stream_id << "\"];\n";
    for (auto d : node.deps) out << "  n" << d << " -> n" << i << ";\n";
  }
  out << "}\n";
  return out.str();
}

}  // namespace streamrt
