// fork() in a process with live workers. The child gets a fresh pool and can use
// streamrt; work the parent had queued or running runs in the parent only, and in the child its
// events complete with Cancelled. Its own executable: forking is process-wide.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "streamrt/streamrt.hpp"
#include "test_util.hpp"

namespace {

using streamrt_test::Blocker;
using streamrt_test::kTimeout;
using streamrt_test::Rendezvous;
using streamrt_test::ThreadCount;
using namespace std::chrono_literals;

// The sanitizers of GCC 12 (and of clang 14) do not lock their allocators across fork(): a child
// deadlocks in malloc (already in streamrt's fork handler) if any thread of the parent was
// allocating at that instant, and idle workers of a live pool may be. Seen here under ASan (every
// few runs) and under TSan (once in a full `make test`; the orphaned child then held ctest's pipe
// open until its time-out). LLVM added that locking to TSan only in 2024 (llvm-project PR 96600),
// and TSan also cannot follow threads created in such a child ("dup thread with used id"). So
// these tests skip themselves under both sanitizers; they run, all of them, in the normal build
// and under the schedule fuzzer (random picks and serial).
constexpr bool kSanitizer = std::string_view(STREAMRT_TEST_SANITIZER) == "thread" ||
                            std::string_view(STREAMRT_TEST_SANITIZER) == "address";

class Fork : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    if (kSanitizer) {
      GTEST_SKIP() << "ASan and TSan (GCC 12, clang 14) can hang in malloc in the child of a "
                      "multi-threaded fork";
    }
    threads_.emplace(GetParam());
  }
  void TearDown() override { threads_.reset(); }

 private:
  std::optional<ThreadCount> threads_;
};

// Runs `body` in a forked child; returns its exit status, or -1 if it crashed or had to be killed
// after `timeout` (a hang). The child leaves with std::exit, so exit handlers run there too.
int in_child(const std::function<int()>& body, std::chrono::seconds timeout = 60s) {
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) return -2;
  if (pid == 0) {
    int code = 100;
    try {
      code = body();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child: exception: %s\n", e.what());
      code = 101;
    } catch (...) {
      code = 102;
    }
    std::exit(code);
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  for (;;) {
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      std::fprintf(stderr, "child %d hung: killed\n", static_cast<int>(pid));
      return -1;
    }
    std::this_thread::sleep_for(2ms);
  }
  if (!WIFEXITED(status)) {
    std::fprintf(stderr, "child died: status %d\n", status);
    return -1;
  }
  return WEXITSTATUS(status);
}

TEST_P(Fork, ChildGetsAFreshPoolAndTheParentsPendingWorkRunsOnlyInTheParent) {
  streamrt::Stream a, idle;
  idle.launch([] {});
  idle.synchronize();  // workers now parked
  Blocker hold;
  hold.launch_on(a);
  std::atomic<int> counter{0};
  for (int i = 0; i < 100; ++i) a.launch([&] { counter.fetch_add(1); });
  streamrt::Event pending_event = a.record_event();
  ASSERT_TRUE(hold.started.wait());
  // A host thread parked on the event at the moment of the fork.
  std::atomic<bool> waiter_ok{false};
  std::thread waiter([&] { waiter_ok = pending_event.wait_for(kTimeout); });

  const int code = in_child([&] {
    int bad = 0;
    // The parent's pending work does not run here: its event is complete, Cancelled.
    try {
      pending_event.wait_for(10s);
      bad |= 1;
    } catch (const streamrt::Cancelled&) {
    }
    if (pending_event.state() != streamrt::EventState::Cancelled) bad |= 2;
    // a is idle and usable; its synchronize does not throw for the parent's work.
    a.synchronize();
    if (counter.load() != 0) bad |= 4;
    if (a.pending() != 0) bad |= 8;
    std::atomic<int> ran{0};
    a.launch([&] { ran.fetch_add(1); });
    streamrt::Event e = a.record_event();
    e.synchronize();
    if (ran.load() != 1) bad |= 16;
    // Real concurrency in the child (when more than one worker): two streams meet.
    const char* schedule = std::getenv("STREAMRT_SCHEDULE");
    const bool serial = schedule != nullptr && std::string_view(schedule) == "serial";
    if (streamrt::cpu::num_threads() >= 2 && !serial) {
      Rendezvous meet(2);
      std::atomic<int> met{0};
      streamrt::Stream x, y;
      x.launch([&] { met += meet.arrive_and_wait(20s) ? 1 : 0; });
      y.launch([&] { met += meet.arrive_and_wait(20s) ? 1 : 0; });
      x.synchronize();
      y.synchronize();
      if (met.load() != 2) bad |= 32;
    }
    // Cross-stream waits and failures work as usual.
    streamrt::Stream p, q;
    p.launch([] { throw 7; });
    q.wait_event(p.record_event());
    q.launch([&] { ran.fetch_add(100); });
    try {
      q.synchronize();
      bad |= 64;
    } catch (int v) {
      if (v != 7) bad |= 64;
    }
    try {
      p.synchronize();
      bad |= 128;
    } catch (int) {
    }
    if (ran.load() != 1) bad |= 64;
    return bad;
  });
  EXPECT_EQ(code, 0) << "child check bits failed (see the lambda)";

  // The parent is unaffected: its work runs exactly once, here.
  hold.release.open();
  waiter.join();
  EXPECT_TRUE(waiter_ok.load());
  EXPECT_NO_THROW(pending_event.synchronize());
  EXPECT_EQ(counter.load(), 100);
  a.synchronize();
}

