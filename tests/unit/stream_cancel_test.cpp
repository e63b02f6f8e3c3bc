// Stream::cancel(): dropped work, cancelled events, and what waiters on them see.
#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "streamrt/streamrt.hpp"
#include "test_util.hpp"

namespace {

using streamrt_test::Blocker;
using streamrt_test::fail_hard;
using streamrt_test::Gate;
using streamrt_test::kTimeout;
using streamrt_test::runtime_error_of;
using streamrt_test::WorkersTest;
using namespace std::chrono_literals;

// Work that must be dropped: it records that it ran.
auto never(std::atomic<int>& ran) {
  return [&ran] { ran.fetch_add(1); };
}

// Work that must be dropped, and that would hold its stream for the whole time-out if it ran (so
// waiters that wake only after it would time out).
auto never_blocking(std::atomic<int>& ran) {
  return [&ran] {
    ran.fetch_add(1);
    Gate never_opened;
    never_opened.wait(kTimeout);
  };
}

class Cancel : public WorkersTest {};

TEST_P(Cancel, DropsQueuedWorkTheRunningItemFinishesAndLaterEventsAreCancelled) {
  streamrt::Stream s;
  std::atomic<bool> running_finished{false};
  Gate started, release;
  s.launch([&] {
    started.open();
    if (!release.wait()) fail_hard("never released");
    running_finished = true;
  });
  std::atomic<int> ran{0};
  for (int i = 0; i < 100; ++i) s.launch(never(ran));
  streamrt::Event after = s.record_event();
  ASSERT_TRUE(started.wait());

  EXPECT_EQ(s.cancel(), 100u);
  EXPECT_EQ(s.pending(), 1u);                               // the running item only
  EXPECT_EQ(after.state(), streamrt::EventState::Pending);  // the running item is not done yet
  release.open();

  EXPECT_THROW(after.synchronize(), streamrt::Cancelled);
  EXPECT_EQ(after.state(), streamrt::EventState::Cancelled);
  EXPECT_TRUE(running_finished.load());
  EXPECT_EQ(ran.load(), 0);
  // The caller asked for the cancel: the stream's own synchronize does not throw for it.
  EXPECT_NO_THROW(s.synchronize());
  EXPECT_EQ(s.pending(), 0u);
  EXPECT_TRUE(s.query());

  // Still usable, and events after the cancel are clean.
  std::atomic<int> later{0};
  s.launch([&] { later = 1; });
  streamrt::Event clean = s.record_event();
  EXPECT_NO_THROW(clean.synchronize());
  EXPECT_EQ(clean.state(), streamrt::EventState::Complete);
  EXPECT_EQ(later.load(), 1);
  EXPECT_THROW(after.synchronize(), streamrt::Cancelled);  // the old record keeps its result
}

TEST_P(Cancel, CancelledIsAnError) {
  streamrt::Stream s;
  Blocker b;
  b.launch_on(s);
  std::atomic<int> ran{0};
  s.launch(never(ran));
  streamrt::Event e = s.record_event();
  ASSERT_TRUE(b.started.wait());
  s.cancel();
  b.release.open();
  try {
    e.synchronize();
    FAIL() << "no exception";
  } catch (const streamrt::Error& err) {  // Cancelled derives from Error
    EXPECT_NE(dynamic_cast<const streamrt::Cancelled*>(&err), nullptr);
    EXPECT_NE(std::string(err.what()).find("cancel"), std::string::npos) << err.what();
  }
}

TEST_P(Cancel, EventsRecordedBeforeTheDroppedWorkAreClean) {
  streamrt::Stream s;
  Blocker b;
  b.launch_on(s);
  streamrt::Event before = s.record_event();
  std::atomic<int> ran{0};
  s.launch(never(ran));
  streamrt::Event after = s.record_event();
  ASSERT_TRUE(b.started.wait());
  EXPECT_EQ(s.cancel(), 1u);
  b.release.open();
  EXPECT_NO_THROW(before.synchronize());
  EXPECT_EQ(before.state(), streamrt::EventState::Complete);
  EXPECT_THROW(after.synchronize(), streamrt::Cancelled);
  EXPECT_EQ(ran.load(), 0);
}

TEST_P(Cancel, HostsWaitingOnCancelledEventsWake) {
  streamrt::Stream s;
  Blocker b;
  b.launch_on(s);
  std::atomic<int> ran{0};
  for (int i = 0; i < 3; ++i) s.launch(never_blocking(ran));  // if these ran, waiters time out
  streamrt::Event after = s.record_event();
  ASSERT_TRUE(b.started.wait());
  constexpr int kWaiters = 3;
  std::atomic<int> cancelled{0};
  std::vector<std::thread> hosts;
  for (int i = 0; i < kWaiters; ++i) {
    hosts.emplace_back([&] {
      try {
        if (!after.wait_for(kTimeout)) return;
      } catch (const streamrt::Cancelled&) {
        cancelled.fetch_add(1);
      }
    });
  }
  s.cancel();
  b.release.open();
  for (auto& t : hosts) t.join();
  EXPECT_EQ(cancelled.load(), kWaiters);
  EXPECT_EQ(ran.load(), 0);
}

TEST_P(Cancel, StreamParkedOnAWaitDropsItsWorkAndKeepsTheWait) {
  // The wait is an ordering promise for later work too, so it survives the cancel.
  streamrt::Stream producer, s;
  Blocker b;
  b.launch_on(producer);
  std::atomic<bool> produced{false};
  producer.launch([&] { produced = true; });
  s.wait_event(producer.record_event());
  std::atomic<int> ran{0};
  s.launch(never(ran));
  streamrt::Event after = s.record_event();
  EXPECT_EQ(s.cancel(), 1u);
  std::atomic<int> saw_produced{-1};
  s.launch([&] { saw_produced = produced.load() ? 1 : 0; });
  streamrt::Event later = s.record_event();
  EXPECT_FALSE(later.query());
  b.release.open();
  EXPECT_THROW(after.synchronize(), streamrt::Cancelled);
  EXPECT_NO_THROW(later.synchronize());
  EXPECT_EQ(saw_produced.load(), 1);  // ran after the producer, as the wait said
  EXPECT_EQ(ran.load(), 0);
}

TEST_P(Cancel, FromInsideWorkDropsTheRestOfItsOwnStream) {
  streamrt::Stream s;
  Gate queued;
  std::atomic<std::uint64_t> dropped{0};
  s.launch([&] {
    if (!queued.wait()) fail_hard("never queued");
    dropped = streamrt::current_stream().cancel();
  });
  std::atomic<int> ran{0};
  for (int i = 0; i < 10; ++i) s.launch([&] { ran.fetch_add(1); });
  queued.open();
  s.synchronize();
  EXPECT_EQ(dropped.load(), 10u);
  EXPECT_EQ(ran.load(), 0);
}

TEST_P(Cancel, StreamsThatWaitedOnCancelledWorkInheritCancelled) {
  streamrt::Stream a, b;
  Blocker blk;
  blk.launch_on(a);
  std::atomic<int> ran{0};
  a.launch(never(ran));
  b.wait_event(a.record_event());
  std::atomic<bool> dependent_ran{false};
  b.launch([&] { dependent_ran = true; });  // its input was never produced: must not run
  streamrt::Event eb = b.record_event();
  ASSERT_TRUE(blk.started.wait());
  a.cancel();
  blk.release.open();
  EXPECT_THROW(eb.synchronize(), streamrt::Cancelled);
  EXPECT_EQ(eb.state(), streamrt::EventState::Cancelled);
  EXPECT_FALSE(dependent_ran.load());
  // b did not ask for it: its synchronize reports it, once, and b runs work again.
  EXPECT_THROW(b.synchronize(), streamrt::Cancelled);
  EXPECT_NO_THROW(b.synchronize());
  std::atomic<bool> again{false};
  b.launch([&] { again = true; });
  b.synchronize();
  EXPECT_TRUE(again.load());
  EXPECT_NO_THROW(a.synchronize());
}

TEST_P(Cancel, AFailureOfTheRunningItemIsStillReportedOnceAndWins) {
  streamrt::Stream s;
  Gate started, release;
  s.launch([&] {
    started.open();
    if (!release.wait()) fail_hard("never released");
    throw std::runtime_error("running-item-failed");
  });
  std::atomic<int> ran{0};
  s.launch(never(ran));
  streamrt::Event after = s.record_event();
  ASSERT_TRUE(started.wait());
  EXPECT_EQ(s.cancel(), 1u);
  release.open();
  EXPECT_EQ(runtime_error_of([&] { after.synchronize(); }), "running-item-failed");
  EXPECT_EQ(after.state(), streamrt::EventState::Failed);
  EXPECT_NO_THROW(s.synchronize());  // reported exactly once, by the event wait (rule 10)
  EXPECT_EQ(ran.load(), 0);
}

TEST_P(Cancel, AFailureInheritedInsideACancelledRangeIsReported) {
  streamrt::Stream producer, s;
  producer.launch([] { throw std::logic_error("producer-failed"); });
  streamrt::Event failed = producer.record_event();
  Blocker b;
  b.launch_on(s);
  std::atomic<int> ran{0};
  s.launch(never(ran));  // dropped: cancelled range starts here
  streamrt::Event cancelled = s.record_event();
  s.wait_event(failed);  // inside the range: inherits the failure
  s.launch(never(ran));  // dropped
  streamrt::Event inherited = s.record_event();
  ASSERT_TRUE(b.started.wait());
  EXPECT_EQ(s.cancel(), 2u);
  b.release.open();
  EXPECT_THROW(cancelled.synchronize(), streamrt::Cancelled);
  EXPECT_THROW(inherited.synchronize(), std::logic_error);
  EXPECT_NO_THROW(s.synchronize());  // the event wait on s reported it (rule 10)
  EXPECT_THROW(producer.synchronize(), std::logic_error);  // still active where it happened
  EXPECT_EQ(ran.load(), 0);
}

TEST_P(Cancel, NothingQueuedMeansNothingChanges) {
  streamrt::Stream s;
  EXPECT_EQ(s.cancel(), 0u);
  std::atomic<int> ran{0};
  s.launch([&] { ran = 1; });
  s.synchronize();
  EXPECT_EQ(s.cancel(), 0u);
  streamrt::Event e = s.record_event();
  EXPECT_EQ(e.state(), streamrt::EventState::Complete);
  EXPECT_EQ(ran.load(), 1);
}

TEST_P(Cancel, RepeatedCancelsAndLaunchesKeepOrderAndCounts) {
  streamrt::Stream s;
  std::vector<int> order;  // written only by stream work, read after synchronize
  std::uint64_t dropped = 0;
  int launched = 0;
  for (int round = 0; round < 50; ++round) {
    Blocker b;
    b.launch_on(s);
    for (int i = 0; i < 5; ++i) {
      const int id = launched++;
      s.launch([&order, id] { order.push_back(id); });
    }
    if (round % 2 == 0) {
      ASSERT_TRUE(b.started.wait());
      dropped += s.cancel();
    }
    b.release.open();
    s.synchronize();
  }
  EXPECT_EQ(dropped, 25u * 5u);
  ASSERT_EQ(order.size(), 25u * 5u);
  for (std::size_t i = 1; i < order.size(); ++i) EXPECT_LT(order[i - 1], order[i]);
}

TEST_P(Cancel, DroppedWorkIsDestroyedOnTheCancellingThreadBeforeCancelReturns) {
  struct Token {
    std::atomic<int>* destroyed;
    std::thread::id* where;
    Token(std::atomic<int>* d, std::thread::id* w) : destroyed(d), where(w) {}
    Token(Token&& o) noexcept : destroyed(std::exchange(o.destroyed, nullptr)), where(o.where) {}
    ~Token() {
      if (destroyed != nullptr) {
        *where = std::this_thread::get_id();
        destroyed->fetch_add(1);
      }
    }
  };
  streamrt::Stream s;
  Blocker b;
  b.launch_on(s);
  std::atomic<int> destroyed{0};
  std::thread::id where;
  s.launch([t = Token(&destroyed, &where)] {});
  ASSERT_TRUE(b.started.wait());
  EXPECT_EQ(s.cancel(), 1u);
  EXPECT_EQ(destroyed.load(), 1);
  EXPECT_EQ(where, std::this_thread::get_id());
  b.release.open();
  s.synchronize();
}

TEST_P(Cancel, ConcurrentCancelsAndLaunchesFromManyThreads) {
  // Every item either runs once or is counted by exactly one cancel().
  streamrt::Stream s;
  constexpr int kThreads = 4, kPerThread = 2000;
  std::atomic<int> ran{0};
  std::atomic<std::uint64_t> dropped{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        s.launch([&] { ran.fetch_add(1); });
        if ((i + t) % 97 == 0) dropped += s.cancel();
      }
    });
  }
  for (auto& t : threads) t.join();
  s.synchronize();
  EXPECT_EQ(static_cast<std::uint64_t>(ran.load()) + dropped.load(),
            static_cast<std::uint64_t>(kThreads * kPerThread));
  EXPECT_EQ(s.pending(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Workers, Cancel, ::testing::Values(1, 2, 4, 8));

}  // namespace
