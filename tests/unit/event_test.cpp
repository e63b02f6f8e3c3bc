// Events: versions (what a record captures, what a wait keeps), never-recorded and reset events,
// elapsed_time, the states an event walks through. What Stream::synchronize waits for is in
// stream_test.cpp.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <fstream>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "streamrt/streamrt.hpp"
#include "test_util.hpp"

namespace {

using namespace streamrt_test;  // the shared test helpers (test_util.hpp)
using namespace std::chrono_literals;

// An event that takes a timestamp when its stream reaches it (elapsed_time needs two).
streamrt::Event timed_event() {
  return streamrt::Event(streamrt::EventOptions{.enable_timing = true});
}

// ---- 6. Event versions --------------------------------------------------------------------------

class EventVersions : public WorkersTest {};

// Stream `a` held at gate `ga` (its work then sets a_done), event `e` recorded after that work,
// and stream `b` waiting on `e`: b's first item notes whether a's work had run, then calls `then`.
struct WaitOnHeldWork {
  streamrt::Stream a;
  streamrt::Stream b;
  Gate ga;
  std::atomic<bool> a_done{false};
  bool a_done_seen = false;
  streamrt::Event e;

  explicit WaitOnHeldWork(std::function<void()> then) {
    a.launch([this] {
      ga.wait();
      a_done = true;
    });
    e = a.record_event();
    b.wait_event(e);
    b.launch([this, then = std::move(then)] {
      a_done_seen = a_done.load();
      then();
    });
  }
};

TEST_P(EventVersions, RecordCapturesTheCurrentEndOnly) {
  streamrt::Stream s;
  Gate g1;
  Gate g2;
  s.launch([&] { g1.wait(); });
  streamrt::Event e = s.record_event();
  s.launch([&] { g2.wait(); });
  EXPECT_FALSE(e.query());
  EXPECT_FALSE(e.completed());
  EXPECT_FALSE(e.wait_for(1ms));
  g1.open();
  EXPECT_TRUE(e.wait_for(kTimeout));  // does not need the later, still blocked item
  EXPECT_TRUE(e.query());
  EXPECT_EQ(e.state(), streamrt::EventState::Complete);
  EXPECT_FALSE(s.query());
  e.synchronize();
  g2.open();
  s.synchronize();
}

TEST_P(EventVersions, RecordOnAnIdleStreamIsCompleteAtOnce) {
  streamrt::Stream s;
  s.launch([] {});
  s.synchronize();
  streamrt::Event e = s.record_event();
  EXPECT_TRUE(e.query());
  e.synchronize();
  EXPECT_EQ(e.device(), streamrt::Device{});
}

TEST_P(EventVersions, WaitEventKeepsTheVersionSeenAtTheCall_LaterRecordPending) {
  streamrt::Stream c;
  Gate b_done;
  WaitOnHeldWork w([&] { b_done.open(); });
  streamrt::Stream& b = w.b;
  streamrt::Event& e = w.e;
  // The new version of `e` comes after b's item (c waits for it), so it cannot complete before
  // b's item runs: if b waited for the new version, b and c would wait for each other for ever.
  // (No worker is held by this, so it also holds with one worker.)
  c.wait_event(b.record_event());
  c.launch([] {});
  e.record(c);
  EXPECT_FALSE(e.query());
  w.ga.open();
  if (!b_done.wait()) fail_hard("b waited for the later version of the event");
  EXPECT_TRUE(w.a_done_seen);
  e.synchronize();
  b.synchronize();
  c.synchronize();
}

TEST_P(EventVersions, WaitEventKeepsTheVersionSeenAtTheCall_LaterRecordComplete) {
  streamrt::Stream idle;
  std::atomic<bool> b_ran{false};
  WaitOnHeldWork w([&] { b_ran = true; });
  streamrt::Stream& b = w.b;
  streamrt::Event& e = w.e;
  e.record(idle);  // complete at once; b must still wait for a
  EXPECT_TRUE(e.query());
  std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(b_ran.load()) << "b ran before the version it waits on completed";
  w.ga.open();
  b.synchronize();
  EXPECT_TRUE(b_ran.load());
  EXPECT_TRUE(w.a_done_seen);
}

TEST_P(EventVersions, HostWaitStartedBeforeAReRecordTracksItsVersion) {
  streamrt::Stream a;
  streamrt::Stream c;
  Gate ga;
  Gate gc;
  a.launch([&] { ga.wait(); });
  streamrt::Event e = a.record_event();
  std::atomic<pid_t> tid{0};
  std::atomic<bool> returned{false};
  std::thread host([&] {
    tid = gettid();
    e.synchronize();
    returned = true;
  });
  ASSERT_TRUE(eventually([&] { return tid.load() != 0; }));
  ASSERT_TRUE(settled_asleep(tid.load()));  // the host is waiting on the first version
  c.launch([&] { gc.wait(); });
  e.record(c);  // the new version stays pending until the end of the test
  ga.open();
  const bool ok = eventually([&] { return returned.load(); });
  gc.open();
  host.join();
  EXPECT_TRUE(ok) << "a host wait switched to a later record of the event";
  a.synchronize();
  c.synchronize();
}

TEST_P(EventVersions, QueryAndSynchronizeFollowTheLatestRecord) {
  streamrt::Stream a;
  streamrt::Stream b;
  Gate gb;
  streamrt::Event e = a.record_event();
  EXPECT_TRUE(e.query());
  b.launch([&] { gb.wait(); });
  e.record(b);
  EXPECT_FALSE(e.query());
  EXPECT_EQ(e.state(), streamrt::EventState::Pending);
  EXPECT_FALSE(e.wait_for(1ms));
  gb.open();
  e.synchronize();
  EXPECT_TRUE(e.query());
}

TEST_P(EventVersions, WaitStreamWaitsForWorkSubmittedSoFar) {
  streamrt::Stream a;
  streamrt::Stream b;
  Gate ga;
  std::atomic<int> a_count{0};
  a.launch([&] { ga.wait(); });
  for (int i = 0; i < 5; ++i) a.launch([&] { a_count.fetch_add(1); });
  b.wait_stream(a);
  int seen = -1;
  b.launch([&] { seen = a_count.load(); });
  ga.open();
  b.synchronize();
  EXPECT_EQ(seen, 5);
}

// Every stream of a long chain parks on the previous one's event before anything runs, so the
// release is a cascade of hand-offs (a worker that finishes one stream goes straight on to the
// next). Each item checks that it runs after all earlier ones; the chain is long enough that
// hand-offs nested in one another, rather than one after the other, would overflow a worker's
// stack.
TEST_P(EventVersions, ALongChainOfCrossStreamWaitsRunsInOrder) {
  constexpr int kStreams = 20'000;
  std::vector<streamrt::Stream> streams(kStreams);
  Gate g;
  std::atomic<int> next{0};
  std::atomic<int> out_of_order{0};
  streams[0].launch([&] {
    if (!g.wait()) fail_hard("the chain was never released");
  });
  for (int i = 0; i < kStreams; ++i) {
    if (i > 0) streams[i].wait_event(streams[i - 1].record_event());
    streams[i].launch([&next, &out_of_order, i] {
      if (next.load(std::memory_order_relaxed) != i) out_of_order.fetch_add(1);
      next.store(i + 1, std::memory_order_relaxed);  // ordered by the waits
    });
  }
  g.open();
  streams.back().synchronize();
  EXPECT_EQ(next.load(), kStreams);
  EXPECT_EQ(out_of_order.load(), 0);
}

TEST_P(EventVersions, BlockingEventsWaitTheSameWay) {
  streamrt::Stream s;
  Gate g;
  std::atomic<bool> done{false};
  s.launch([&] {
    g.wait();
    done = true;
  });
  streamrt::Event e(streamrt::EventOptions{.blocking = true});
  e.record(s);
  EXPECT_TRUE(e.options().blocking);
  EXPECT_FALSE(e.wait_for(1ms));
  std::thread opener([&] {
    std::this_thread::sleep_for(5ms);
    g.open();
  });
  e.synchronize();
  EXPECT_TRUE(done.load());
  opener.join();
}

INSTANTIATE_TEST_SUITE_P(Workers, EventVersions, ::testing::Values(1, 2, 4, 8));

// ---- 7. Never-recorded and reset events -------------------------------------------------------

void expect_error_naming_record(const std::function<void()>& call, const char* what) {
  try {
    call();
    ADD_FAILURE() << what << " did not throw";
  } catch (const streamrt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("record"), std::string::npos) << what << ": " << e.what();
  } catch (...) {
    ADD_FAILURE() << what << " threw something other than streamrt::Error";
  }
}

