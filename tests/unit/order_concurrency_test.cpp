// Stream order and memory visibility, real concurrency between
// streams (proven by rendezvous, never by timing), calls that return at once while work runs,
// waits that never hold a worker, and priorities.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "streamrt/streamrt.hpp"
#include "test_util.hpp"

namespace {

using streamrt_test::fail_hard;
using streamrt_test::Gate;
using streamrt_test::kTimeout;
using streamrt_test::Rendezvous;
using streamrt_test::ThreadCount;
using streamrt_test::WorkersTest;
using namespace std::chrono_literals;

void spin_for(std::chrono::microseconds d) {
  const auto until = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < until) {
  }
}

// ---- 1. In order, one at a time, with the effects of earlier items visible ---------------------

class InOrder : public WorkersTest {};

TEST_P(InOrder, ItemsRunOneAtATimeInSubmissionOrderAndSeeEarlierWrites) {
  constexpr int kStreams = 4;
  constexpr int kItems = 2000;
  struct Lane {
    // Plain (non-atomic) data: only the stream's ordering makes these accesses race-free, so a
    // broken order also shows up as a data race under TSan.
    int next = 0;
    std::vector<int> log;
    std::atomic<int> in_flight{0};
  };
  std::vector<Lane> lanes(kStreams);
  std::atomic<int> overlaps{0};
  std::atomic<int> out_of_order{0};
  std::vector<streamrt::Stream> streams;
  for (int s = 0; s < kStreams; ++s) streams.emplace_back();

  for (int i = 0; i < kItems; ++i) {
    for (int s = 0; s < kStreams; ++s) {
      Lane* lane = &lanes[s];
      streams[s].launch([lane, i, &overlaps, &out_of_order] {
        if (lane->in_flight.fetch_add(1) != 0) overlaps.fetch_add(1);
        if (lane->next != i) out_of_order.fetch_add(1);
        if (i % 64 == 0) spin_for(20us);  // long enough for an overlapping item to be caught
        lane->log.push_back(i);
        lane->next = i + 1;
        lane->in_flight.fetch_sub(1);
      });
    }
  }
  for (auto& s : streams) s.synchronize();

  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_EQ(out_of_order.load(), 0);
  for (int s = 0; s < kStreams; ++s) {
    // synchronize() makes the work's plain writes visible to the host.
    ASSERT_EQ(lanes[s].log.size(), static_cast<std::size_t>(kItems)) << "stream " << s;
    for (int i = 0; i < kItems; ++i) ASSERT_EQ(lanes[s].log[i], i) << "stream " << s;
    EXPECT_EQ(lanes[s].next, kItems);
  }
}

TEST_P(InOrder, WorkLaunchedFromWorkRunsAfterTheRunningItem) {
  streamrt::Stream s;
  std::vector<int> log;  // plain: stream order protects it
  s.launch([&] {
    log.push_back(1);
    // Inside work, current_stream() is the running stream: this goes after us, not beside us.
    streamrt::current_stream().launch([&] { log.push_back(3); });
    log.push_back(2);
  });
  s.synchronize();  // the first item has finished, so the nested one has been submitted...
  s.synchronize();  // ...before this call, which therefore waits for it too
  ASSERT_EQ(log, (std::vector<int>{1, 2, 3}));
}

INSTANTIATE_TEST_SUITE_P(Workers, InOrder, ::testing::Values(1, 2, 4, 8));

// ---- 2. Streams run at the same time ----------------------------------------------------------

class Concurrent : public WorkersTest {
 protected:
  void SetUp() override {
    STREAMRT_SKIP_UNDER_SERIAL_SCHEDULE();
    WorkersTest::SetUp();
  }
};

TEST_P(Concurrent, OneItemPerWorkerOnSeparateStreamsAllMeet) {
  // As many streams as workers, one item each: they can only all pass the rendezvous if they run
  // at the same time. A serial runtime times out in the first item.
  const int n = workers();
  Rendezvous meet(n);
  std::atomic<int> met{0};
  std::atomic<int> done{0};
  std::vector<streamrt::Stream> streams;
  for (int i = 0; i < n; ++i) streams.emplace_back();
  for (auto& s : streams) {
    s.launch([&] {
      if (meet.arrive_and_wait()) met.fetch_add(1);
      done.fetch_add(1);
    });
  }
  for (auto& s : streams) s.synchronize();
  EXPECT_EQ(done.load(), n);
  EXPECT_EQ(met.load(), n) << "items on " << n << " streams did not run concurrently";
}

