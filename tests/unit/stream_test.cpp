// Streams: in-order execution, what Stream::synchronize and streamrt::synchronize wait for,
// synchronize called from a stream's own work, and Stream::pending().
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "streamrt/streamrt.hpp"
#include "test_util.hpp"

namespace {

using namespace streamrt_test;  // the shared test helpers (test_util.hpp)
using namespace std::chrono_literals;

TEST(Stream, RunsWorkInOrder) {
  streamrt::Stream s;
  std::vector<int> seen;
  for (int i = 0; i < 1000; ++i) s.launch([&seen, i] { seen.push_back(i); });
  s.synchronize();
  ASSERT_EQ(seen.size(), 1000u);
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(seen[i], i);
}

// ---- 5. What synchronize waits for ------------------------------------------------------------

class SynchronizeScope : public WorkersTest {};

TEST_P(SynchronizeScope, StreamSynchronizeIgnoresWorkSubmittedAfterTheCall) {
  streamrt::Stream s;
  Gate first;
  Gate later;
  std::atomic<bool> first_done{false};
  s.launch([&] {
    first.wait();
    first_done = true;
  });

  std::atomic<pid_t> tid{0};
  std::atomic<bool> returned{false};
  bool first_done_at_return = false;
  std::thread host([&] {
    tid = gettid();
    s.synchronize();
    first_done_at_return = first_done.load();
    returned = true;
  });
  ASSERT_TRUE(eventually([&] { return tid.load() != 0; }));
  // The host is asleep inside synchronize(), so its call came before everything below.
  ASSERT_TRUE(settled_asleep(tid.load()));

  // Another thread keeps submitting blocked work until the host returns.
  std::atomic<int> submitted_after{0};
  std::atomic<int> ran_after{0};
  std::thread submitter([&] {
    while (!returned.load() && submitted_after.load() < 1000) {
      s.launch([&] {
        later.wait();
        ran_after.fetch_add(1);
      });
      submitted_after.fetch_add(1);
      std::this_thread::sleep_for(200us);
    }
  });
  ASSERT_TRUE(eventually([&] { return submitted_after.load() > 0; }));
  first.open();
  const bool host_returned = eventually([&] { return returned.load(); });
  later.open();  // unblock everything, whatever happened
  submitter.join();
  host.join();
  EXPECT_TRUE(host_returned) << "synchronize() waited for work submitted after it was called";
  EXPECT_TRUE(first_done_at_return) << "synchronize() returned before earlier work finished";
  s.synchronize();
  EXPECT_EQ(ran_after.load(), submitted_after.load());
}

TEST_P(SynchronizeScope, StreamSynchronizeWaitsForEverythingBefore) {
  streamrt::Stream s;
  std::vector<int> log;
  for (int i = 0; i < 50; ++i) {
    s.launch([&log, i] {
      if (i % 10 == 0) std::this_thread::sleep_for(1ms);
      log.push_back(i);
    });
  }
  s.synchronize();
  EXPECT_EQ(log.size(), 50u);
  EXPECT_TRUE(s.query());
}

TEST_P(SynchronizeScope, DeviceSynchronizeWaitsForEveryStream) {
  Gate release;
  std::vector<streamrt::Stream> streams;
  for (int i = 0; i < 4; ++i) streams.emplace_back();
  streams.push_back(streamrt::Stream::default_stream());
  std::vector<std::atomic<int>> done(streams.size());
  for (std::size_t i = 0; i < streams.size(); ++i) {
    streams[i].launch([&] { release.wait(); });
    for (int k = 0; k < 5; ++k) streams[i].launch([&done, i] { done[i].fetch_add(1); });
  }
  std::atomic<bool> synced{false};
  std::thread host([&] {
    streamrt::synchronize();
    synced = true;
  });
  std::this_thread::sleep_for(50ms);
  // Nothing can have finished: the work is held by the gate (a correct runtime never fails this).
  EXPECT_FALSE(synced.load()) << "streamrt::synchronize() returned while work was blocked";
  release.open();
  host.join();
  for (std::size_t i = 0; i < streams.size(); ++i) EXPECT_EQ(done[i].load(), 5) << "stream " << i;
  for (auto& s : streams) EXPECT_TRUE(s.query());
}

INSTANTIATE_TEST_SUITE_P(Workers, SynchronizeScope, ::testing::Values(1, 2, 4, 8));

// ---- 15. synchronize from a stream's own work -------------------------------------------------

class SelfSynchronize : public WorkersTest {};

// What error_of(call) says when `call` runs as work on `s`; fails hard when that work never
// finishes (`hang` says what deadlocked).
std::string error_from_work(streamrt::Stream& s, const std::function<void()>& call,
                            const char* hang) {
  std::string message;
  s.launch([&] { message = error_of(call); });
  if (!s.synchronize_for(kTimeout)) fail_hard(hang);
  return message;
}

TEST_P(SelfSynchronize, StreamSynchronizeFromItsOwnWorkThrows) {
  streamrt::Stream s;
  const std::string message = error_from_work(
      s, [&] { s.synchronize(); }, "synchronize() from its own stream deadlocked");
  EXPECT_NE(message.find("deadlock"), std::string::npos) << message;
}

TEST_P(SelfSynchronize, CurrentStreamSynchronizeFromWorkThrows) {
  streamrt::Stream s;
  EXPECT_NE(error_from_work(
                s, [] { streamrt::current_stream().synchronize(); },
                "synchronize() from its own stream deadlocked"),
            "<no error>");
}

TEST_P(SelfSynchronize, DeviceSynchronizeFromWorkThrows) {
  streamrt::Stream s;
  EXPECT_NE(error_from_work(
                s, [] { streamrt::synchronize(); }, "streamrt::synchronize() from work deadlocked"),
            "<no error>");
}

TEST_P(SelfSynchronize, WaitingFromWorkOnALaterEventOfTheSameStreamThrows) {
  streamrt::Stream s;
  Gate g;
  s.launch([&] { g.wait(); });
  streamrt::Event later;
  bool threw = false;
  s.launch([&] {
    try {
      later.synchronize();  // recorded after this item: can only complete after it returns
    } catch (const streamrt::Error&) {
      threw = true;
    }
  });
  later.record(s);
  g.open();
  if (!s.synchronize_for(kTimeout)) fail_hard("waiting on a later event of the same stream hung");
  EXPECT_TRUE(threw);
}

TEST_P(SelfSynchronize, SynchronizingAnotherStreamFromWorkIsAllowed) {
  // Even with one worker: the waiting worker must not be the only way the other stream can run.
  streamrt::Stream a;
  streamrt::Stream b;
  std::atomic<int> b_count{0};
  Gate hold;
  streamrt_test::occupy_worker(a, hold);  // b's work is queued before a's item looks at it
  bool ok = false;
  a.launch([&] {
    try {
      b.synchronize();
      ok = b_count.load() == 10;
    } catch (...) {
    }
  });
  for (int i = 0; i < 10; ++i) b.launch([&] { b_count.fetch_add(1); });
  hold.open();
  if (!a.synchronize_for(kTimeout)) fail_hard("work synchronizing another stream deadlocked");
  EXPECT_TRUE(ok);
}

INSTANTIATE_TEST_SUITE_P(Workers, SelfSynchronize, ::testing::Values(1, 2, 4, 8));

// ---- Stream::pending() --------------------------------------------------------------------------

TEST(Pending, CountsLaunchedItemsNotYetFinishedOnly) {
  streamrt::Stream s, other;
  EXPECT_EQ(s.pending(), 0u);
  Blocker b;
  b.launch_on(s);
  for (int i = 0; i < 9; ++i) s.launch([] {});
  // Records and waits are not work items.
  streamrt::Event e = s.record_event();
  s.wait_event(other.record_event());
  streamrt::Event timed{streamrt::EventOptions{.enable_timing = true}};
  timed.record(s);
  EXPECT_EQ(s.pending(), 10u);
  ASSERT_TRUE(b.started.wait());
  EXPECT_EQ(s.pending(), 10u);  // the running item counts until it finishes
  b.release.open();
  s.synchronize();
  EXPECT_EQ(s.pending(), 0u);
}

TEST(Pending, SkippedWorkIsNotPending) {
  streamrt::Stream s;
  s.launch([] { throw 1; });
  for (int i = 0; i < 5; ++i) s.launch([] {});
  EXPECT_THROW(s.synchronize(), int);
  EXPECT_EQ(s.pending(), 0u);
}

}  // namespace