void expect_unrecorded_behaviour(streamrt::Event& e) {
  EXPECT_FALSE(e.query());
  EXPECT_FALSE(e.completed());
  EXPECT_EQ(e.state(), streamrt::EventState::NotRecorded);
  EXPECT_EQ(e.device(), std::nullopt);
  streamrt::Stream s;
  streamrt::Event timed = timed_event();
  timed.record(s);
  timed.synchronize();
  expect_error_naming_record([&] { e.synchronize(); }, "synchronize()");
  expect_error_naming_record([&] { e.wait_for(1ms); }, "wait_for()");
  expect_error_naming_record([&] { e.wait(); }, "wait()");
  expect_error_naming_record([&] { e.wait(s); }, "wait(stream)");
  expect_error_naming_record([&] { s.wait_event(e); }, "Stream::wait_event()");
  expect_error_naming_record([&] { e.on_complete([](std::exception_ptr) {}); }, "on_complete()");
  expect_error_naming_record([&] { streamrt::wait_all(std::vector<streamrt::Event>{e}); },
                             "wait_all()");
  if (e.options().enable_timing) {
    expect_error_naming_record([&] { e.elapsed_time(timed); }, "elapsed_time(start)");
    expect_error_naming_record([&] { timed.elapsed_time(e); }, "elapsed_time(end)");
  }
  // The stream is unharmed by the refused calls.
  EXPECT_TRUE(runs_new_work(s));
}

