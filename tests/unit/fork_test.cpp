// fork() in a process with live workers. fork() first waits (bounded by the fork time-out) for the
// work queued on every stream, so the child sees its results; the child gets a fresh pool and can
// use streamrt; work still queued or running at the fork (past the time-out, with the time-out 0,
// from stream work) runs in the parent only, and in the child its events complete with Cancelled
// saying why. Its own executable: forking is process-wide.
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
    saved_fork_timeout_ = streamrt::cpu::fork_timeout();
  }
  void TearDown() override {
    streamrt::cpu::set_fork_timeout(saved_fork_timeout_);
    threads_.reset();
  }

 private:
  std::optional<ThreadCount> threads_;
  std::chrono::nanoseconds saved_fork_timeout_{};
};

// The text of the Cancelled a wait on `e` raises, or "" when it raises none or another error.
std::string cancelled_text(const streamrt::Event& e) {
  try {
    e.synchronize();
  } catch (const streamrt::Cancelled& c) {
    return c.what();
  } catch (...) {
  }
  return "";
}

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
  // No wait before the fork: the work held below is still pending in the child.
  streamrt::cpu::set_fork_timeout(0s);
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
    // The parent's pending work does not run here: its event is complete, Cancelled, saying why.
    try {
      pending_event.wait_for(10s);
      bad |= 1;
    } catch (const streamrt::Cancelled& e) {
      if (std::string_view(e.what()).find("time-out being 0") == std::string_view::npos) bad |= 1;
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

// What a DataLoader does with a dataset made on a stream: fork() while the work that writes it is
// still queued. fork() waits for it, so the child reads its results; it ran once, in the parent.
// A failure among the work waited for is not lost: the parent's synchronize still raises it, and
// the child's wait raises that failure, not Cancelled.
TEST_P(Fork, ForkWaitsForQueuedWorkAndTheChildReadsItsResults) {
  streamrt::cpu::set_fork_timeout(600s);  // generous: only a broken wait comes near it
  streamrt::Stream a, f;
  std::atomic<int> runs{0};
  std::vector<int> data(1000, 0);
  // Still queued at the fork unless fork() waits: the first item takes a while.
  a.launch([] { std::this_thread::sleep_for(200ms); });
  for (int i = 0; i < 100; ++i) {
    a.launch([&, i] {
      runs.fetch_add(1);
      for (int k = i; k < 1000; k += 100) data[static_cast<std::size_t>(k)] = k + 1;
    });
  }
  const streamrt::Event written = a.record_event();
  f.launch([] { std::this_thread::sleep_for(200ms); });
  f.launch([] { throw 7; });
  const streamrt::Event failed = f.record_event();
  const int code = in_child([&] {
    int bad = 0;
    if (!cancelled_text(written).empty()) bad |= 1;
    if (!written.query()) bad |= 2;
    for (int k = 0; k < 1000; ++k) {
      if (data[static_cast<std::size_t>(k)] != k + 1) bad |= 4;
    }
    if (runs.load() != 100) bad |= 8;
    try {
      failed.synchronize();
      bad |= 16;
    } catch (int v) {
      if (v != 7) bad |= 16;
    } catch (...) {
      bad |= 16;  // Cancelled: the failing item had not run yet
    }
    return bad;
  });
  EXPECT_EQ(code, 0) << "child check bits failed (see the lambda)";
  // In the parent: each item ran exactly once, and the failure is still reported there.
  a.synchronize();
  EXPECT_EQ(runs.load(), 100);
  EXPECT_THROW(f.synchronize(), int);
}

// Work queued at the fork that allocates tensors: the CPU backend's prepare handler, which waits
// for it, runs before the caching allocator's takes the allocator's lock for the fork, so the work
// finishes and the child reads what it did. The library registers the allocator's handlers first
// for that (prepare handlers run in reverse order); the other order would hold that lock while
// waiting for work that needs it, and fork() would go ahead only after its time-out, with the work
// cancelled in the child.
TEST_P(Fork, ForkWaitsForQueuedWorkThatAllocatesTensors) {
  streamrt::cpu::set_fork_timeout(20s);  // only the wrong order of the handlers waits that long
  constexpr int kTensors = 200;
  streamrt::Stream a;
  std::atomic<int> made{0};
  a.launch([] { std::this_thread::sleep_for(100ms); });  // the next item is queued at the fork
  a.launch([&] {
    for (int i = 0; i < kTensors; ++i) {
      const streamrt::Tensor t = streamrt::empty({1000 + i});
      if (t.defined()) made.fetch_add(1);
    }
  });
  const streamrt::Event done = a.record_event();
  const auto start = std::chrono::steady_clock::now();
  const int code = in_child([&] {
    int bad = 0;
    if (!cancelled_text(done).empty()) bad |= 1;
    if (made.load() != kTensors) bad |= 2;
    return bad;
  });
  EXPECT_EQ(code, 0) << "child check bits failed (see the lambda)";
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s) << "fork() waited for its time-out";
  a.synchronize();
}

