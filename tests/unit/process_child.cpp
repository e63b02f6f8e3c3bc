// Helper process for the tests that need a fresh process: process exit with pending
// work, STREAMRT_SCHEDULE handling, and memory per queued item. Usage: process_child MODE [N].
// Prints results on stdout; the exit status says whether the mode's own checks passed.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "streamrt/streamrt.hpp"

namespace {

using namespace std::chrono_literals;

// write(2) straight to the fd: works at any point of process exit, unbuffered.
void say(const std::string& text) {
  const char* p = text.data();
  std::size_t left = text.size();
  while (left > 0) {
    const ssize_t n = ::write(1, p, left);
    if (n <= 0) return;
    p += n;
    left -= static_cast<std::size_t>(n);
  }
}

long resident_bytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return -1;
  long size = 0, resident = 0;
  const int got = std::fscanf(f, "%ld %ld", &size, &resident);
  std::fclose(f);
  return got == 2 ? resident * sysconf(_SC_PAGESIZE) : -1;
}

// Returns from main with work still queued on several streams (one of them failing, one
// launching more work while the process exits). The exit handler must run all of it.
int exit_pending(int n) {
  constexpr int kStreams = 3;
  static std::vector<int> seen[kStreams];  // static: outlives main's locals, used during exit
  for (int k = 0; k < kStreams; ++k) seen[k].reserve(static_cast<std::size_t>(n));
  std::vector<streamrt::Stream> streams(kStreams);
  streamrt::Stream late;
  for (int k = 0; k < kStreams; ++k) {
    // Slow start, so that main returns long before the streams are done.
    streams[k].launch([] { std::this_thread::sleep_for(50ms); });
    for (int i = 0; i < n; ++i) streams[k].launch([k, i] { seen[k].push_back(i); });
    streams[k].launch([k, n] {
      bool ordered = static_cast<int>(seen[k].size()) == n;
      for (int i = 0; ordered && i < n; ++i) ordered = seen[k][static_cast<std::size_t>(i)] == i;
      say("stream " + std::to_string(k) + ": " + std::to_string(seen[k].size()) + " items" +
          (ordered ? " in order\n" : " OUT OF ORDER\n"));
    });
  }
  // Work launched by work during exit runs too.
  streams[0].launch([late]() mutable { late.launch([] { say("late work ran\n"); }); });
  // A failure nobody observes: reported on stderr when its stream goes, even at exit.
  streams[1].launch([] { throw std::runtime_error("exit-unobserved-failure"); });
  say("main returns\n");
  return 0;
}

// Any configuration error must come out as a streamrt::Error at the first use.
int schedule_check() {
  try {
    streamrt::Stream s;
    std::atomic<int> ran{0};
    for (int i = 0; i < 100; ++i) s.launch([&] { ran.fetch_add(1); });
    s.synchronize();
    say("ok " + std::to_string(ran.load()) + "\n");
    return ran.load() == 100 ? 0 : 1;
  } catch (const streamrt::Error& e) {
    say(std::string("error: ") + e.what() + "\n");
    return 3;
  }
}

// A bad setting is an Error before anything can be queued: even the default stream, which exists
// from the start, is refused instead of taking work that no worker would run.
int default_stream_check() {
  try {
    streamrt::Stream s = streamrt::default_stream();
    say("got the default stream\n");
    s.launch([] {});
    s.synchronize();
    say("ok\n");
    return 0;
  } catch (const streamrt::Error& e) {
    say(std::string("error: ") + e.what() + "\n");
    return 3;
  }
}

// Holds `s` (and one worker) with an item that spins until `release` is set; returns once that
// item has started.
void hold_until(const std::atomic<bool>& release, streamrt::Stream& s) {
  std::atomic<bool> started{false};
  s.launch([&] {
    started = true;
    while (!release.load()) std::this_thread::sleep_for(1ms);
  });
  while (!started.load()) std::this_thread::sleep_for(1ms);
}

// With one worker busy behind a gate, one item on each of 8 streams becomes ready; prints the order
// in which the worker then ran them.
int schedule_order() {
  streamrt::cpu::set_num_threads(1);
  constexpr int kStreams = 8;
  std::vector<streamrt::Stream> streams(kStreams);
  streamrt::Stream gate_stream;
  std::atomic<bool> release{false};
  hold_until(release, gate_stream);
  std::mutex m;
  std::vector<int> order;
  for (int k = 0; k < kStreams; ++k) {
    streams[k].launch([&, k] {
      std::lock_guard lock(m);
      order.push_back(k);
    });
  }
  release = true;
  streamrt::synchronize();
  std::string line = "order:";
  // Appended piece by piece: `" " + std::string` trips g++ 12's -Wrestrict false positive at -O3
  // (GCC bug 105329), an error under STREAMRT_WERROR.
  for (int k : order) {
    line += ' ';
    line += std::to_string(k);
  }
  say(line + "\n");
  return static_cast<int>(order.size()) == kStreams ? 0 : 1;
}