TEST(UnrecordedEvent, IsNotCompleteAndWaitsThrow) {
  streamrt::Event plain;
  expect_unrecorded_behaviour(plain);
  streamrt::Event timed = timed_event();
  expect_unrecorded_behaviour(timed);
  streamrt::Event blocking(streamrt::EventOptions{.blocking = true});
  expect_unrecorded_behaviour(blocking);
}

TEST(UnrecordedEvent, ResetEventBehavesAsNeverRecorded) {
  streamrt::Stream s;
  streamrt::Event e = timed_event();
  e.record(s);
  e.synchronize();
  EXPECT_TRUE(e.query());
  EXPECT_EQ(e.device(), streamrt::Device{});
  e.reset();
  expect_unrecorded_behaviour(e);
  e.record(s);  // usable again
  e.synchronize();
  EXPECT_TRUE(e.query());
}

TEST(UnrecordedEvent, ResetDoesNotAffectPendingWork) {
  streamrt::Stream s;
  Gate g;
  std::atomic<bool> ran{false};
  s.launch([&] {
    g.wait();
    ran = true;
  });
  streamrt::Event e = s.record_event();
  e.reset();
  g.open();
  s.synchronize();
  EXPECT_TRUE(ran.load());
}

// ---- 8. elapsed_time --------------------------------------------------------------------------

std::string elapsed_error(const streamrt::Event& a, const streamrt::Event& b) {
  return error_of([&] { (void)a.elapsed_time(b); });
}

TEST(ElapsedTime, RequiresTimingOnBothEvents) {
  streamrt::Stream s;
  streamrt::Event plain;
  streamrt::Event timed = timed_event();
  streamrt::Event timed2 = timed_event();
  plain.record(s);
  timed.record(s);
  timed2.record(s);
  s.synchronize();
  for (const auto& msg :
       {elapsed_error(plain, timed), elapsed_error(timed, plain), elapsed_error(plain, plain)}) {
    EXPECT_NE(msg.find("Both events must be created with enable_timing"), std::string::npos) << msg;
  }
  EXPECT_GE(timed.elapsed_time(timed2), 0.0);
}

TEST(ElapsedTime, RequiresBothRecorded) {
  streamrt::Stream s;
  streamrt::Event a = timed_event();
  streamrt::Event b = timed_event();
  a.record(s);
  s.synchronize();
  for (const auto& msg : {elapsed_error(a, b), elapsed_error(b, a)}) {
    EXPECT_NE(msg.find("Both events must be recorded"), std::string::npos) << msg;
  }
}