TEST_P(Concurrent, DefaultStreamRunsAlongsideANewStream) {
  Rendezvous meet(2);
  std::atomic<int> met{0};
  streamrt::Stream other;
  auto item = [&] {
    if (meet.arrive_and_wait()) met.fetch_add(1);
  };
  streamrt::Stream::default_stream().launch(item);
  other.launch(item);
  streamrt::Stream::default_stream().synchronize();
  other.synchronize();
  EXPECT_EQ(met.load(), 2);
}

TEST_P(Concurrent, AStreamBlockedInWorkDoesNotStopOtherStreams) {
  // One stream's item is blocked until the others have all finished 100 items each: they must
  // get the remaining workers.
  Gate release;
  streamrt::Stream blocked;
  std::atomic<bool> blocked_timed_out{false};
  blocked.launch([&] {
    if (!release.wait()) blocked_timed_out = true;
  });
  std::vector<streamrt::Stream> others;
  for (int i = 0; i < 3; ++i) others.emplace_back();
  std::atomic<int> count{0};
  for (int i = 0; i < 100; ++i) {
    for (auto& s : others) s.launch([&] { count.fetch_add(1); });
  }
  for (auto& s : others) {
    if (!s.synchronize_for(kTimeout)) fail_hard("a blocked stream stopped the other streams");
  }
  EXPECT_EQ(count.load(), 300);
  release.open();
  blocked.synchronize();
  EXPECT_FALSE(blocked_timed_out.load());
}

// Rendezvous needs at least two workers.
INSTANTIATE_TEST_SUITE_P(Workers, Concurrent, ::testing::Values(2, 4, 8));

// ---- 3. launch, record and wait_event return at once ------------------------------------------

class ReturnsAtOnce : public WorkersTest {};

TEST_P(ReturnsAtOnce, SubmissionCallsDoNotWaitForRunningWork) {
  Gate release;
  std::atomic<bool> started{false};
  std::atomic<bool> release_timed_out{false};
  streamrt::Stream s;
  streamrt::Stream other;
  s.launch([&] {
    started = true;
    if (!release.wait()) release_timed_out = true;
  });
  ASSERT_TRUE(streamrt_test::eventually([&] { return started.load(); }));

  // Every submission call runs on a helper thread; the work they would wait for is released only
  // after they all returned, so a call that waits makes the helper miss its deadline.
  Gate calls_done;
  std::atomic<int> ran_after{0};
  bool query_while_blocked = true;
  bool event_query_while_blocked = true;
  std::thread caller([&] {
    s.launch([&] { ran_after.fetch_add(1); });
    streamrt::Event e = s.record_event();
    streamrt::Event timed(streamrt::EventOptions{.enable_timing = true});
    timed.record(s);
    other.wait_event(e);
    other.wait_stream(s);
    e.record(s);  // re-record on the busy stream
    e.wait(other);
    other.launch([&] { ran_after.fetch_add(1); });
    {
      streamrt::StreamContext ctx(s);
      streamrt::Event cur;
      cur.record();  // on the current (busy) stream
      cur.wait();
    }
    query_while_blocked = s.query();
    event_query_while_blocked = e.query();
    calls_done.open();
  });
  const bool returned = calls_done.wait();
  release.open();
  caller.join();
  ASSERT_TRUE(returned) << "a submission call waited for running work";
  EXPECT_FALSE(query_while_blocked);
  EXPECT_FALSE(event_query_while_blocked);
  s.synchronize();
  other.synchronize();
  EXPECT_EQ(ran_after.load(), 2);
  EXPECT_FALSE(release_timed_out.load());
}

INSTANTIATE_TEST_SUITE_P(Workers, ReturnsAtOnce, ::testing::Values(1, 2, 4, 8));

// ---- 4. A wait never holds a worker -------------------------------------------------------------

