// GraphExec: launch and update of an instantiated graph. Uses the public Stream API and the
// backend interface only (never a backend's internals).
#include <string>

#include "graph_access.hpp"
#include "streamrt/error.hpp"
#include "streamrt/graph.hpp"
#include "streamrt/impl/backend.hpp"

namespace streamrt {

namespace {

std::string deps_text(const std::vector<std::uint32_t>& deps) {
  // Appended piece by piece: g++ 12 at -O3 warns (-Wrestrict, a false positive) on the
  // temporary of `"," + std::to_string(...)` once this is inlined into the error paths.
  std::string out = "{";
  for (std::size_t i = 0; i < deps.size(); ++i) {
    if (i != 0) out += ',';
    out += std::to_string(deps[i]);
  }
  out += '}';
  return out;
}

}  // namespace

void GraphExec::launch() {
  launch(current_stream());
}

void GraphExec::launch(const Stream& stream) {
  if (stream.is_capturing()) {
    throw Error(api::member("GraphExec", "launch") + ": " + stream.str() +
                " is capturing; launching a graph inside a capture is not supported (launch it "
                "after " +
                api::member("Stream", "end_capture") + ")");
  }
  impl::StreamImpl& si = *stream.impl();
  impl::Backend& backend = si.backend();
  std::shared_ptr<impl::EventImpl> done;
  std::shared_ptr<capture::ReplayTracker> replays;
  {
    // Held across the launch so that launches of one exec are queued in one order, each after
    // the one before (they share the nodes' callables and memory).
    std::lock_guard lock(data_->mutex);
    if (data_->last_launch &&
        (data_->last_stream_id != stream.id() || data_->last_device != stream.device())) {
      backend.block(data_->last_launch, si);
    }
    std::shared_ptr<const detail::ReplayPlan> plan = data_->plan;
    backend.enqueue(si, detail::Work([plan = std::move(plan)] { detail::run_plan(*plan); }),
                    "graph_replay");
    done = backend.record(si, EventOptions{});
    data_->last_launch = done;
    data_->last_stream_id = stream.id();
    data_->last_device = stream.device();
    replays = data_->replays;
  }
  std::lock_guard lock(replays->mutex);
  replays->last = std::move(done);
}

void GraphExec::update(const Graph& g) {
  std::shared_ptr<const detail::ReplayPlan> plan;
  std::shared_ptr<capture::ReplayTracker> replays;
  {
    const auto& d = detail::GraphAccess::data(g);
    std::lock_guard lock(d->mutex);
    if (d->capturing) {
      throw Error(api::member("GraphExec", "update") +
                  ": the new graph is being captured into; end the capture first");
    }
    plan = detail::make_plan(d->nodes);
    replays = d->tracker;
  }
  std::shared_ptr<const detail::ReplayPlan> old;  // released after the lock
  std::lock_guard lock(data_->mutex);
  const auto& mine = data_->plan->deps;
  if (mine.size() != plan->deps.size()) {
    throw Error(api::member("GraphExec", "update") + ": the new graph has " +
                std::to_string(plan->deps.size()) + " nodes, this exec " +
                std::to_string(mine.size()) +
                "; update needs the same topology (instantiate the new graph instead)");
  }
  for (std::size_t i = 0; i < mine.size(); ++i) {
    if (mine[i] != plan->deps[i]) {
      throw Error(api::member("GraphExec", "update") + ": node " + std::to_string(i) +
                  " depends on " + deps_text(plan->deps[i]) + " in the new graph but on " +
                  deps_text(mine[i]) +
                  " in this exec; update needs the same topology (instantiate the new graph "
                  "instead)");
    }
  }
  old = std::exchange(data_->plan, std::move(plan));
  data_->replays = std::move(replays);
}

std::size_t GraphExec::num_nodes() const {
  std::lock_guard lock(data_->mutex);
  return data_->plan->deps.size();
}

}  // namespace streamrt
