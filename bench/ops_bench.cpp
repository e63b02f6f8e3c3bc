// Benchmarks of the tensor/ops layer: dependency-tracking overhead per op, the cost of
// the tracing hook while no profiler runs, and the matrix-product cases (one 2048^2 sgemm on a
// stream vs a direct multithreaded cblas_sgemm; two streams x 200 products of 256^2 vs one stream).
// Not part of `make test`'s pass/fail; figures go to docs/performance.md.
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "streamrt/streamrt.hpp"

namespace {

using namespace streamrt;
using Clock = std::chrono::steady_clock;

constexpr int kBatch = 1000;  // ops submitted per timed batch

// Host cost of submitting one in-place op (no allocation) on one stream, tracking on or off.
// Only the submission is timed; the stream is drained outside the timed region.
void BM_SubmitFill(benchmark::State& state) {
  const bool tracking = state.range(0) != 0;
  DependencyTrackingGuard guard(tracking);
  Stream s;
  StreamContext ctx(s);
  Tensor t = zeros({16});
  s.synchronize();
  for (auto _ : state) {
    const auto t0 = Clock::now();
    for (int i = 0; i < kBatch; ++i) t.fill_(i);
    const auto t1 = Clock::now();
    state.SetIterationTime(std::chrono::duration<double>(t1 - t0).count());
    s.synchronize();
  }
  state.SetItemsProcessed(state.iterations() * kBatch);  // ns per op = 1e9 / items_per_second
}
BENCHMARK(BM_SubmitFill)->ArgName("tracking")->Arg(0)->Arg(1)->UseManualTime();

// As above for an op that allocates its result and reads two inputs (c = a + b).
void BM_SubmitAdd(benchmark::State& state) {
  const bool tracking = state.range(0) != 0;
  DependencyTrackingGuard guard(tracking);
  Stream s;
  StreamContext ctx(s);
  Tensor a = ones({16}), b = ones({16});
  s.synchronize();
  std::vector<Tensor> keep(kBatch);
  for (auto _ : state) {
    const auto t0 = Clock::now();
    for (int i = 0; i < kBatch; ++i) keep[static_cast<std::size_t>(i)] = a + b;
    const auto t1 = Clock::now();
    state.SetIterationTime(std::chrono::duration<double>(t1 - t0).count());
    s.synchronize();
    for (auto& k : keep) k = Tensor();
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
}
BENCHMARK(BM_SubmitAdd)->ArgName("tracking")->Arg(0)->Arg(1)->UseManualTime();

// Cross-stream: each write alternates between two streams, so tracking inserts a stream wait on
// the other stream's previous write every time (the costliest tracked case).
void BM_SubmitFillAlternatingStreams(benchmark::State& state) {
  const bool tracking = state.range(0) != 0;
  DependencyTrackingGuard guard(tracking);
  Stream s1, s2;
  Tensor t = zeros({16});
  t.wait();
  for (auto _ : state) {
    const auto t0 = Clock::now();
    for (int i = 0; i < kBatch; ++i) {
      StreamContext ctx(i % 2 == 0 ? s1 : s2);
      t.fill_(i);
    }
    const auto t1 = Clock::now();
    state.SetIterationTime(std::chrono::duration<double>(t1 - t0).count());
    s1.synchronize();
    s2.synchronize();
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
}
BENCHMARK(BM_SubmitFillAlternatingStreams)->ArgName("tracking")->Arg(0)->Arg(1)->UseManualTime();

// Launch of an empty item with the profiler off (the default: the hook is one relaxed load) and
// on (timestamps plus a record per item). Submission timed as above.
void BM_LaunchProfiler(benchmark::State& state) {
  const bool profiling = state.range(0) != 0;
  Profiler prof;
  if (profiling) prof.start();
  Stream s;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    for (int i = 0; i < kBatch; ++i) s.launch("empty", [] {});
    const auto t1 = Clock::now();
    state.SetIterationTime(std::chrono::duration<double>(t1 - t0).count());
    s.synchronize();
    if (profiling) prof.clear();
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
}
BENCHMARK(BM_LaunchProfiler)->ArgName("profiler")->Arg(0)->Arg(1)->UseManualTime();

// What the hook costs when off, in isolation: one relaxed atomic load (a reference figure).
void BM_RelaxedLoad(benchmark::State& state) {
  static std::atomic<bool> flag{false};
  for (auto _ : state) benchmark::DoNotOptimize(flag.load(std::memory_order_relaxed));
}
BENCHMARK(BM_RelaxedLoad);

void set_flops(benchmark::State& state, double n, double products) {
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * n * n * n * products * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

// One 2048^2 float32 product through streamrt (on a stream, row blocks across the pool).
void BM_Matmul2048Stream(benchmark::State& state) {
  const std::int64_t n = 2048;
  Tensor a = rand({n, n}, 1), b = rand({n, n}, 2);
  matmul(a, b).wait();  // warm-up (and sets OpenBLAS to one thread per caller)
  Stream s;
  StreamContext ctx(s);
  for (auto _ : state) {
    Tensor c = matmul(a, b);
    c.wait();
  }
  set_flops(state, n, 1);
}
BENCHMARK(BM_Matmul2048Stream)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);

// The same product as a direct cblas_sgemm call with OpenBLAS's own threads (all cores).
void BM_Matmul2048DirectOpenBLAS(benchmark::State& state) {
  const int n = 2048;
  Tensor a = rand({n, n}, 1), b = rand({n, n}, 2);
  std::vector<float> c(static_cast<std::size_t>(n) * n);
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  matmul(ones({1, 1}), ones({1, 1})).wait();  // let streamrt set its OpenBLAS setting first
  const int threads = static_cast<int>(std::thread::hardware_concurrency());
  openblas_set_num_threads(threads);
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, pa, n, pb, n, 0.0f,
                c.data(), n);
    benchmark::ClobberMemory();
  }
  openblas_set_num_threads(1);  // back to streamrt's setting for the cases that follow
  state.counters["blas_threads"] = threads;
  set_flops(state, n, 1);
}
BENCHMARK(BM_Matmul2048DirectOpenBLAS)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);