TEST_P(Fork, ChildExitsWithPendingWorkAfterFinishingIt) {
  streamrt::Stream warm;
  warm.launch([] {});
  warm.synchronize();
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const int code = in_child([&] {
    close(fds[0]);
    streamrt::Stream s;
    s.launch([] { std::this_thread::sleep_for(20ms); });
    for (int i = 0; i < 1000; ++i) {
      s.launch([fd = fds[1], i] {
        if (i == 999) {
          const char msg[] = "all-1000-ran\n";
          if (write(fd, msg, sizeof msg - 1) < 0) std::abort();
        }
      });
    }
    return 0;  // std::exit with the items still queued
  });
  close(fds[1]);
  std::string got;
  char buf[256];
  for (;;) {
    pollfd p{fds[0], POLLIN, 0};
    if (poll(&p, 1, 10000) <= 0) break;
    const ssize_t n = read(fds[0], buf, sizeof buf);
    if (n <= 0) break;
    got.append(buf, static_cast<std::size_t>(n));
  }
  close(fds[0]);
  EXPECT_EQ(code, 0);
  EXPECT_EQ(got, "all-1000-ran\n");
}

TEST_P(Fork, RepeatedForksWhileOtherThreadsUseTheRuntime) {
  // Other threads launch, record, wait, cancel and synchronize while this one forks: the child
  // must never inherit a lock held mid-operation (it would hang) or a half-updated queue.
  std::vector<streamrt::Stream> streams(4);
  std::atomic<bool> stop{false};
  std::atomic<long> ops{0};
  std::vector<std::thread> hammers;
  for (int t = 0; t < 3; ++t) {
    hammers.emplace_back([&, t] {
      unsigned x = 12345u + static_cast<unsigned>(t);
      while (!stop.load()) {
        x = x * 1103515245u + 12345u;
        auto& s = streams[(x >> 8) % streams.size()];
        auto& other = streams[(x >> 12) % streams.size()];
        s.launch([] {});
        if ((x >> 16) % 4 == 0) s.wait_event(other.record_event());
        if ((x >> 16) % 16 == 1) s.cancel();
        if ((x >> 16) % 32 == 2) {
          try {
            s.synchronize();
          } catch (const streamrt::Cancelled&) {
            // s waited on an event whose work another thread cancelled: inherited, as designed.
          }
        }
        ops.fetch_add(1);
      }
    });
  }
  constexpr int kForks = 20;
  int failures = 0;
  for (int i = 0; i < kForks; ++i) {
    std::this_thread::sleep_for(2ms);
    const int code = in_child(
        [&] {
          for (auto& s : streams) {
            try {
              s.synchronize();
            } catch (const streamrt::Cancelled&) {
            }
          }
          streamrt::Stream fresh;
          std::atomic<int> ran{0};
          for (int k = 0; k < 100; ++k) fresh.launch([&] { ran.fetch_add(1); });
          streams[0].launch([&] { ran.fetch_add(1); });
          fresh.synchronize();
          streams[0].synchronize();
          return ran.load() == 101 ? 0 : 1;
        },
        30s);
    if (code != 0) ++failures;
  }
  stop = true;
  for (auto& t : hammers) t.join();
  for (auto& s : streams) {
    try {
      s.synchronize();
    } catch (const streamrt::Cancelled&) {
    }
  }
  EXPECT_EQ(failures, 0);
  EXPECT_GT(ops.load(), 0);
}

// A partition made before the fork works in the child: its workers are started again there (as
// many as it reserves: its items meet), its streams run their work on them, not on the host.
TEST_P(Fork, APartitionMadeBeforeTheForkWorksInTheChild) {
  if (GetParam() < 2) GTEST_SKIP() << "one worker in all cannot host a partition";
  const int k = GetParam() / 2;
  streamrt::cpu::Partition part(k);
  streamrt::Stream before = part.new_stream();
  before.set_host_run(false);
  before.launch([] {});
  before.synchronize();  // the partition's workers now parked
  const int code = in_child([&] {
    int bad = 0;
    const pid_t host = gettid();
    std::atomic<int> on_host{0}, ran{0};
    Rendezvous meet(k);
    std::vector<streamrt::Stream> streams{before};
    for (int i = 1; i < k; ++i) streams.push_back(part.new_stream());
    for (auto& s : streams) {
      s.set_host_run(false);
      s.launch([&] {
        if (gettid() == host) on_host.fetch_add(1);
        if (meet.arrive_and_wait()) ran.fetch_add(1);
      });
    }
    for (auto& s : streams) s.synchronize();
    if (ran.load() != k) bad |= 1;
    if (on_host.load() != 0) bad |= 2;
    if (part.num_workers() != k) bad |= 4;
    return bad;
  });
  EXPECT_EQ(code, 0);
}

INSTANTIATE_TEST_SUITE_P(Workers, Fork, ::testing::Values(1, 2, 4));

}  // namespace
