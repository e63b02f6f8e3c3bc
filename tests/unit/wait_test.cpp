// Waits: time-outs change nothing; a waiting worker helps, so nested waits cannot
// exhaust the pool.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <stdexcept>
#include <thread>
#include <vector>

#include "streamrt/streamrt.hpp"
#include "test_util.hpp"

namespace {

using streamrt_test::fail_hard;
using streamrt_test::Gate;
using streamrt_test::kTimeout;
using streamrt_test::launch_failure_at;
using streamrt_test::runtime_error_of;
using streamrt_test::ThreadCount;
using streamrt_test::WorkersTest;
using namespace std::chrono_literals;

// A short time-out: long enough to exercise the parking path, short enough to keep tests quick.
// Only ever used where the wait cannot complete (the work is gated), so it never races.
constexpr auto kShort = 20ms;

class Timeouts : public WorkersTest {};

TEST_P(Timeouts, EventWaitForReturnsFalseAndChangesNothing) {
  streamrt::Stream s;
  Gate g;
  s.launch([&] {
    if (!g.wait()) fail_hard("never released");
    throw std::runtime_error("failure-after-timeout");
  });
  streamrt::Event e = s.record_event();
  streamrt::Event blocking{streamrt::EventOptions{.blocking = true}};
  blocking.record(s);
  EXPECT_FALSE(e.wait_for(kShort));
  EXPECT_FALSE(e.wait_for(0ns));
  EXPECT_FALSE(blocking.wait_for(kShort));
  EXPECT_EQ(e.state(), streamrt::EventState::Pending);
  EXPECT_FALSE(e.query());
  EXPECT_EQ(s.pending(), 1u);
  g.open();
  // The failure is still there for everyone after the time-outs. The first wait that raises it
  // reports it (rule 10), so the stream has nothing left to report; the events still carry it.
  EXPECT_THROW(e.wait_for(kTimeout), std::runtime_error);
  EXPECT_THROW(blocking.synchronize(), std::runtime_error);
  EXPECT_NO_THROW(s.synchronize());
}

// The interruptible wait that bindings use: it waits in slices, ends when interrupted() says so or
// the time-out runs out (changing nothing), waits for the record current at the call, and reports
// no failure, which synchronize() on that record still raises.
TEST_P(Timeouts, InterruptibleWaitEndsWhenAskedAndReportsNoFailure) {
  streamrt::Stream s;
  Gate g;
  s.launch([&] {
    if (!g.wait()) fail_hard("never released");
    throw std::runtime_error("failure-after-interruptible-wait");
  });
  streamrt::Event e = s.record_event();
  const streamrt::Event record(e.impl());
  int asked = 0;
  EXPECT_EQ(streamrt::wait_interruptibly(e, std::nullopt, 1ms, [&] { return ++asked == 3; }),
            streamrt::WaitEnd::Interrupted);
  EXPECT_EQ(asked, 3);
  EXPECT_EQ(streamrt::wait_interruptibly(e, kShort, 1ms, nullptr), streamrt::WaitEnd::TimedOut);
  EXPECT_EQ(e.state(), streamrt::EventState::Pending);
  e.record(streamrt::Stream());  // a later record: the wait below is for the one it saw
  g.open();
  EXPECT_EQ(streamrt::wait_interruptibly(record, std::nullopt, 1ms, [] { return false; }),
            streamrt::WaitEnd::Done);
  EXPECT_THROW(record.synchronize(), std::runtime_error);
  EXPECT_THROW(streamrt::wait_interruptibly(streamrt::Event(), kShort, 1ms, nullptr),
               streamrt::Error);
}

TEST_P(Timeouts, StreamSynchronizeForTimesOutAndALaterSynchronizeStillReportsTheFailure) {
  streamrt::Stream s;
  Gate g;
  launch_failure_at(s, g, "reported-later");
  std::atomic<bool> skipped_ran{false};
  s.launch([&] { skipped_ran = true; });
  EXPECT_FALSE(s.synchronize_for(kShort));
  EXPECT_FALSE(s.synchronize_for(0ns));
  EXPECT_FALSE(s.query());
  g.open();
  // The abandoned synchronize points are passed without taking the failure.
  EXPECT_EQ(runtime_error_of([&] { s.synchronize(); }), "reported-later");
  EXPECT_NO_THROW(s.synchronize());
  EXPECT_TRUE(s.synchronize_for(kTimeout));
  EXPECT_FALSE(skipped_ran.load());
}

TEST_P(Timeouts, DeviceSynchronizeForTimesOutChangingNothingThenReports) {
  streamrt::Stream s;
  Gate g;
  launch_failure_at(s, g, "device-wide-later");
  EXPECT_FALSE(streamrt::synchronize_for(kShort));
  EXPECT_FALSE(streamrt::synchronize_for(0ns));
  EXPECT_FALSE(s.query());
  g.open();
  EXPECT_EQ(runtime_error_of([] {
              while (!streamrt::synchronize_for(kTimeout)) {
              }
            }),
            "device-wide-later");
  EXPECT_NO_THROW(s.synchronize());  // reported once
  EXPECT_TRUE(streamrt::synchronize_for(kTimeout));
}

TEST_P(Timeouts, WaitAllForReturnsFalseWithoutThrowingAndChangesNothing) {
  streamrt::Stream failing, slow;
  failing.launch([] { throw std::out_of_range("first-failure"); });
  std::array<streamrt::Event, 2> events{failing.record_event(), streamrt::Event{}};
  // Complete (failed) before the gated item can hold the only worker.
  ASSERT_THROW(events[0].synchronize(), std::out_of_range);
  Gate g;
  slow.launch([&] {
    if (!g.wait()) fail_hard("never released");
  });
  events[1].record(slow);
  EXPECT_FALSE(streamrt::wait_all_for(events, kShort));  // no throw: timed out first
  EXPECT_EQ(events[1].state(), streamrt::EventState::Pending);
  g.open();
  EXPECT_THROW(streamrt::wait_all_for(events, kTimeout), std::out_of_range);
  EXPECT_THROW(streamrt::wait_all(events), std::out_of_range);
  EXPECT_NO_THROW(failing.synchronize());  // the first event wait reported it (rule 10)
}

// Time-outs longer than the clock counts from now (nanoseconds::max()) wait for the work: the
// deadline now + timeout once overflowed into the past and every such wait returned false at once.
TEST_P(Timeouts, TimeOutsPastTheClocksRangeWaitForTheWork) {
  constexpr auto kForever = std::chrono::nanoseconds::max();
  for (int call = 0; call < 4; ++call) {
    streamrt::Stream s;
    Gate g;
    s.launch([&] {
      if (!g.wait()) fail_hard("never released");
    });
    streamrt::Event e = s.record_event();
    std::thread opener([&] {
      std::this_thread::sleep_for(kShort);
      g.open();
    });
    bool done = false;
    switch (call) {
      case 0:
        done = s.synchronize_for(kForever);
        break;
      case 1:
        done = e.wait_for(kForever);
        break;
      case 2:
        done = streamrt::wait_all_for(std::vector<streamrt::Event>{e}, kForever);
        break;
      case 3:
        done = streamrt::synchronize_for(kForever);
        break;
    }
    opener.join();
    EXPECT_TRUE(done) << "call " << call;
    EXPECT_TRUE(s.query()) << "call " << call;
  }
}

TEST_P(Timeouts, TimedOutWaitsLeaveNoStaleWakeUps) {
  // Many short time-outs register continuations that fire later; the thread's next waits must
  // still work (a stale unpark is only a spurious wake-up).
  streamrt::Stream s;
  for (int round = 0; round < 20; ++round) {
    Gate g;
    s.launch([&] {
      if (!g.wait()) fail_hard("never released");
    });
    streamrt::Event e = s.record_event();
    EXPECT_FALSE(e.wait_for(1ms));
    EXPECT_FALSE(s.synchronize_for(1ms));
    g.open();
    EXPECT_TRUE(e.wait_for(kTimeout));
    EXPECT_TRUE(s.synchronize_for(kTimeout));
  }
}

TEST_P(Timeouts, AWaitQueuedOnAFailedStreamStillHoldsLaterWork) {
  // Found by the model stress test: a failed stream used to pass its queued waits at once, so a
  // synchronize could report the failure early and work launched after it ran before the event.
  streamrt::Stream a, b;
  Gate g;
  std::atomic<bool> a_done{false};
  a.launch([&] {
    if (!g.wait()) fail_hard("never released");
    a_done = true;
  });
  streamrt::Event ea = a.record_event();
  b.launch([] { throw 1; });
  b.wait_event(ea);
  EXPECT_FALSE(b.synchronize_for(kShort));  // behind the wait, failure or not
  g.open();
  EXPECT_THROW(b.synchronize(), int);
  std::atomic<bool> saw_a_done{false};
  b.launch([&] { saw_a_done = a_done.load(); });
  b.synchronize();
  EXPECT_TRUE(saw_a_done.load());
}

INSTANTIATE_TEST_SUITE_P(Workers, Timeouts, ::testing::Values(1, 2, 4, 8));

// ---- help while waiting -----------------------------------------------------------------------

class HelpWhileWaitingWorkers : public WorkersTest {};

TEST(HelpWhileWaiting, WorkOnAStreamSynchronizesOnAnotherStreamsEventWithOneWorker) {
  ThreadCount one(1);
  streamrt::Stream a, b;
  std::atomic<bool> b_ran{false};
  std::thread::id a_thread, b_thread;
  std::atomic<std::uint64_t> b_current{0};
  a.launch([&] {
    a_thread = std::this_thread::get_id();
    // B's work becomes ready only now, while the only worker is busy in this item.
    b.launch([&] {
      b_thread = std::this_thread::get_id();
      b_current = streamrt::current_stream().id();
      b_ran = true;
    });
    streamrt::Event eb = b.record_event();
    eb.synchronize();  // without helping, this would wait for a worker that never comes
    if (!b_ran.load()) throw std::logic_error("event complete but B's work has not run");
  });
  if (!a.synchronize_for(60s)) fail_hard("nested wait exhausted the only worker");
  EXPECT_TRUE(b_ran.load());
  EXPECT_EQ(a_thread, b_thread);  // B's item ran on the waiting worker: it helped
  EXPECT_EQ(b_current.load(), b.id());
}

TEST(HelpWhileWaiting, ChainOfNestedWaitsOnOneWorker) {
  // Item on stream 0 waits for stream 1, whose item waits for stream 2, ... all on one worker.
  ThreadCount one(1);
  constexpr int kDepth = 8;
  std::vector<streamrt::Stream> streams(kDepth);
  std::atomic<int> finished{0};
  std::function<void(int)> step = [&](int i) {
    if (i + 1 < kDepth) {
      streams[i + 1].launch([&, i] { step(i + 1); });
      streamrt::Event e = streams[i + 1].record_event();
      e.synchronize();
    }
    finished.fetch_add(1);
  };
  streams[0].launch([&] { step(0); });
  if (!streams[0].synchronize_for(60s)) fail_hard("nested chain deadlocked on one worker");
  EXPECT_EQ(finished.load(), kDepth);
}

TEST(HelpWhileWaiting, StreamSynchronizeAndWaitAllInsideWorkHelpToo) {
  ThreadCount one(1);
  streamrt::Stream a, b, c;
  std::atomic<int> done{0};
  a.launch([&] {
    b.launch([&] { done.fetch_add(1); });
    b.synchronize();  // another stream's synchronize from work: allowed, and it helps
    c.launch([&] { done.fetch_add(1); });
    std::array<streamrt::Event, 1> es{c.record_event()};
    streamrt::wait_all(es);
    done.fetch_add(1);
  });
  if (!a.synchronize_for(60s)) fail_hard("nested waits deadlocked on one worker");
  EXPECT_EQ(done.load(), 3);
}

TEST_P(HelpWhileWaitingWorkers, HelpingNeverNestsUnrelatedWorkThatWaitsForTheWaiter) {
  // X (stream a) waits for b. Ready before b are d (waiting for a, after X) and y (stream c,
  // waiting for d). A waiter that ran any ready work would nest y under X: y then waits for d,
  // which waits for X, which cannot resume under y -- a deadlock the program does not have. The
  // waiter must only run what it waits for.
  streamrt::Stream g, a, b, c, d;
  Gate gate;
  g.launch([&] {
    if (!gate.wait()) fail_hard("never released");
  });
  b.wait_event(g.record_event());  // b becomes ready only when the gate opens, after the rest
  std::atomic<bool> b_ran{false};
  b.launch([&] { b_ran = true; });
  streamrt::Event eb = b.record_event();
  std::atomic<int> x_ok{-1}, y_ok{-1};
  a.launch([&] { x_ok = eb.wait_for(kTimeout) ? 1 : 0; });
  d.wait_event(a.record_event());
  d.launch([] {});
  streamrt::Event fd = d.record_event();
  c.launch([&] { y_ok = fd.wait_for(kTimeout) ? 1 : 0; });
  gate.open();
  if (!c.synchronize_for(2 * kTimeout)) fail_hard("deadlock");
  a.synchronize();
  EXPECT_EQ(x_ok.load(), 1);
  EXPECT_EQ(y_ok.load(), 1);  // 0: y timed out, nested under X
  EXPECT_TRUE(b_ran.load());
}

INSTANTIATE_TEST_SUITE_P(Workers, HelpWhileWaitingWorkers, ::testing::Values(1, 2, 4));

TEST(HelpWhileWaiting, WaitingOnAFailedEventFromWorkRethrowsInsideTheWork) {
  ThreadCount one(1);
  streamrt::Stream a, b;
  a.launch([&] {
    b.launch([] { throw 42; });
    streamrt::Event e = b.record_event();
    try {
      e.synchronize();
    } catch (int v) {
      if (v != 42) throw std::logic_error("wrong value");
      return;  // handled inside the work: stream a stays clean
    }
    throw std::logic_error("failure not seen by the waiting work");
  });
  if (!a.synchronize_for(60s)) fail_hard("deadlock");
  EXPECT_NO_THROW(b.synchronize());  // the work's event wait reported it (rule 10)
}

}  // namespace
