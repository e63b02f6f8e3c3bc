// The current stream and StreamContext, thread safety, lifetime of
// streams with pending work (also at process exit, in a child process).
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "streamrt/streamrt.hpp"
#include "test_util.hpp"

namespace {

using streamrt_test::eventually;
using streamrt_test::fail_hard;
using streamrt_test::Gate;
using streamrt_test::kTimeout;
using streamrt_test::Rendezvous;
using streamrt_test::run_child;
using streamrt_test::WorkersTest;
using namespace std::chrono_literals;

// Restores the default stream as current when a test ends, whatever it did.
struct CurrentStreamReset {
  ~CurrentStreamReset() { streamrt::set_current_stream(streamrt::Stream::default_stream()); }
};

// Two streams, `a` the current one (until the test leaves).
struct ACurrent {
  CurrentStreamReset reset;
  streamrt::Stream a;
  streamrt::Stream b;
  ACurrent() { streamrt::set_current_stream(a); }
};

// ---- 11. Current stream -----------------------------------------------------------------------

TEST(CurrentStream, IsTheDefaultStreamUntilSet) {
  EXPECT_EQ(streamrt::current_stream(), streamrt::Stream::default_stream());
  EXPECT_EQ(streamrt::current_stream().id(), 0u);
  EXPECT_EQ(streamrt::default_stream(), streamrt::Stream::default_stream());
  streamrt::Stream fresh;
  EXPECT_NE(fresh.id(), 0u);
  EXPECT_NE(fresh, streamrt::Stream::default_stream());
  streamrt::Stream copy = fresh;
  EXPECT_EQ(copy, fresh);
  EXPECT_EQ(copy.id(), fresh.id());
  EXPECT_NE(streamrt::Stream().id(), fresh.id());
}

TEST(CurrentStream, IsPerThreadAndANewThreadStartsOnTheDefaultStream) {
  CurrentStreamReset reset;
  streamrt::Stream mine;
  streamrt::set_current_stream(mine);
  EXPECT_EQ(streamrt::current_stream(), mine);

  streamrt::Stream theirs;
  Rendezvous both_set(2);
  bool started_on_default = false;
  bool kept_own = false;
  bool met = false;
  std::thread other([&] {
    started_on_default = streamrt::current_stream() == streamrt::Stream::default_stream();
    streamrt::set_current_stream(theirs);
    met = both_set.arrive_and_wait();
    kept_own = streamrt::current_stream() == theirs;
  });
  const bool me_met = both_set.arrive_and_wait();
  EXPECT_EQ(streamrt::current_stream(), mine);  // the other thread's set did not touch ours
  other.join();
  EXPECT_TRUE(met && me_met);
  EXPECT_TRUE(started_on_default);
  EXPECT_TRUE(kept_own);
}

TEST(CurrentStream, StreamContextNestsAndRestores) {
  CurrentStreamReset reset;
  streamrt::Stream a;
  streamrt::Stream b;
  const auto before = streamrt::current_stream();
  {
    streamrt::StreamContext ca(a);
    EXPECT_EQ(streamrt::current_stream(), a);
    {
      streamrt::StreamContext cb(b);
      EXPECT_EQ(streamrt::current_stream(), b);
      {
        streamrt::StreamContext ca2(a);
        EXPECT_EQ(streamrt::current_stream(), a);
      }
      EXPECT_EQ(streamrt::current_stream(), b);
    }
    EXPECT_EQ(streamrt::current_stream(), a);
  }
  EXPECT_EQ(streamrt::current_stream(), before);
}

TEST(CurrentStream, StreamContextRestoresWhenAnExceptionLeavesTheScope) {
  ACurrent streams;
  streamrt::Stream& a = streams.a;
  streamrt::Stream& b = streams.b;
  try {
    streamrt::StreamContext cb(b);
    EXPECT_EQ(streamrt::current_stream(), b);
    throw std::runtime_error("leave");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(streamrt::current_stream(), a);
}

TEST(CurrentStream, StreamContextWithNulloptDoesNothing) {
  ACurrent streams;
  streamrt::Stream& a = streams.a;
  streamrt::Stream& b = streams.b;
  {
    streamrt::StreamContext none(std::nullopt);
    EXPECT_EQ(streamrt::current_stream(), a);
    // Nothing to restore on exit: a change made inside the scope stays.
    streamrt::set_current_stream(b);
  }
  EXPECT_EQ(streamrt::current_stream(), b);
  {
    streamrt::StreamContext some{std::optional<streamrt::Stream>(a)};
    EXPECT_EQ(streamrt::current_stream(), a);
  }
  EXPECT_EQ(streamrt::current_stream(), b);
}

TEST(CurrentStream, EventRecordAndWaitUseTheCurrentStream) {
  CurrentStreamReset reset;
  streamrt::Stream busy;
  Gate g;
  busy.launch([&] { g.wait(); });
  streamrt::Event e;
  {
    streamrt::StreamContext ctx(busy);
    e.record();  // on `busy`, behind the gated item
  }
  EXPECT_FALSE(e.query()) << "record() did not use the current stream";
  streamrt::Stream waiter;
  std::atomic<bool> waiter_ran{false};
  {
    streamrt::StreamContext ctx(waiter);
    e.wait();  // `waiter` waits
  }
  waiter.launch([&] { waiter_ran = true; });
  std::this_thread::sleep_for(10ms);
  EXPECT_FALSE(waiter_ran.load()) << "wait() did not make the current stream wait";
  g.open();
  waiter.synchronize();
  EXPECT_TRUE(waiter_ran.load());
  EXPECT_TRUE(e.query());
}

TEST(CurrentStream, InsideWorkTheCurrentStreamIsTheRunningStream) {
  streamrt::Stream a;
  streamrt::Stream b;
  bool in_a = false;
  bool in_b = false;
  a.launch([&] { in_a = streamrt::current_stream() == a; });
  b.launch([&] { in_b = streamrt::current_stream() == b; });
  a.synchronize();
  b.synchronize();
  EXPECT_TRUE(in_a);
  EXPECT_TRUE(in_b);
  EXPECT_EQ(streamrt::current_stream(), streamrt::Stream::default_stream());
}

TEST(CurrentStream, ADeviceWithoutBackendIsAClearError) {
  const streamrt::Device cuda{streamrt::DeviceType::CUDA, 0};
  for (auto call : std::vector<std::function<void()>>{
           [&] { (void)streamrt::current_stream(cuda); },
           [&] { (void)streamrt::Stream(cuda); },
           [&] { (void)streamrt::Stream::default_stream(cuda); },
           [&] { streamrt::synchronize(cuda); },
       }) {
    try {
      call();
      ADD_FAILURE() << "no error for a device without backend";
    } catch (const streamrt::Error& e) {
      EXPECT_NE(std::string(e.what()).find("no backend for device type 'cuda'"), std::string::npos)
          << e.what();
    }
  }
}

// ---- 12. Thread safety ------------------------------------------------------------------------

class ThreadSafety : public WorkersTest {};

TEST_P(ThreadSafety, ManyThreadsLaunchRecordWaitAndQueryOnSharedAndOwnStreams) {
  constexpr int kThreads = 8;
  constexpr int kIters = 150;
  streamrt::Stream shared;
  streamrt::Event shared_event;  // recorded and waited on by every thread at once
  shared_event.record(shared);
  // Per thread: the last index its items on `shared` saw. Plain ints: the stream order protects
  // them, so TSan reports a broken order as a race.
  std::vector<int> last_seen(kThreads, -1);
  std::atomic<int> out_of_order{0};
  std::atomic<int> own_count{0};
  std::atomic<int> shared_count{0};
  std::atomic<int> errors{0};
  Rendezvous start(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      try {
        streamrt::Stream own(streamrt::Device{}, t % 2 == 0 ? 0 : -1);
        streamrt::StreamContext ctx(own);
        start.arrive_and_wait();
        for (int i = 0; i < kIters; ++i) {
          shared.launch([&, t, i] {
            if (last_seen[t] != i - 1) out_of_order.fetch_add(1);
            last_seen[t] = i;
            shared_count.fetch_add(1);
          });
          streamrt::current_stream().launch([&] { own_count.fetch_add(1); });
          streamrt::Event e = own.record_event();
          shared.wait_event(e);
          if (i % 3 == 0) shared_event.record(i % 2 == 0 ? own : shared);
          if (i % 5 == 0) own.wait_event(shared_event);
          (void)shared.query();
          (void)shared_event.query();
          (void)shared_event.state();
          if (i % 25 == 0) {
            streamrt::Stream temp;  // created and dropped concurrently with everything else
            temp.launch([&] { own_count.fetch_add(1); });
            temp.wait_stream(own);
          }
          if (i % 50 == 0) own.synchronize();
          if (i % 30 == 0 && !e.wait_for(kTimeout)) errors.fetch_add(1);
        }
        own.synchronize();
      } catch (...) {
        errors.fetch_add(1);
      }
    });
  }
  for (auto& th : threads) th.join();
  shared.synchronize();
  streamrt::synchronize();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(out_of_order.load(), 0);
  EXPECT_EQ(shared_count.load(), kThreads * kIters);
  EXPECT_EQ(own_count.load(), kThreads * (kIters + (kIters + 24) / 25));
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(last_seen[t], kIters - 1);
}

