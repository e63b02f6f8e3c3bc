// Launch-to-completion latency of short items on one stream, in three cases measured in the same
// run: (a) an idle machine, the stream in the shared pool; (b) other streams saturating every
// worker with bulk work, the stream in the shared pool; (c) the same bulk load, the stream in a
// one-worker cpu::Partition. Prints p50 and p99 of each and the ratios p99(b)/p99(a) and
// p99(c)/p99(a). Usage: streamrt_partition_latency [items per case] [item us] [bulk item us];
// figures go to docs/performance.md (bench/figures.sh).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <vector>

#include "streamrt/streamrt.hpp"

namespace {

using Clock = std::chrono::steady_clock;

void busy(std::chrono::microseconds d) {
  const auto until = Clock::now() + d;
  while (Clock::now() < until) {
  }
}

struct Percentiles {
  double p50 = 0;
  double p99 = 0;
};

// Launches `items` items of `item` busy time on `s`, one at a time, each timed from just before
// its launch to the end of its work; the host waits without running the item (host-run off).
// `sleeping_host`: the host waits on a blocking event, which sleeps at once instead of polling
// first, so that on a machine with few cores the measuring thread does not take a core from the
// worker it measures while the item runs.
Percentiles measure(streamrt::Stream s, int items, std::chrono::microseconds item,
                    bool sleeping_host) {
  s.set_host_run(false);
  std::vector<double> us;
  us.reserve(static_cast<std::size_t>(items));
  Clock::time_point end;
  streamrt::Event done(streamrt::EventOptions{false, true});
  for (int i = 0; i < items; ++i) {
    const auto start = Clock::now();
    s.launch([&end, item] {
      busy(item);
      end = Clock::now();
    });
    if (sleeping_host) {
      s.record_event(done);
      done.synchronize();  // makes `end` visible here
    } else {
      s.synchronize();  // the same
    }
    us.push_back(std::chrono::duration<double, std::micro>(end - start).count());
  }
  std::sort(us.begin(), us.end());
  const auto at = [&](double q) { return us[static_cast<std::size_t>(q * (us.size() - 1))]; };
  return {at(0.50), at(0.99)};
}

// Streams that keep every worker they can get busy: each item relaunches itself on its stream
// until stop().
class Bulk {
 public:
  Bulk(int streams, std::chrono::microseconds item) : item_(item) {
    for (int i = 0; i < streams; ++i) streams_.emplace_back();
    for (auto& s : streams_) {
      for (int k = 0; k < 2; ++k) feed(s);
    }
  }
  // Stops the load; returns the time spent in bulk items over the elapsed time: how many workers
  // it kept busy on average (wall time: an item the OS preempted counts whole).
  double stop() {
    running_->store(false);
    for (auto& s : streams_) s.synchronize();
    const double elapsed = std::chrono::duration<double>(Clock::now() - start_).count();
    return static_cast<double>(done_->load()) * 1e-9 / elapsed;
  }

 private:
  void feed(streamrt::Stream s) {
    s.launch([this, s, running = running_, done = done_]() mutable {
      const auto start = Clock::now();
      busy(item_);
      done->fetch_add(
          std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count());
      if (running->load()) feed(s);
    });
  }
  std::chrono::microseconds item_;
  std::shared_ptr<std::atomic<bool>> running_ = std::make_shared<std::atomic<bool>>(true);
  std::shared_ptr<std::atomic<long>> done_ = std::make_shared<std::atomic<long>>(0);  // ns
  Clock::time_point start_ = Clock::now();
  std::vector<streamrt::Stream> streams_;
};

void print(const char* name, const Percentiles& p) {
  std::printf("%-40s p50 %9.1f us   p99 %9.1f us\n", name, p.p50, p.p99);
}

// The three cases (a), (b), (c), printed with the ratios of their p99s.
void run_cases(int items, std::chrono::microseconds item, std::chrono::microseconds bulk_item,
               int workers, bool sleeping_host) {
  const Percentiles idle = measure(streamrt::Stream(), items, item, sleeping_host);
  print("(a) idle, shared pool", idle);
  Percentiles shared, reserved;
  double busy_shared = 0, busy_reserved = 0;
  {
    Bulk bulk(2 * workers, bulk_item);
    shared = measure(streamrt::Stream(), items, item, sleeping_host);
    busy_shared = bulk.stop();
  }
  print("(b) bulk load, shared pool", shared);
  {
    streamrt::cpu::Partition part(1);
    Bulk bulk(2 * workers, bulk_item);
    reserved = measure(part.new_stream(), items, item, sleeping_host);
    busy_reserved = bulk.stop();
  }
  print("(c) bulk load, 1-worker partition", reserved);
  std::printf("bulk work kept %.2f workers busy on average in (b), %.2f in (c)\n", busy_shared,
              busy_reserved);
  std::printf("p99(b)/p99(a) = %.2f   p99(c)/p99(a) = %.2f\n", shared.p99 / idle.p99,
              reserved.p99 / idle.p99);
}

}  // namespace

int main(int argc, char** argv) {
  const int items = argc > 1 ? std::atoi(argv[1]) : 20000;
  const auto item = std::chrono::microseconds(argc > 2 ? std::atoi(argv[2]) : 10);
  const auto bulk_item = std::chrono::microseconds(argc > 3 ? std::atoi(argv[3]) : 1000);
  const int workers = streamrt::cpu::num_threads();
  if (items < 1 || workers < 2) {
    std::fprintf(stderr, "needs at least one item and two workers (STREAMRT_NUM_THREADS)\n");
    return 2;
  }
  std::printf(
      "launch-to-completion latency: %d items of %lld us per case, %d workers, bulk items "
      "of %lld us on %d streams\n",
      items, static_cast<long long>(item.count()), workers,
      static_cast<long long>(bulk_item.count()), 2 * workers);
  for (const bool sleeping_host : {false, true}) {
    std::printf("the host waits %s\n", sleeping_host ? "on a blocking event (sleeps at once)"
                                                     : "with Stream::synchronize (polls first)");
    run_cases(items, item, bulk_item, workers, sleeping_host);
  }
  return 0;
}
