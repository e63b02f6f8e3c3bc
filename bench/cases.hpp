#pragma once
//! \file cases.hpp
//! The benchmark cases, written once as templates over a peer (see peers.hpp) and shared by the
//! Google Benchmark binary (bench/streamrt_bench.cpp) and `streamrt bench`. Each function runs
//! one repetition and returns its figure. Not thread-safe: one driving thread per peer.

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <thread>
#include <vector>

#include "peers.hpp"

namespace streamrt_bench {

//! Keeps `x` alive so the compiler cannot drop the computation that produced it.
inline void keep(double x) noexcept {
  asm volatile("" : : "r,m"(x) : "memory");
}

//! CPU-bound work: `iters` dependent floating-point steps, no memory traffic. Thread-safe.
inline double spin_work(std::int64_t iters) noexcept {
  double x = 1.0;
  for (std::int64_t i = 0; i < iters; ++i) x = std::sqrt(x + static_cast<double>(i & 7));
  keep(x);
  return x;
}

//! How many spin_work iterations take one microsecond on one core of this machine.
struct Calibration {
  //! Iterations per microsecond (best of several timed runs, the least disturbed one).
  double iters_per_us = 100.0;
  //! Iterations for `us` microseconds of work (at least 1).
  std::int64_t iters(double us) const noexcept {
    return std::max<std::int64_t>(1, std::llround(iters_per_us * us));
  }
};

//! Measures Calibration on the calling thread (about 60 ms). Blocks. Many short timed runs and
//! the fastest one: on a shared machine most runs are slowed by other processes, the fastest is
//! the speed of an undisturbed core.
inline Calibration calibrate() {
  constexpr std::int64_t kIters = 1 << 13;
  spin_work(kIters * 64);  // warm up frequency and caches
  std::int64_t best = INT64_MAX;
  for (int r = 0; r < 400; ++r) {
    const auto t0 = now_ns();
    spin_work(kIters);
    best = std::min(best, now_ns() - t0);
  }
  return Calibration{static_cast<double>(kIters) * 1000.0 / static_cast<double>(best)};
}

//! Process CPU time (user + system) in nanoseconds, from getrusage(RUSAGE_SELF). Thread-safe.
inline std::int64_t process_cpu_ns() noexcept {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  auto ns = [](const timeval& tv) {
    return static_cast<std::int64_t>(tv.tv_sec) * 1'000'000'000 +
           static_cast<std::int64_t>(tv.tv_usec) * 1000;
  };
  return ns(ru.ru_utime) + ns(ru.ru_stime);
}

//! Round trip: launch an empty item and wait for it on the host, `ops` times. ns per op.
template <class P>
double round_trip(P& p, typename P::Stream& s, int ops) {
  const auto t0 = now_ns();
  for (int i = 0; i < ops; ++i) {
    p.launch(s, [] {});
    p.sync(s);
  }
  return static_cast<double>(now_ns() - t0) / ops;
}

//! Enqueue throughput: `items` empty items spread round-robin over `streams` (made before the
//! clock starts), then one sync of every stream. ns per item.
template <class P>
double enqueue_throughput(P& p, std::vector<typename P::Stream>& streams, int items) {
  const auto n = streams.size();
  const auto t0 = now_ns();
  for (int i = 0; i < items; ++i) p.launch(streams[static_cast<std::size_t>(i) % n], [] {});
  for (auto& s : streams) p.sync(s);
  return static_cast<double>(now_ns() - t0) / items;
}

//! As enqueue_throughput, but returns the CPU time the whole process spent per item (host and
//! workers, spinning included; getrusage). Less sensitive than wall time to other processes on a
//! shared machine: it is what the runtime costs, not how long the machine made it wait.
template <class P>
double enqueue_cpu(P& p, std::vector<typename P::Stream>& streams, int items) {
  const auto c0 = process_cpu_ns();
  enqueue_throughput(p, streams, items);
  return static_cast<double>(process_cpu_ns() - c0) / items;
}

//! Event record on an idle stream, then `reach(event)` until the stream is there. ns per op.
template <class P, class Reach>
double record_then(P& p, typename P::Stream& s, int ops, Reach&& reach) {
  p.sync(s);
  const auto t0 = now_ns();
  for (int i = 0; i < ops; ++i) reach(p.record(s));
  return static_cast<double>(now_ns() - t0) / ops;
}

//! Event record + poll on an idle stream: record, then poll query() until it reports complete.
//! ns per op.
template <class P>
double record_poll(P& p, typename P::Stream& s, int ops) {
  return record_then(p, s, ops, [&](const auto& e) {
    while (!p.query(e)) cpu_relax();
  });
}

//! Event record + host wait on an idle stream. ns per op.
template <class P>
double record_wait(P& p, typename P::Stream& s, int ops) {
  return record_then(p, s, ops, [&](const auto& e) { p.wait(e); });
}

//! How long the host sleeps after releasing the measured work, so that it does not compete
//! with the workers for the cores while the latency is being taken.
inline constexpr auto kHostStandOff = std::chrono::microseconds(200);

//! Cross-stream hand-off, once: A runs an item that holds until released, then records an
//! event; B waits on that event, then runs an item. Everything is queued before A's item is
//! released. Returns ns from the end of A's item to the start of B's next item.
template <class P>
double handoff_once(P& p, typename P::Stream& a, typename P::Stream& b) {
  std::atomic<bool> go{false};
  std::int64_t t_end = 0, t_start = 0;
  p.launch(a, [&] {
    while (!go.load(std::memory_order_acquire)) cpu_relax();
    t_end = now_ns();
  });
  auto e = p.record(a);
  p.wait_event(b, e);
  p.launch(b, [&] { t_start = now_ns(); });
  go.store(true, std::memory_order_release);
  std::this_thread::sleep_for(kHostStandOff);
  p.sync(b);
  p.sync(a);
  return static_cast<double>(t_start - t_end);
}

//! Completion callback, once: an item that holds until released, an event after it, a
//! callback on the event. Returns ns from the end of the item to the start of the callback.
template <class P>
double callback_once(P& p, typename P::Stream& s) {
  std::atomic<bool> go{false};
  std::int64_t t_end = 0;
  auto t_cb = std::make_shared<std::atomic<std::int64_t>>(0);
  auto done = std::make_shared<Flag>();
  p.launch(s, [&] {
    while (!go.load(std::memory_order_acquire)) cpu_relax();
    t_end = now_ns();
  });
  auto e = p.record(s);
  p.on_complete(e, [t_cb, done] {
    t_cb->store(now_ns(), std::memory_order_relaxed);
    done->set();
  });
  go.store(true, std::memory_order_release);
  std::this_thread::sleep_for(kHostStandOff);
  done->wait();
  p.sync(s);
  return static_cast<double>(t_cb->load(std::memory_order_relaxed) - t_end);
}

//! Median of `v` (copied). 0 for an empty vector.
inline double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

//! Overlap: two items of `iters` work on one stream (serially), then one on each of two
//! streams. Returns the speedup (serial time / two-stream time).
template <class P>
double overlap_speedup(P& p, std::int64_t iters) {
  auto s1 = p.make_stream();
  auto s2 = p.make_stream();
  auto t0 = now_ns();
  if constexpr (P::kInOrder) {
    p.launch(s1, [iters] { spin_work(iters); });
    p.launch(s1, [iters] { spin_work(iters); });
  } else {
    // No order on this peer: "one stream" is one task doing both.
    p.launch(s1, [iters] {
      spin_work(iters);
      spin_work(iters);
    });
  }
  p.sync(s1);
  const double serial = static_cast<double>(now_ns() - t0);
  t0 = now_ns();
  p.launch(s1, [iters] { spin_work(iters); });
  p.launch(s2, [iters] { spin_work(iters); });
  p.sync(s1);
  p.sync(s2);
  const double parallel = static_cast<double>(now_ns() - t0);
  return serial / parallel;
}

//! Runs `items` items of `iters` work each, round-robin over `streams`, then syncs them all.
//! Returns the wall time in ns.
template <class P>
double run_items(P& p, std::vector<typename P::Stream>& streams, int items, std::int64_t iters) {
  const auto n = streams.size();
  const auto t0 = now_ns();
  for (int i = 0; i < items; ++i) {
    p.launch(streams[static_cast<std::size_t>(i) % n], [iters] { spin_work(iters); });
  }
  for (auto& s : streams) p.sync(s);
  return static_cast<double>(now_ns() - t0);
}

//! The same items with no runtime at all: `threads` plain threads (made before the clock
//! starts) each run their share of `items` items of `iters` work back to back. Returns the wall
//! time in ns. This is the ideal the peers are measured against, taken in the same conditions
//! (on a shared machine, other processes slow it down exactly as they slow the peers).
inline double run_bare(int items, std::int64_t iters, int threads) {
  std::atomic<std::uint32_t> go{0};
  std::vector<std::thread> pool;
  pool.reserve(static_cast<std::size_t>(threads));
  for (int t = 0; t < threads; ++t) {
    const int share = items / threads + (t < items % threads ? 1 : 0);
    pool.emplace_back([&go, share, iters] {
      go.wait(0, std::memory_order_acquire);
      for (int i = 0; i < share; ++i) spin_work(iters);
    });
  }
  const auto t0 = now_ns();
  go.store(1, std::memory_order_release);
  go.notify_all();
  for (auto& t : pool) t.join();
  return static_cast<double>(now_ns() - t0);
}

//! Efficiency of running `items` items of `item_us` each on `streams.size()` streams: the ideal
//! time over the measured time. The ideal is measured in the same conditions: the same items on
//! plain threads, as many as the cores the peer could use (min(streams, cores) for in-order peers;
//! all cores for unordered ones such as task_group), once right before and once right after the
//! peer's run, and the two averaged. A single bare run before it made the figure swing far above
//! and below 100 % on a shared machine: other processes' load changes within milliseconds, and
//! the mean of the runs on both sides follows a drift through the peer's run. A figure can still
//! exceed 100 % there (a burst falls on a bare run; or the peer runs more threads than the bare
//! run, such as streamrt's host thread helping, and so gets a larger share of contended cores);
//! `streamrt bench` says so on the line.
template <class P>
double efficiency(P& p, std::vector<typename P::Stream>& streams, int items, double item_us,
                  const Calibration& cal) {
  const auto iters = cal.iters(item_us);
  const int usable = P::kInOrder ? static_cast<int>(streams.size()) : items;
  const int parallel = std::min<int>(usable, hardware_threads());
  const double before = run_bare(items, iters, parallel);
  const double measured = run_items(p, streams, items, iters);
  const double after = run_bare(items, iters, parallel);
  return 0.5 * (before + after) / measured;
}

//! Overlap with no runtime: two items of `iters` work on this thread one after the other, then
//! one on each of two new std::threads. Returns the speedup: what the machine allows right now.
inline double overlap_bare(std::int64_t iters) {
  auto t0 = now_ns();
  spin_work(iters);
  spin_work(iters);
  const double serial = static_cast<double>(now_ns() - t0);
  t0 = now_ns();
  std::thread a([iters] { spin_work(iters); });
  std::thread b([iters] { spin_work(iters); });
  a.join();
  b.join();
  return serial / static_cast<double>(now_ns() - t0);
}

//! Idle CPU use: waits `settle` seconds (start-up transients of the process, such as OpenBLAS
//! threads spinning after load, are not the peer's), makes `streams` streams, runs one empty item
//! on each and syncs, then sleeps for `seconds` with everything alive. Returns CPU milliseconds
//! used by the whole process per second of idling (getrusage), so run it where nothing else in
//! the process is busy. What the peer does right after work (spinning workers) is included.
template <class P>
double idle_cpu_ms_per_s(P& p, int streams, double seconds, double settle = 0.3) {
  std::this_thread::sleep_for(std::chrono::duration<double>(settle));
  std::vector<typename P::Stream> v;
  for (int i = 0; i < streams; ++i) v.push_back(p.make_stream());
  for (auto& s : v) p.launch(s, [] {});
  for (auto& s : v) p.sync(s);
  const auto c0 = process_cpu_ns();
  const auto t0 = now_ns();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  const auto c1 = process_cpu_ns();
  const auto t1 = now_ns();
  return static_cast<double>(c1 - c0) / 1e6 / (static_cast<double>(t1 - t0) / 1e9);
}

}  // namespace streamrt_bench