TEST_P(ThreadSafety, ConcurrentSynchronizeCallsOnOneStreamAllReturn) {
  streamrt::Stream s;
  std::atomic<int> count{0};
  std::vector<std::thread> threads;
  std::atomic<int> returned{0};
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 100; ++i) {
        s.launch([&] { count.fetch_add(1); });
        if (i % 10 == 0) s.synchronize();
      }
      s.synchronize();
      returned.fetch_add(1);
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(returned.load(), 6);
  EXPECT_EQ(count.load(), 600);
}

INSTANTIATE_TEST_SUITE_P(Workers, ThreadSafety, ::testing::Values(1, 2, 4, 8));

// ---- 13. Lifetime -----------------------------------------------------------------------------

TEST(Lifetime, DroppingTheLastHandleDoesNotCancelPendingWork) {
  Gate g;
  Gate done;
  auto token = std::make_shared<int>(7);
  std::weak_ptr<int> watch = token;
  streamrt::Event e;
  {
    streamrt::Stream s;
    s.launch([&g, &done, token] {
      g.wait();
      if (*token == 7) done.open();
    });
    e.record(s);
    token.reset();
  }  // the only Stream handle is gone; the work has not run
  EXPECT_FALSE(watch.expired()) << "captured state died before the work ran";
  EXPECT_FALSE(e.query());
  g.open();
  ASSERT_TRUE(done.wait()) << "work of a dropped stream did not run";
  e.synchronize();  // the event still works without any stream handle
  EXPECT_TRUE(e.query());
  EXPECT_TRUE(eventually([&] { return watch.expired(); }))
      << "captured state was not released after the work ran";
}