TEST(ElapsedTime, RequiresBothCompleted) {
  streamrt::Stream s;
  Gate g;
  streamrt::Event a = timed_event();
  streamrt::Event b = timed_event();
  a.record(s);
  s.launch([&] { g.wait(); });
  b.record(s);
  const std::string msg = elapsed_error(a, b);
  EXPECT_NE(msg.find("Both events must be completed"), std::string::npos) << msg;
  g.open();
  b.synchronize();
  EXPECT_GE(a.elapsed_time(b), 0.0);
}

TEST(ElapsedTime, TimestampIsTakenWhenTheStreamReachesTheRecord) {
  // Both records are made back to back on the host, before the 50 ms item has even started (the
  // stream is held by a gate). Only stamps taken when the stream gets there are 50 ms apart.
  streamrt::Stream s;
  Gate g;
  s.launch([&] { g.wait(); });
  streamrt::Event start = timed_event();
  streamrt::Event end = timed_event();
  start.record(s);
  s.launch([] { std::this_thread::sleep_for(50ms); });
  end.record(s);
  g.open();
  end.synchronize();
  const double ms = start.elapsed_time(end);
  EXPECT_GE(ms, 49.9);  // a lower bound only: the machine may be slow, never faster
  EXPECT_LE(end.elapsed_time(start), -49.9);
}

// elapsed_time from a record on `first` to one on `second` after `sleep` of work there (which
// waits for the first record when it is another stream).
double elapsed_over_sleep(streamrt::Stream& first, streamrt::Stream& second,
                          std::chrono::microseconds sleep) {
  streamrt::Event start = timed_event();
  streamrt::Event end = timed_event();
  start.record(first);
  if (second != first) second.wait_event(start);
  second.launch([sleep] { std::this_thread::sleep_for(sleep); });
  end.record(second);
  end.synchronize();
  return start.elapsed_time(end);
}

TEST(ElapsedTime, RecordOnAnIdleStreamThenSlowWork) {
  streamrt::Stream s;
  EXPECT_GE(elapsed_over_sleep(s, s, 50ms), 49.9);
}

TEST(ElapsedTime, WorksAcrossStreamsOfOneDevice) {
  streamrt::Stream a;
  streamrt::Stream b;
  EXPECT_GE(elapsed_over_sleep(a, b, 20ms), 19.9);
}

TEST(ElapsedTime, ResolutionIsFinerThanAMillisecond) {
  // A millisecond clock would give whole numbers of milliseconds every time.
  streamrt::Stream s;
  bool fractional = false;
  for (int i = 0; i < 5 && !fractional; ++i) {
    const double ms = elapsed_over_sleep(s, s, 1500us);
    EXPECT_GE(ms, 1.4999);
    fractional = ms != std::floor(ms);
  }
  EXPECT_TRUE(fractional);
}

TEST(EventState, WalksThroughEveryState) {
  using streamrt::EventState;
  streamrt::Event e;
  EXPECT_EQ(e.state(), EventState::NotRecorded);
  streamrt::Stream s;
  Blocker b;
  b.launch_on(s);
  e.record(s);
  EXPECT_EQ(e.state(), EventState::Pending);
  b.release.open();
  e.synchronize();
  EXPECT_EQ(e.state(), EventState::Complete);

  s.launch([] { throw std::runtime_error("x"); });
  e.record(s);
  EXPECT_THROW(e.synchronize(), std::runtime_error);
  EXPECT_EQ(e.state(), EventState::Failed);
  EXPECT_NO_THROW(s.synchronize());  // the event wait reported it (rule 10)

  Blocker b2;
  b2.launch_on(s);
  s.launch([] {});
  e.record(s);
  ASSERT_TRUE(b2.started.wait());
  s.cancel();
  b2.release.open();
  EXPECT_THROW(e.synchronize(), streamrt::Cancelled);
  EXPECT_EQ(e.state(), EventState::Cancelled);

  e.reset();
  EXPECT_EQ(e.state(), EventState::NotRecorded);
}

TEST(EventState, NamesForReprs) {
  using streamrt::EventState;
  EXPECT_EQ(streamrt::to_string(EventState::NotRecorded), "not_recorded");
  EXPECT_EQ(streamrt::to_string(EventState::Pending), "pending");
  EXPECT_EQ(streamrt::to_string(EventState::Complete), "complete");
  EXPECT_EQ(streamrt::to_string(EventState::Failed), "failed");
  EXPECT_EQ(streamrt::to_string(EventState::Cancelled), "cancelled");
}

}  // namespace