// One worker, kept busy by a least urgent stream until `hold` opens: the streams queued meanwhile
// are all ready when it frees.
struct OneHeldWorker {
  ThreadCount one{1};
  std::pair<int, int> range = streamrt::Stream::priority_range();  // least, greatest
  Gate hold;
  streamrt::Stream holder{streamrt::Device{}, range.first};
  OneHeldWorker() { streamrt_test::occupy_worker(holder, hold); }
};

TEST(WaitDoesNotHoldWorker, WaitingStreamParksAndTheAwaitedStreamRunsOnTheOnlyWorker) {
  // The only worker is kept busy while the rest is queued, so that both streams below are ready
  // when it becomes free.
  OneHeldWorker held;
  const auto [least, greatest] = held.range;

  streamrt::Stream slow(streamrt::Device{}, least);
  streamrt::Stream waiter(streamrt::Device{}, greatest);
  std::atomic<bool> slow_done{false};
  bool slow_done_seen_by_waiter = false;
  Gate waiter_done;
  slow.launch([&] {
    std::this_thread::sleep_for(20ms);
    slow_done = true;
  });
  streamrt::Event after_slow = slow.record_event();
  // The waiter is more urgent, so the worker reaches its wait before the slow item has run (see
  // semantics 14). If the wait held the worker, the slow item could never run: deadlock.
  waiter.wait_event(after_slow);
  waiter.launch([&] {
    slow_done_seen_by_waiter = slow_done.load();
    waiter_done.open();
  });
  held.hold.open();
  // Only a plain condition variable here: no host thread helps the runtime make progress.
  if (!waiter_done.wait()) fail_hard("a stream waiting on an event held the only worker");
  EXPECT_TRUE(slow_done_seen_by_waiter);
  waiter.synchronize();
  held.holder.synchronize();
}

TEST(WaitDoesNotHoldWorker, ChainOfWaitsAcrossManyStreamsOnOneWorker) {
  // Streams queued most-urgent-first each wait on the next, less urgent one; the least urgent has
  // the real work. Every waiter must park for the chain to finish on one worker.
  OneHeldWorker held;
  const auto [least, greatest] = held.range;
  std::vector<int> log;  // written in event order only
  std::vector<streamrt::Stream> chain;
  for (int p = greatest; p <= least; ++p) chain.emplace_back(streamrt::Device{}, p);
  // chain.back() is the least urgent: it runs first in the dependency order.
  chain.back().launch([&] { log.push_back(static_cast<int>(chain.size()) - 1); });
  for (int i = static_cast<int>(chain.size()) - 2; i >= 0; --i) {
    chain[i].wait_event(chain[i + 1].record_event());
    chain[i].launch([&log, i] { log.push_back(i); });
  }
  Gate done;
  chain.front().launch([&] { done.open(); });
  held.hold.open();
  if (!done.wait()) fail_hard("a chain of waiting streams deadlocked on one worker");
  chain.front().synchronize();
  held.holder.synchronize();
  std::vector<int> expected;
  for (int i = static_cast<int>(chain.size()) - 1; i >= 0; --i) expected.push_back(i);
  EXPECT_EQ(log, expected);
}

TEST(WaitDoesNotHoldWorker, HostBlockedInSynchronizeIsNotNeededForProgress) {
  // A host thread sits in synchronize() on a stream that waits on another; the main thread waits
  // only on a plain condition variable. Progress must come from the single worker.
  ThreadCount one(1);
  streamrt::Stream a;
  streamrt::Stream b;
  Gate hold;
  a.launch([&] { hold.wait(); });
  std::atomic<int> a_items{0};
  for (int i = 0; i < 10; ++i) a.launch([&] { a_items.fetch_add(1); });
  b.wait_event(a.record_event());
  Gate b_done;
  b.launch([&] { b_done.open(); });
  std::thread host([&] { b.synchronize(); });
  hold.open();
  const bool ok = b_done.wait();
  if (!ok) fail_hard("no progress without the host");
  host.join();
  EXPECT_EQ(a_items.load(), 10);
}

// ---- 14. Priorities ---------------------------------------------------------------------------