// 200 independent 256^2 products per stream, on `streams` streams (1: all 400 on one stream).
void BM_SmallMatmuls(benchmark::State& state) {
  const auto streams = state.range(0);
  const std::int64_t n = 256, per_stream = 200 * 2 / streams;
  Tensor a = rand({n, n}, 3), b = rand({n, n}, 4);
  matmul(a, b).wait();
  std::vector<Stream> ss(static_cast<std::size_t>(streams));
  for (auto& s : ss) s = Stream();
  std::vector<Tensor> outs(static_cast<std::size_t>(streams));
  for (auto _ : state) {
    for (auto& s : ss) {
      StreamContext ctx(s);
      for (std::int64_t i = 0; i < per_stream; ++i) outs[&s - ss.data()] = matmul(a, b);
    }
    for (auto& s : ss) s.synchronize();
  }
  state.counters["products/s"] = benchmark::Counter(static_cast<double>(per_stream * streams),
                                                    benchmark::Counter::kIsIterationInvariantRate);
  set_flops(state, n, static_cast<double>(per_stream * streams));
}
BENCHMARK(BM_SmallMatmuls)
    ->ArgName("streams")
    ->Arg(1)
    ->Arg(2)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(2.0);

// The baselines of BM_SmallMatmuls, in the same binary: the 400 products as direct cblas_sgemm
// calls, one after the other, with OpenBLAS's own threads (all cores: what one stream is compared
// with), or split over `threads` plain threads each making single-threaded calls (what two
// streams are compared with).
void BM_SmallMatmulsDirect(benchmark::State& state) {
  const auto threads = static_cast<int>(state.range(0));
  const int n = 256, total = 400;
  Tensor a = rand({n, n}, 3), b = rand({n, n}, 4);
  matmul(ones({1, 1}), ones({1, 1})).wait();  // let streamrt set its OpenBLAS setting first
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  std::vector<std::vector<float>> cs(static_cast<std::size_t>(std::max(threads, 1)),
                                     std::vector<float>(static_cast<std::size_t>(n) * n));
  auto run = [&](int t, int count) {
    for (int i = 0; i < count; ++i)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, pa, n, pb, n, 0.0f,
                  cs[static_cast<std::size_t>(t)].data(), n);
  };
  if (threads == 0) openblas_set_num_threads(static_cast<int>(std::thread::hardware_concurrency()));
  for (auto _ : state) {
    if (threads == 0) {
      run(0, total);
    } else {
      std::vector<std::thread> ts;
      for (int t = 0; t < threads; ++t) ts.emplace_back(run, t, total / threads);
      for (auto& t : ts) t.join();
    }
    benchmark::ClobberMemory();
  }
  openblas_set_num_threads(1);  // back to streamrt's setting for the cases that follow
  state.counters["products/s"] =
      benchmark::Counter(total, benchmark::Counter::kIsIterationInvariantRate);
  set_flops(state, n, total);
}
// threads=0: OpenBLAS's own threads; threads=2: two plain threads of single-threaded calls.
BENCHMARK(BM_SmallMatmulsDirect)
    ->ArgName("threads")
    ->Arg(0)
    ->Arg(2)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(2.0);

}  // namespace

BENCHMARK_MAIN();