// A stream blocked on a user event nobody completes before the fork: fork() gives up after its
// time-out instead of waiting for ever, and the child's wait on that work raises Cancelled naming
// the time-out. Runs in a child of its own, which is killed if it hangs (the failure without the
// bound: the forking thread would wait for the user event it completes only afterwards).
TEST_P(Fork, ForkGivesUpOnWorkThatCannotFinishAfterItsTimeOut) {
  const int code = in_child(
      [] {
        streamrt::cpu::set_fork_timeout(300ms);
        streamrt::UserEvent go;
        streamrt::Stream s;
        s.wait_event(go.event());
        std::atomic<int> ran{0};
        s.launch([&] { ran.fetch_add(1); });
        const streamrt::Event after = s.record_event();
        const int grandchild = in_child([&] {
          const std::string text = cancelled_text(after);
          const bool named = text.find("fork()'s time-out of 0.3 s") != std::string::npos &&
                             text.find("STREAMRT_FORK_TIMEOUT") != std::string::npos;
          return named && ran.load() == 0 ? 0 : 1;
        });
        go.complete();
        s.synchronize();
        return grandchild == 0 && ran.load() == 1 ? 0 : 1;
      },
      120s);
  EXPECT_EQ(code, 0);
}

// fork() called from stream work does not wait: the forking worker is running the very work it
// would wait for (its own item, and the item queued behind it). In a child of its own with a long
// time-out, so that a fork that waited hangs it.
TEST_P(Fork, ForkFromStreamWorkDoesNotWait) {
  const int code = in_child(
      [] {
        streamrt::cpu::set_fork_timeout(3600s);
        streamrt::Stream a;
        std::atomic<int> forked{-1}, after{0};
        a.launch([&] {
          const pid_t pid = fork();
          if (pid == 0) _exit(0);  // POSIX allows only async-signal-safe calls here
          int status = 0;
          forked.store(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
                               WEXITSTATUS(status) == 0
                           ? 1
                           : 0);
        });
        a.launch([&] { after.fetch_add(1); });
        a.synchronize();
        return forked.load() == 1 && after.load() == 1 ? 0 : 1;
      },
      120s);
  EXPECT_EQ(code, 0);
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

// The wait before a fork covers partition streams too (they run on the partition's own workers),
// and work on one stream that waits for another's event: the child reads the results of both.
TEST_P(Fork, ForkWaitsForPartitionStreamsAndCrossStreamWaits) {
  if (GetParam() < 2) GTEST_SKIP() << "one worker in all cannot host a partition";
  streamrt::cpu::set_fork_timeout(600s);  // generous: only a broken wait comes near it
  streamrt::cpu::Partition part(1);
  streamrt::Stream p = part.new_stream();
  streamrt::Stream q;
  std::atomic<int> first{0}, second{0};
  p.launch([] { std::this_thread::sleep_for(200ms); });  // still queued at the fork unless waited
  p.launch([&] { first.store(1); });
  q.wait_event(p.record_event());
  q.launch([&] { second.store(first.load() + 1); });
  const int code = in_child([&] { return first.load() == 1 && second.load() == 2 ? 0 : 1; });
  EXPECT_EQ(code, 0);
  q.synchronize();
  EXPECT_EQ(second.load(), 2);
}

INSTANTIATE_TEST_SUITE_P(Workers, Fork, ::testing::Values(1, 2, 4));

}  // namespace
