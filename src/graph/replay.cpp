// Replay plans: chains run inline, independent segments in parallel through the intra-op
// contract (the stream workers). See docs/graphs.md ("Replay").
#include <algorithm>
#include <chrono>
#include <thread>

#include "core/intra_op.hpp"
#include "exec_data.hpp"

namespace streamrt::detail {

std::shared_ptr<const ReplayPlan> make_plan(const std::vector<GraphNode>& nodes) {
  auto plan = std::make_shared<ReplayPlan>();
  const std::size_t n = nodes.size();
  std::vector<std::uint32_t> successors(n, 0);
  for (const auto& node : nodes) {
    for (auto d : node.deps) ++successors[d];
  }
  std::vector<std::vector<std::uint32_t>> segments;
  std::vector<std::uint32_t> segment_of(n, 0);
  std::vector<std::uint32_t> level_of_segment;
  for (std::uint32_t i = 0; i < n; ++i) {
    const auto& deps = nodes[i].deps;
    if (deps.size() == 1 && successors[deps[0]] == 1 &&
        segments[segment_of[deps[0]]].back() == deps[0]) {
      segment_of[i] = segment_of[deps[0]];
      segments[segment_of[i]].push_back(i);
      continue;
    }
    std::uint32_t level = 0;
    for (auto d : deps) level = std::max(level, level_of_segment[segment_of[d]] + 1);
    segment_of[i] = static_cast<std::uint32_t>(segments.size());
    segments.push_back({i});
    level_of_segment.push_back(level);
  }
  std::vector<std::uint32_t> by_level(segments.size());
  for (std::uint32_t s = 0; s < by_level.size(); ++s) by_level[s] = s;
  std::stable_sort(by_level.begin(), by_level.end(), [&](std::uint32_t a, std::uint32_t b) {
    return level_of_segment[a] < level_of_segment[b];
  });
  plan->keep.reserve(n);
  plan->order.reserve(n);
  for (const auto& node : nodes) {
    plan->keep.push_back(node.work);
    plan->deps.push_back(node.deps);
  }
  std::uint32_t current_level = 0;
  for (std::uint32_t k = 0; k < by_level.size(); ++k) {
    const std::uint32_t s = by_level[k];
    if (k == 0 || level_of_segment[s] != current_level) {
      plan->level_begin.push_back(k);
      current_level = level_of_segment[s];
    }
    plan->segment_begin.push_back(static_cast<std::uint32_t>(plan->order.size()));
    for (auto i : segments[s]) plan->order.push_back(nodes[i].work.get());
  }
  plan->segment_begin.push_back(static_cast<std::uint32_t>(plan->order.size()));
  plan->level_begin.push_back(static_cast<std::uint32_t>(segments.size()));
  const std::size_t levels = plan->level_begin.size() - 1;
  plan->level_work_ns = std::make_unique<std::atomic<std::int64_t>[]>(levels);
  for (std::size_t l = 0; l < levels; ++l) plan->level_work_ns[l].store(-1);
  return plan;
}

namespace {

using Clock = std::chrono::steady_clock;

// Below this much work a level runs inline: handing segments to other workers costs about two
// wake-ups of a parked worker (docs/graphs.md, "Replay"), more than running them here.
constexpr std::int64_t kInlineBelowNs = 20'000;

std::int64_t ns_since(Clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count();
}

inline void run_segment(const ReplayPlan& plan, std::uint32_t s) {
  Work* const* it = plan.order.data() + plan.segment_begin[s];
  Work* const* const end = plan.order.data() + plan.segment_begin[s + 1];
  for (; it != end; ++it) (**it)();
}

}  // namespace

void run_plan(const ReplayPlan& plan) {
  const std::size_t levels = plan.level_begin.size() - 1;
  for (std::size_t l = 0; l < levels; ++l) {
    const std::uint32_t first = plan.level_begin[l];
    const std::uint32_t count = plan.level_begin[l + 1] - first;
    if (count == 1) {
      run_segment(plan, first);
      continue;
    }
    std::atomic<std::int64_t>& work_ns = plan.level_work_ns[l];
    const std::int64_t last = work_ns.load(std::memory_order_relaxed);
    if (last >= 0 && last < kInlineBelowNs) {
      const auto t0 = Clock::now();
      for (std::uint32_t s = 0; s < count; ++s) run_segment(plan, first + s);
      work_ns.store(ns_since(t0), std::memory_order_relaxed);
      continue;
    }
    // Chunks of segments, claimed dynamically: the caller runs what no idle worker takes.
    // Each chunk adds its own duration, so the level's work is known whoever ran it. A level
    // goes inline only when the caller ran all of it itself (then running it inline changes
    // nothing the segments could observe: a rendezvous between them keeps its helper) and it was
    // cheap.
    std::atomic<std::int64_t> total{0};
    std::atomic<bool> helped{false};
    const auto caller = std::this_thread::get_id();
    runtime::parallel_for(0, count, 1,
                          [&plan, &total, &helped, caller, first](std::int64_t b, std::int64_t e) {
                            // Relaxed: parallel_for's join orders the chunks before the loads
                            // below.
                            if (std::this_thread::get_id() != caller)
                              helped.store(true, std::memory_order_relaxed);
                            const auto t0 = Clock::now();
                            for (auto s = b; s < e; ++s)
                              run_segment(plan, first + static_cast<std::uint32_t>(s));
                            total.fetch_add(ns_since(t0), std::memory_order_relaxed);
                          });
    work_ns.store(helped.load(std::memory_order_relaxed) ? kInlineBelowNs
                                                         : total.load(std::memory_order_relaxed),
                  std::memory_order_relaxed);
  }
}

}  // namespace streamrt::detail