// Largest number of items running at once over 4 streams with 4 workers requested.
int max_concurrency() {
  streamrt::cpu::set_num_threads(4);
  std::atomic<int> active{0}, peak{0};
  std::vector<streamrt::Stream> streams(4);
  for (auto& s : streams) {
    for (int i = 0; i < 10; ++i) {
      s.launch([&] {
        const int now = active.fetch_add(1) + 1;
        int p = peak.load();
        while (now > p && !peak.compare_exchange_weak(p, now)) {
        }
        std::this_thread::sleep_for(2ms);
        active.fetch_sub(1);
      });
    }
  }
  streamrt::synchronize();
  say("peak: " + std::to_string(peak.load()) +
      " num_threads: " + std::to_string(streamrt::cpu::num_threads()) + "\n");
  return 0;
}

// RSS growth per queued item: a stream is held by a gate while n small items queue behind it.
int queue_memory(int n) {
  streamrt::Stream s;
  std::atomic<bool> release{false};
  hold_until(release, s);
  long counter = 0;
  const long before = resident_bytes();
  for (int i = 0; i < n; ++i) s.launch([&counter] { ++counter; });
  const long after = resident_bytes();
  const double per_item = static_cast<double>(after - before) / n;
  release = true;
  s.synchronize();
  const long released = resident_bytes();
  char line[160];
  std::snprintf(line, sizeof line,
                "items: %d ran: %ld bytes_per_item: %.1f rss_after_run_mb: %.1f\n", n, counter,
                per_item, static_cast<double>(released) / (1 << 20));
  say(line);
  return counter == n ? 0 : 1;
}

// Address space for about `threads` more thread stacks (8 MiB each), no more: the OS then refuses
// the next thread (pthread_create fails with EAGAIN). The soft limit only: restore_address_space()
// lifts it again (OpenBLAS's threads spin at exit while their allocations fail).
rlimit g_saved_limit{};
void limit_address_space(int threads) {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  long size = 0;
  if (f == nullptr || std::fscanf(f, "%ld", &size) != 1) std::abort();
  std::fclose(f);
  const auto room = static_cast<rlim_t>(size * sysconf(_SC_PAGESIZE)) +
                    static_cast<rlim_t>(threads) * (rlim_t{8} << 20) + (rlim_t{16} << 20);
  if (getrlimit(RLIMIT_AS, &g_saved_limit) != 0) std::abort();
  rlimit r{room, g_saved_limit.rlim_max};
  if (setrlimit(RLIMIT_AS, &r) != 0) std::abort();
}
void restore_address_space() {
  if (setrlimit(RLIMIT_AS, &g_saved_limit) != 0) std::abort();
}

// Runs `fn`; "error: <what>" and true when it threw streamrt::ResourceUnavailable (the OS said
// no, which callers tell apart from a bad argument); another exception ends the child.
template <class F>
bool refused(F&& fn) {
  try {
    fn();
  } catch (const streamrt::ResourceUnavailable& e) {
    say(std::string("error: ") + e.what() + "\n");
    return true;
  }
  return false;
}

// More workers than the OS will start, asked for before the pool exists (the first launch starts
// it) and after: each is a ResourceUnavailable, nothing runs short, and the runtime keeps working.
int refused_threads() {
  const int before = streamrt::cpu::num_threads();
  limit_address_space(4);
  streamrt::Stream s;
  std::atomic<int> ran{0};
  streamrt::cpu::set_num_threads(256);  // recorded: the pool starts on the first launch
  const bool first = refused([&] { s.launch([&] { ran.fetch_add(1); }); });
  streamrt::cpu::set_num_threads(2);
  s.launch([&] { ran.fetch_add(1); });
  s.synchronize();
  const bool second = refused([] { streamrt::cpu::set_num_threads(256); });
  const bool kept = streamrt::cpu::num_threads() == 2;
  s.launch([&] { ran.fetch_add(1); });
  s.synchronize();
  restore_address_space();
  say("first " + std::to_string(first) + " second " + std::to_string(second) + " kept " +
      std::to_string(kept) + " ran " + std::to_string(ran.load()) + " before " +
      std::to_string(before) + "\n");
  return first && second && kept && ran.load() == 2 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: %s exit-pending|schedule|default-stream|schedule-order|max-concurrency|"
                 "queue-memory|refused-threads [N]\n",
                 argv[0]);
    return 2;
  }
  const std::string mode = argv[1];
  const int n = argc > 2 ? std::atoi(argv[2]) : 1000;
  if (mode == "exit-pending") return exit_pending(n);
  if (mode == "schedule") return schedule_check();
  if (mode == "default-stream") return default_stream_check();
  if (mode == "schedule-order") return schedule_order();
  if (mode == "max-concurrency") return max_concurrency();
  if (mode == "queue-memory") return queue_memory(n);
  if (mode == "refused-threads") return refused_threads();
  std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
  return 2;
}