TEST(Priorities, MostUrgentReadyStreamRunsFirstOnOneWorker) {
  OneHeldWorker held;
  const auto [least, greatest] = held.range;
  ASSERT_GT(least, greatest) << "the CPU backend should offer more than one priority";
  std::vector<int> order;  // the single worker runs these one at a time
  std::vector<streamrt::Stream> streams;
  // Submitted least urgent first, so FIFO order is the opposite of priority order.
  for (int p = least; p >= greatest; --p) {
    streams.emplace_back(streamrt::Device{}, p);
    // The one worker must be the only thread that runs them: no host-run items from the
    // synchronizes below (they would add a second executor).
    streams.back().set_host_run(false);
    streams.back().launch([&order, p] { order.push_back(p); });
  }
  held.hold.open();
  for (auto& s : streams) s.synchronize();
  held.holder.synchronize();
  std::vector<int> expected;
  for (int p = greatest; p <= least; ++p) expected.push_back(p);
  EXPECT_EQ(order, expected) << "lower priority values must run first";
}

TEST(Priorities, UrgentStreamKeepsTheWorkerWhileItHasReadyWork) {
  OneHeldWorker held;
  const auto [least, greatest] = held.range;
  streamrt::Stream low(streamrt::Device{}, least);
  streamrt::Stream high(streamrt::Device{}, greatest);
  EXPECT_EQ(low.priority(), least);
  EXPECT_EQ(high.priority(), greatest);
  low.set_host_run(false);  // only the one worker runs them (no host-run items)
  high.set_host_run(false);
  std::vector<char> order;
  for (int i = 0; i < 3; ++i) low.launch([&] { order.push_back('L'); });
  for (int i = 0; i < 3; ++i) high.launch([&] { order.push_back('H'); });
  held.hold.open();
  low.synchronize();
  high.synchronize();
  held.holder.synchronize();
  EXPECT_EQ(std::string(order.begin(), order.end()), "HHHLLL");
}

// Equal streams share the worker by time slices: a stream with one item gets its turn while an
// equal stream still has a long queue, not after it.
TEST(Priorities, AnEqualStreamGetsItsTurnBeforeALongQueueEnds) {
  OneHeldWorker held;
  streamrt::Stream busy;
  streamrt::Stream other;
  busy.set_host_run(false);  // only the one worker runs them (no host-run items)
  other.set_host_run(false);
  // Each busy item takes a while until the other stream has run, then nothing: served in turn
  // the other item runs after a few busy items; served after the queue, after all of them.
  constexpr int kBusyItems = 20000;
  std::atomic<bool> other_ran{false};
  int busy_run = 0;  // the one worker's
  int busy_run_before_other = -1;
  for (int i = 0; i < kBusyItems; ++i) {
    busy.launch([&] {
      ++busy_run;
      if (!other_ran.load()) spin_for(500us);
    });
  }
  Gate other_done;
  other.launch([&] {
    busy_run_before_other = busy_run;
    other_ran = true;
    other_done.open();
  });
  held.hold.open();
  if (!other_done.wait()) fail_hard("the stream with one item never ran");
  busy.synchronize();
  other.synchronize();
  held.holder.synchronize();
  EXPECT_EQ(busy_run, kBusyItems);
  EXPECT_LT(busy_run_before_other, kBusyItems / 2)
      << "an equal stream waited for another's whole queue instead of taking turns";
}

TEST(Priorities, OutOfRangePriorityIsAnErrorNamingTheRange) {
  const auto [least, greatest] = streamrt::Stream::priority_range();
  EXPECT_NO_THROW(streamrt::Stream(streamrt::Device{}, least));
  EXPECT_NO_THROW(streamrt::Stream(streamrt::Device{}, greatest));
  for (int bad : {least + 1, greatest - 1}) {
    try {
      streamrt::Stream s(streamrt::Device{}, bad);
      ADD_FAILURE() << "priority " << bad << " was accepted";
    } catch (const streamrt::Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(std::to_string(bad)), std::string::npos) << msg;
      EXPECT_NE(msg.find(std::to_string(least)), std::string::npos) << msg;
      EXPECT_NE(msg.find(std::to_string(greatest)), std::string::npos) << msg;
    }
  }
}

}  // namespace
