// Google Benchmark suite of the stream cases: streamrt and its baselines (std::async + future,
// a std::thread per stream with a queue, a oneTBB strand on a task_arena, and where built, a
// oneTBB task_group, a Boost.Asio strand and OpenCL on PoCL), in the same binary and run.
// Per-item figures are counters: `per_item` (seconds per item, shown with an SI prefix),
// `items_per_second`, `speedup`, `cpu_ms_per_s`. The case code is shared with `streamrt bench`
// (see cases.hpp); this binary is the Google Benchmark view of the same cases.
#include <benchmark/benchmark.h>
#include <malloc.h>

#include <cstdio>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "cases.hpp"
#include "peers.hpp"

namespace sb = streamrt_bench;

namespace {

// One instance of each peer for the whole run, made on first use. An OpenCL peer that cannot
// be made reports why, and its benchmarks are skipped with that message.
template <class P>
P* peer(std::string& error) {
  static std::unique_ptr<P> instance;
  static std::string failure;
  static bool tried = false;
  if (!tried) {
    tried = true;
    try {
      instance = std::make_unique<P>();
    } catch (const std::exception& e) {
      failure = e.what();
    }
  }
  error = failure;
  return instance.get();
}

#define STREAMRT_BENCH_PEER(state, P, var)      \
  std::string var##_error;                      \
  P* var##_ptr = peer<P>(var##_error);          \
  if (var##_ptr == nullptr) {                   \
    (state).SkipWithError(var##_error.c_str()); \
    return;                                     \
  }                                             \
  P& var = *var##_ptr

const sb::Calibration& calibration() {
  static const sb::Calibration cal = sb::calibrate();
  return cal;
}

// Idle CPU: CPU ms per second of a process holding 4 streams and no work (getrusage over 1 s).
// Registered first, so that other peers' pools are not yet busy; peers made earlier are idle.
template <class P>
void BM_IdleCpu(benchmark::State& state) {
  STREAMRT_BENCH_PEER(state, P, p);
  double ms_per_s = 0;
  for (auto _ : state) ms_per_s = sb::idle_cpu_ms_per_s(p, 4, 1.0);
  state.counters["cpu_ms_per_s"] = ms_per_s;
}

// Round trip: launch an empty item and wait for it on the host.
template <class P>
void BM_RoundTrip(benchmark::State& state) {
  STREAMRT_BENCH_PEER(state, P, p);
  auto s = p.make_stream();
  for (auto _ : state) {
    p.launch(s, [] {});
    p.sync(s);
  }
}

// Launch throughput: a batch of empty items over 1 or 4 streams from one host thread, then
// one sync. std::async makes a thread per item, so its batch is smaller.
template <class P>
void BM_Launch(benchmark::State& state) {
  STREAMRT_BENCH_PEER(state, P, p);
  const int streams = static_cast<int>(state.range(0));
  const int batch = P::kThreadPerItem ? 1000 : 10000;
  std::vector<typename P::Stream> v;
  for (int i = 0; i < streams; ++i) v.push_back(p.make_stream());
  for (auto _ : state) sb::enqueue_throughput(p, v, batch);
  const auto items = static_cast<double>(state.iterations()) * batch;
  state.SetItemsProcessed(static_cast<std::int64_t>(items));
  state.counters["per_item"] =
      benchmark::Counter(items, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

// Event record on an idle stream, then `reach(p, event)` until the stream is there.
template <class P, class Reach>
void record_then(benchmark::State& state, Reach reach) {
  STREAMRT_BENCH_PEER(state, P, p);
  auto s = p.make_stream();
  p.sync(s);
  for (auto _ : state) reach(p, p.record(s));
}

// Event record + poll until complete, on an idle stream.
template <class P>
void BM_RecordPoll(benchmark::State& state) {
  record_then<P>(state, [](P& p, const auto& e) {
    while (!p.query(e)) sb::cpu_relax();
  });
}

// Event record + host wait, on an idle stream.
template <class P>
void BM_RecordWait(benchmark::State& state) {
  record_then<P>(state, [](P& p, const auto& e) { p.wait(e); });
}

// Cross-stream hand-off: time from the end of A's item to the start of B's next item, B waiting
// on an event A records after the item (manual time = that latency).
template <class P>
void BM_Handoff(benchmark::State& state) {
  STREAMRT_BENCH_PEER(state, P, p);
  auto a = p.make_stream();
  auto b = p.make_stream();
  for (auto _ : state) state.SetIterationTime(sb::handoff_once(p, a, b) / 1e9);
}

// Overlap: two ~20 ms CPU-bound items on two streams vs on one stream.
template <class P>
void BM_Overlap(benchmark::State& state) {
  STREAMRT_BENCH_PEER(state, P, p);
  const auto iters = calibration().iters(20'000);
  std::vector<double> speedups;
  for (auto _ : state) speedups.push_back(sb::overlap_speedup(p, iters));
  state.counters["speedup"] = sb::median_of(speedups);
}

// Memory per queued item: heap bytes in use (mallinfo2: counts malloc'd bytes, so memory freed by
// earlier benchmarks and reused does not hide the growth, as it would with RSS) after 100,000 empty
// items are queued behind an item that blocks the stream, divided by the count. Empty lambdas: this
// is the queue's own cost per item, not the captured state's.
template <class P>
void BM_QueueMemory(benchmark::State& state) {
  STREAMRT_BENCH_PEER(state, P, p);
  constexpr int kItems = 100'000;
  double bytes_per_item = 0;
  for (auto _ : state) {
    auto s = p.make_stream();
    std::atomic<bool> started{false}, release{false};
    p.launch(s, [&] {
      started.store(true);
      while (!release.load()) std::this_thread::sleep_for(std::chrono::microseconds(200));
    });
    while (!started.load()) std::this_thread::yield();
    const auto before = mallinfo2();
    for (int i = 0; i < kItems; ++i) p.launch(s, [] {});
    const auto after = mallinfo2();
    release.store(true);
    p.sync(s);
    const auto used = [](const struct mallinfo2& m) {
      return static_cast<double>(m.uordblks) + static_cast<double>(m.hblkhd);
    };
    bytes_per_item = (used(after) - used(before)) / kItems;
  }
  // A peer whose queue memory does not come from malloc (its own allocator) cannot be measured so.
  if (bytes_per_item < 1.0) {
    state.SkipWithError("queued items are not allocated with malloc: not measurable here");
    return;
  }
  state.counters["bytes_per_item"] = bytes_per_item;
}

template <class P>
void register_peer() {
  const std::string n = P::kId;
  benchmark::RegisterBenchmark(("RoundTrip/" + n).c_str(), BM_RoundTrip<P>)->UseRealTime();
  benchmark::RegisterBenchmark(("Launch/" + n).c_str(), BM_Launch<P>)
      ->ArgName("streams")
      ->Arg(1)
      ->Arg(4)
      ->UseRealTime();
  if constexpr (P::kHasEvents) {
    benchmark::RegisterBenchmark(("RecordPoll/" + n).c_str(), BM_RecordPoll<P>)->UseRealTime();
    benchmark::RegisterBenchmark(("RecordWait/" + n).c_str(), BM_RecordWait<P>)->UseRealTime();
    benchmark::RegisterBenchmark(("Handoff/" + n).c_str(), BM_Handoff<P>)
        ->UseManualTime()
        ->Iterations(2000);
  }
  if constexpr (!P::kThreadPerItem) {  // std::async: a thread per item, not a queue
    benchmark::RegisterBenchmark(("QueueMemory/" + n).c_str(), BM_QueueMemory<P>)
        ->Iterations(1)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  }
  benchmark::RegisterBenchmark(("Overlap/" + n).c_str(), BM_Overlap<P>)
      ->Iterations(7)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
}

template <class P>
void register_idle() {
  benchmark::RegisterBenchmark((std::string("IdleCpu/") + P::kId).c_str(), BM_IdleCpu<P>)
      ->Iterations(1)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
}

template <class... Ps>
void register_all() {
  (register_idle<Ps>(), ...);
  (register_peer<Ps>(), ...);
}

}  // namespace

int main(int argc, char** argv) {
  register_all<sb::StreamrtPeer, sb::AsyncPeer, sb::ThreadQueuePeer
#ifdef STREAMRT_BENCH_HAVE_TBB
               ,
               sb::TbbStrandPeer, sb::TbbGroupPeer
#endif
#ifdef STREAMRT_BENCH_HAVE_ASIO
               ,
               sb::AsioStrandPeer
#endif
#ifdef STREAMRT_BENCH_HAVE_OPENCL
               ,
               sb::OpenClPeer
#endif
               >();
#ifndef STREAMRT_BENCH_HAVE_TBB
  std::fputs("streamrt_bench: oneTBB not found at configure time: TBB peers skipped\n", stderr);
#endif
#ifndef STREAMRT_BENCH_HAVE_ASIO
  std::fputs("streamrt_bench: Boost.Asio not found at configure time: Asio peer skipped\n", stderr);
#endif
#ifndef STREAMRT_BENCH_HAVE_OPENCL
  std::fputs("streamrt_bench: OpenCL not found at configure time: OpenCL peer skipped\n", stderr);
#endif
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
