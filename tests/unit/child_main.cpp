// A child process for the conformance tests that need a fresh process: behaviour at process exit,
// and the STREAMRT_NUM_THREADS environment variable. Prints what happened; the parent checks it.
#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "streamrt/streamrt.hpp"
#include "test_util.hpp"

namespace {

std::atomic<bool> g_exiting{false};

// A handle in static storage: destroyed during exit, after streamrt finished the pending work.
// Made by exit_pending() only: under a bad STREAMRT_NUM_THREADS making a stream throws, which a
// static initializer could not report.
std::optional<streamrt::Stream> g_static_stream;

void say(const char* line) {
  std::fputs(line, stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

// Blocks until exit has begun, so the work is certainly still pending when main returns.
bool wait_for_exit() {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!g_exiting.load()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

int exit_pending() {
  streamrt::Stream s;
  s.launch([] {
    if (!wait_for_exit()) return say("timed out waiting for exit");
    say("work-after-exit-began");
    streamrt::current_stream().launch([] {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      say("nested-work-done");
    });
  });
  s.record_event().on_complete([](std::exception_ptr) { say("callback-done"); });
  g_static_stream.emplace().launch([] {
    if (wait_for_exit()) say("static-stream-work-done");
  });
  // Registered after streamrt's own exit handler (set up by the first launch), so it runs first.
  std::atexit([] { g_exiting = true; });
  say("main-returned");
  return 0;
}

int num_threads() {
  const int n = streamrt::cpu::num_threads();
  std::printf("num_threads=%d\n", n);
  // Prove the workers exist: n items on n streams must all meet.
  streamrt_test::Rendezvous meet(n);
  std::atomic<int> met{0};
  std::vector<streamrt::Stream> streams(n);
  for (auto& s : streams) {
    s.set_host_run(false);  // the synchronizing host must not be one of the parties
    s.launch([&] {
      if (meet.arrive_and_wait()) met.fetch_add(1);
    });
  }
  for (auto& s : streams) s.synchronize();
  std::printf("met=%d\n", met.load());
  return 0;
}

int launch_work() {
  streamrt::Stream s;
  s.launch([] {});
  s.synchronize();
  say("launched");
  return 0;
}

// Host-run items as set by STREAMRT_HOST_RUN: the one worker is held, so an item runs on this
// (synchronizing) thread only if host-run is on; otherwise the worker is freed after 2 s.
int host_run() {
  streamrt::cpu::set_num_threads(1);
  streamrt::Stream holder;
  streamrt::Stream s;
  streamrt_test::Gate hold, done;
  streamrt_test::occupy_worker(holder, hold);
  std::thread watchdog([&] {
    if (!done.wait(std::chrono::seconds(2))) hold.open();
  });
  const auto me = std::this_thread::get_id();
  bool on_host = false;
  s.launch([&] { on_host = std::this_thread::get_id() == me; });
  s.synchronize();
  done.open();
  hold.open();
  watchdog.join();
  holder.synchronize();
  std::printf("host_run=%d ran_on_host=%d\n", s.host_run() ? 1 : 0, on_host ? 1 : 0);
  return 0;
}

// The worker poll as set by STREAMRT_WORKER_SPIN_US, then launch_work().
int worker_spin() {
  std::printf("worker_spin=%lld\n", static_cast<long long>(streamrt::cpu::worker_spin().count()));
  return launch_work();
}

// The worker policy as set by STREAMRT_WORKER_BATCH, and the one an item runs under.
int worker_batch() {
  const bool batch = streamrt::cpu::worker_batch();
  streamrt::Stream s;
  s.set_host_run(false);  // the item runs on a worker
  int policy = -1;
  s.launch([&] { policy = sched_getscheduler(0); });
  s.synchronize();
  std::printf("worker_batch=%d item_policy=%s\n", batch ? 1 : 0,
              policy == SCHED_BATCH   ? "batch"
              : policy == SCHED_OTHER ? "other"
                                      : "unknown");
  return 0;
}

// Whether launch-blocking mode is on, and whether a failing launch raised at the launch.
int launch_blocking() {
  const bool on = streamrt::cpu::launch_blocking();
  streamrt::Stream s;
  bool at_launch = false;
  try {
    s.launch("failing", [] { throw streamrt::Error("boom"); });
  } catch (const streamrt::Error&) {
    at_launch = true;
  }
  if (!at_launch) {
    try {
      s.synchronize();
    } catch (const streamrt::Error&) {
      // Raised later, as launches do by default.
    }
  }
  std::printf("launch_blocking=%d raised_at_launch=%d\n", on ? 1 : 0, at_launch ? 1 : 0);
  return 0;
}

// The exit code of `mode`; 2 for a mode there is not.
int run(const std::string& mode, const char* self) {
  if (mode == "exit-pending") return exit_pending();
  if (mode == "num-threads") return num_threads();
  if (mode == "launch") return launch_work();
  if (mode == "host-run") return host_run();
  if (mode == "worker-spin") return worker_spin();
  if (mode == "worker-batch") return worker_batch();
  if (mode == "launch-blocking") return launch_blocking();
  std::fprintf(stderr,
               "usage: %s exit-pending|num-threads|launch|host-run|worker-spin|worker-batch|"
               "launch-blocking\n",
               self);
  return 2;
}

}  // namespace

// An Error (such as a bad environment variable's) is printed as "error: <what>", exit code 3.
int main(int argc, char** argv) {
  try {
    return run(argc > 1 ? argv[1] : "", argv[0]);
  } catch (const streamrt::Error& e) {
    std::printf("error: %s\n", e.what());
    return 3;
  }
}
