// `streamrt demo`, graph scenario: a training-step-like pattern over two streams, captured once
// and replayed N times, against the same steps launched eagerly (docs/graphs.md).
#include "demo_graph.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "streamrt/streamrt.hpp"

namespace streamrt_tool {
namespace {

using namespace streamrt;

// Small products and element-wise ops: launch cost is a large share of each step, which is what
// a replay saves. s2 forks from s1 and joins back, as a capture needs.
struct Step {
  static constexpr std::int64_t kN = 64;
  Stream s1, s2;
  Tensor x = randn({kN, kN}, 11), w1 = randn({kN, kN}, 12), w2 = randn({kN, kN}, 13);
  Tensor out = zeros({kN, kN});

  void run() {
    s2.wait_stream(s1);
    Tensor h, g;
    {
      StreamContext c(s1);
      h = matmul(x, w1) * 0.5 + 1.0;
    }
    {
      StreamContext c(s2);
      g = matmul(x, w2) - x;
      g = g * g;
    }
    StreamContext c(s1);
    out.copy_(matmul(h, g) * 0.01 + h);
    s1.wait_stream(s2);
  }
};

double us_per_step(std::chrono::steady_clock::time_point t0, long steps) {
  const auto dt = std::chrono::steady_clock::now() - t0;
  return std::chrono::duration<double, std::micro>(dt).count() / static_cast<double>(steps);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

bool run_graph_scenario(long steps, long runs) {
  Step eager, graph;
  synchronize();
  graph.s1.begin_capture();
  graph.run();
  GraphExec exec = graph.s1.end_capture().instantiate();
  const std::size_t nodes = exec.num_nodes();

  auto run_eager = [&] {
    const auto t0 = std::chrono::steady_clock::now();
    for (long i = 0; i < steps; ++i) eager.run();
    eager.out.wait();
    return us_per_step(t0, steps);
  };
  auto run_replay = [&] {
    const auto t0 = std::chrono::steady_clock::now();
    for (long i = 0; i < steps; ++i) exec.launch(graph.s1);
    graph.out.wait();
    return us_per_step(t0, steps);
  };
  // One unrecorded run of each, then alternated runs (as the product scenarios).
  run_eager();
  run_replay();
  std::vector<double> eager_us, replay_us;
  for (long i = 0; i < runs; ++i) {
    if (i % 2 == 0) {
      eager_us.push_back(run_eager());
      replay_us.push_back(run_replay());
    } else {
      replay_us.push_back(run_replay());
      eager_us.push_back(run_eager());
    }
  }

  const bool same =
      std::memcmp(eager.out.data<float>(), graph.out.data<float>(), eager.out.nbytes()) == 0;
  const double e = median(eager_us), r = median(replay_us);
  std::printf("   captured once (%zu nodes over 2 streams), replayed %ld times per run\n", nodes,
              steps);
  std::printf("   eager: %.1f us per step; replay: %.1f us per step (%.2fx faster); results %s\n",
              e, r, e / r, same ? "identical" : "DIFFER");
  std::printf(
      "   (%s; runs alternated, after an unrecorded warm-up run of each)\n",
      runs == 1 ? "one run each" : ("medians of " + std::to_string(runs) + " runs").c_str());
  return same;
}

void trace_graph_scenario(Profiler& prof, long steps) {
  Step eager, graph;
  synchronize();
  prof.name_stream(eager.s1, "2b graph: eager s1");
  prof.name_stream(eager.s2, "2b graph: eager s2");
  prof.name_stream(graph.s1, "2b graph: replay stream");
  graph.s1.begin_capture();
  graph.run();
  GraphExec exec = graph.s1.end_capture().instantiate();
  for (long i = 0; i < steps; ++i) eager.run();
  eager.out.wait();
  for (long i = 0; i < steps; ++i) exec.launch(graph.s1);
  graph.out.wait();
}

}  // namespace streamrt_tool
