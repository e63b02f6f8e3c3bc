#pragma once
// The graph layer's access to the internals of the Graph and GraphExec handles (as TensorAccess
// is the ops layer's to Tensor's).
#include <memory>
#include <utility>

#include "exec_data.hpp"
#include "graph_data.hpp"
#include "streamrt/graph.hpp"

namespace streamrt::detail {

struct GraphAccess {
  static const std::shared_ptr<GraphData>& data(const Graph& g) noexcept { return g.data_; }
  // A handle to existing data.
  static Graph wrap(std::shared_ptr<GraphData> d) noexcept { return Graph(std::move(d)); }
  static GraphExec make_exec(std::shared_ptr<ExecData> d) noexcept {
    return GraphExec(std::move(d));
  }
};

}  // namespace streamrt::detail
