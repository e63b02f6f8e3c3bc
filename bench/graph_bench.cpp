// Graph replay against its baselines, in one binary (docs/graphs.md, docs/performance.md):
//  * a chain of N empty nodes: replay of a captured graph, the same items launched directly, and
//    oneTBB's flow::graph (continue_nodes, try_put to wait_for_all);
//  * a fork-join 1 -> W -> 1 of empty nodes: the same three;
//  * a training-step-like pattern (matmuls and element-wise ops over two streams): eager against
//    captured + replayed, with the results checked identical before timing.
// items_per_second counts graph nodes (or launched items), so 1/rate is the cost per node.
// oneTBB runs its graph on the calling thread too; it needs no hand-over to a worker. The CPU
// column is the whole process's CPU time (all threads): on a loaded machine, where the wall time
// is mostly waiting to be scheduled, it is the better measure of the work a replay costs.
#include <benchmark/benchmark.h>

#include <cstring>
#include <memory>
#include <vector>

#include "streamrt/streamrt.hpp"

#ifdef STREAMRT_BENCH_HAVE_TBB
#include <tbb/flow_graph.h>
#endif

namespace {

using namespace streamrt;

// ---- chain ------------------------------------------------------------------------------------

void BM_ChainReplay(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  Stream s;
  s.begin_capture();
  for (int i = 0; i < n; ++i) s.launch([] {});
  GraphExec exec = s.end_capture().instantiate();
  const int batch = static_cast<int>(state.range(1));
  for (auto _ : state) {
    for (int b = 0; b < batch; ++b) exec.launch(s);
    s.synchronize();
  }
  state.SetItemsProcessed(state.iterations() * n * batch);
}

void BM_ChainDirect(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  Stream s;
  const int batch = static_cast<int>(state.range(1));
  for (auto _ : state) {
    for (int i = 0; i < n * batch; ++i) s.launch([] {});
    s.synchronize();
  }
  state.SetItemsProcessed(state.iterations() * n * batch);
}

// ---- fork-join --------------------------------------------------------------------------------

void BM_ForkJoinReplay(benchmark::State& state) {
  const int width = static_cast<int>(state.range(0));
  Stream s;
  std::vector<Stream> side(width);
  s.begin_capture();
  s.launch([] {});
  Event fork = s.record_event();
  for (auto& b : side) {
    b.wait_event(fork);
    b.launch([] {});
    s.wait_event(b.record_event());
  }
  s.launch([] {});
  GraphExec exec = s.end_capture().instantiate();
  const int batch = static_cast<int>(state.range(1));
  for (auto _ : state) {
    for (int b = 0; b < batch; ++b) exec.launch(s);
    s.synchronize();
  }
  state.SetItemsProcessed(state.iterations() * (width + 2) * batch);
}

void BM_ForkJoinDirect(benchmark::State& state) {
  const int width = static_cast<int>(state.range(0));
  Stream s;
  std::vector<Stream> side(width);
  std::vector<Event> done(width);
  Event fork;
  const int batch = static_cast<int>(state.range(1));
  for (auto _ : state) {
    for (int b = 0; b < batch; ++b) {
      s.launch([] {});
      fork.record(s);
      for (int i = 0; i < width; ++i) {
        side[i].wait_event(fork);
        side[i].launch([] {});
        done[i].record(side[i]);
      }
      for (auto& e : done) s.wait_event(e);
      s.launch([] {});
    }
    s.synchronize();
  }
  state.SetItemsProcessed(state.iterations() * (width + 2) * batch);
}

#ifdef STREAMRT_BENCH_HAVE_TBB
using tbb::flow::continue_msg;
using Node = tbb::flow::continue_node<continue_msg>;

void BM_ChainTbbFlow(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  tbb::flow::graph g;
  std::vector<std::unique_ptr<Node>> nodes;
  for (int i = 0; i < n; ++i) {
    nodes.push_back(std::make_unique<Node>(g, [](const continue_msg&) { return continue_msg(); }));
    if (i > 0) tbb::flow::make_edge(*nodes[i - 1], *nodes[i]);
  }
  for (auto _ : state) {
    nodes.front()->try_put(continue_msg());
    g.wait_for_all();
  }
  state.SetItemsProcessed(state.iterations() * n);
}

void BM_ForkJoinTbbFlow(benchmark::State& state) {
  const int width = static_cast<int>(state.range(0));
  tbb::flow::graph g;
  auto body = [](const continue_msg&) { return continue_msg(); };
  Node source(g, body), sink(g, body);
  std::vector<std::unique_ptr<Node>> mid;
  for (int i = 0; i < width; ++i) {
    mid.push_back(std::make_unique<Node>(g, body));
    tbb::flow::make_edge(source, *mid.back());
    tbb::flow::make_edge(*mid.back(), sink);
  }
  for (auto _ : state) {
    source.try_put(continue_msg());
    g.wait_for_all();
  }
  state.SetItemsProcessed(state.iterations() * (width + 2));
}
#endif

// ---- training-step-like pattern ---------------------------------------------------------------

// Two streams: s1 runs the "forward" matmuls, s2 an independent branch; they meet at the end.
// The tracker orders the cross-stream uses (captured as graph edges).
struct Step {
  static constexpr std::int64_t kN = 128;
  Stream s1, s2;
  Tensor x = randn({kN, kN}, 1), w1 = randn({kN, kN}, 2), w2 = randn({kN, kN}, 3);
  Tensor out = zeros({kN, kN});