TEST(Lifetime, DroppedStreamWithAChainOfWorkRunsItAll) {
  std::atomic<int> count{0};
  Gate done;
  {
    streamrt::Stream s;
    for (int i = 0; i < 100; ++i) s.launch([&] { count.fetch_add(1); });
    s.launch([&] { done.open(); });
  }
  ASSERT_TRUE(done.wait());
  EXPECT_EQ(count.load(), 100);
}

TEST(Lifetime, SkippedWorkReleasesItsCapturedState) {
  auto token = std::make_shared<int>(1);
  std::weak_ptr<int> watch = token;
  streamrt::Stream s;
  s.launch([] { throw std::runtime_error("fail first"); });
  s.launch([token] { (void)*token; });
  token.reset();
  EXPECT_THROW(s.synchronize(), std::runtime_error);
  EXPECT_TRUE(watch.expired());
}

TEST(Lifetime, PendingWorkIsFinishedAtProcessExit) {
  // The child's work blocks until the process has started exiting; streamrt must finish it (and
  // the work it launches, and a callback) before the process ends.
  const auto r = run_child(std::string("timeout 120 ") + STREAMRT_TEST_CHILD + " exit-pending");
  EXPECT_EQ(r.status, 0) << r.output;
  for (const char* line : {"main-returned", "work-after-exit-began", "nested-work-done",
                           "callback-done", "static-stream-work-done"}) {
    EXPECT_NE(r.output.find(line), std::string::npos) << line << " missing in:\n" << r.output;
  }
}

}  // namespace