  Step() { synchronize(); }
  // The fork and join are explicit, as with CUDA streams: a capture only follows s2 once s2 has
  // waited on the capturing s1.
  void run() {
    Tensor h, g;
    s2.wait_stream(s1);
    {
      StreamContext c(s1);
      h = matmul(x, w1);
      h = h * 0.5 + 1.0;
    }
    {
      StreamContext c(s2);
      g = matmul(x, w2) - x;
      g = g * g;
    }
    StreamContext c(s1);
    out.copy_(matmul(h, g) + h);
    s1.wait_stream(s2);
  }
};

bool same(const Tensor& a, const Tensor& b) {
  return std::memcmp(a.data<float>(), b.data<float>(), a.nbytes()) == 0;
}

void BM_StepEager(benchmark::State& state) {
  Step step;
  for (auto _ : state) {
    step.run();
    step.out.wait();
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_StepReplay(benchmark::State& state) {
  Step eager, captured;
  eager.run();
  eager.out.wait();
  captured.s1.begin_capture();
  captured.run();
  GraphExec exec = captured.s1.end_capture().instantiate();
  exec.launch(captured.s1);
  if (!same(eager.out, captured.out)) {
    state.SkipWithError("the replay's result differs from the eager one");
    return;
  }
  for (auto _ : state) {
    exec.launch(captured.s1);
    captured.out.wait();
  }
  state.SetItemsProcessed(state.iterations());
}

// Second argument: launches (replays, or rounds of direct launches) per synchronize; 16 amortizes
// the round trip to a worker, which dominates on a loaded machine.
BENCHMARK(BM_ChainReplay)
    ->Args({1000, 1})
    ->Args({1000, 16})
    ->UseRealTime()
    ->MeasureProcessCPUTime();
BENCHMARK(BM_ChainDirect)
    ->Args({1000, 1})
    ->Args({1000, 16})
    ->UseRealTime()
    ->MeasureProcessCPUTime();
BENCHMARK(BM_ForkJoinReplay)->Args({64, 1})->Args({64, 16})->UseRealTime()->MeasureProcessCPUTime();
BENCHMARK(BM_ForkJoinDirect)->Args({64, 1})->Args({64, 16})->UseRealTime()->MeasureProcessCPUTime();
#ifdef STREAMRT_BENCH_HAVE_TBB
BENCHMARK(BM_ChainTbbFlow)->Arg(1000)->UseRealTime()->MeasureProcessCPUTime();
BENCHMARK(BM_ForkJoinTbbFlow)->Arg(64)->UseRealTime()->MeasureProcessCPUTime();
#endif
BENCHMARK(BM_StepEager)->UseRealTime()->MeasureProcessCPUTime();
BENCHMARK(BM_StepReplay)->UseRealTime()->MeasureProcessCPUTime();

}  // namespace

BENCHMARK_MAIN();
