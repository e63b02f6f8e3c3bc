// Completion callbacks, and failures in work.
#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "streamrt/streamrt.hpp"
#include "test_util.hpp"

namespace {

using streamrt_test::error_of;
using streamrt_test::eventually;
using streamrt_test::fail_hard;
using streamrt_test::Gate;
using streamrt_test::kTimeout;
using streamrt_test::launch_failure_at;
using streamrt_test::runs_new_work;
using streamrt_test::StderrCapture;
using streamrt_test::ThreadCount;
using streamrt_test::WorkersTest;
using namespace std::chrono_literals;

// A user exception type: rethrows must keep it (not turn it into a std::runtime_error).
struct TestFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Not derived from std::exception at all.
struct NotStd {
  int code;
};

// ---- 9. on_complete ---------------------------------------------------------------------------

class OnComplete : public WorkersTest {};

TEST_P(OnComplete, RunsOnceOnARuntimeThreadAfterCompletion) {
  streamrt::Stream s;
  Gate g;
  s.launch([&] { g.wait(); });
  streamrt::Event e = s.record_event();
  std::atomic<int> calls{0};
  std::atomic<bool> complete_inside{false};
  std::atomic<bool> null_error{false};
  std::thread::id cb_thread;
  Gate called;
  e.on_complete([&](std::exception_ptr err) {
    complete_inside = e.query();
    null_error = err == nullptr;
    cb_thread = std::this_thread::get_id();
    calls.fetch_add(1);
    called.open();
  });
  EXPECT_EQ(calls.load(), 0);  // the event cannot be complete: the gate is closed
  g.open();
  ASSERT_TRUE(called.wait());
  EXPECT_TRUE(complete_inside.load());
  EXPECT_TRUE(null_error.load());
  EXPECT_NE(cb_thread, std::this_thread::get_id());
  s.synchronize();
  streamrt::synchronize();
  std::this_thread::sleep_for(10ms);
  EXPECT_EQ(calls.load(), 1);
}

TEST_P(OnComplete, RunsAtOnceOnTheCallingThreadWhenAlreadyComplete) {
  streamrt::Stream s;
  s.launch([] {});
  streamrt::Event e = s.record_event();
  e.synchronize();
  int calls = 0;
  std::thread::id cb_thread;
  bool null_error = false;
  e.on_complete([&](std::exception_ptr err) {
    ++calls;
    cb_thread = std::this_thread::get_id();
    null_error = err == nullptr;
  });
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(cb_thread, std::this_thread::get_id());
  EXPECT_TRUE(null_error);
}

TEST_P(OnComplete, ManyCallbacksOnManyEventsEachRunExactlyOnce) {
  constexpr int kEvents = 50;
  constexpr int kPerEvent = 4;
  std::vector<streamrt::Stream> streams(4);  // four new streams
  std::vector<std::atomic<int>> counts(kEvents * kPerEvent);
  for (int i = 0; i < kEvents; ++i) {
    auto& s = streams[i % streams.size()];
    s.launch([] { std::this_thread::yield(); });
    streamrt::Event e = s.record_event();
    for (int k = 0; k < kPerEvent; ++k) {
      e.on_complete(
          [&counts, i, k](std::exception_ptr) { counts[i * kPerEvent + k].fetch_add(1); });
    }
    e.record(s);  // a re-record must not fire the callbacks of the old version again
  }
  for (auto& s : streams) s.synchronize();
  ASSERT_TRUE(eventually([&] {
    for (auto& c : counts) {
      if (c.load() == 0) return false;
    }
    return true;
  }));
  std::this_thread::sleep_for(10ms);
  for (std::size_t i = 0; i < counts.size(); ++i) EXPECT_EQ(counts[i].load(), 1) << i;
}

TEST_P(OnComplete, ReceivesTheFailure) {
  streamrt::Stream s;
  Gate g;
  launch_failure_at<TestFailure>(s, g, "cb-failure");
  streamrt::Event e = s.record_event();
  Gate called;
  std::string what;
  e.on_complete([&](std::exception_ptr err) {
    try {
      if (err) std::rethrow_exception(err);
      what = "<null>";
    } catch (const TestFailure& f) {
      what = f.what();
    } catch (...) {
      what = "<other type>";
    }
    called.open();
  });
  g.open();
  ASSERT_TRUE(called.wait());
  EXPECT_EQ(what, "cb-failure");
  EXPECT_THROW(s.synchronize(), TestFailure);
}

TEST_P(OnComplete, CallbackMayLaunchWorkAndRecordEvents) {
  streamrt::Stream s;
  streamrt::Stream other;
  Gate g;
  s.launch([&] { g.wait(); });
  streamrt::Event e = s.record_event();
  Gate chained;
  std::atomic<int> steps{0};
  e.on_complete([&](std::exception_ptr) {
    other.launch([&] { steps.fetch_add(1); });
    s.launch([&] { steps.fetch_add(1); });
    streamrt::Event inner = other.record_event();
    inner.on_complete([&](std::exception_ptr) {  // nested registration from a callback
      steps.fetch_add(1);
      chained.open();
    });
  });
  g.open();
  if (!chained.wait()) fail_hard("a callback using the API deadlocked");
  streamrt::synchronize();
  EXPECT_EQ(steps.load(), 3);
}

TEST(OnCompleteReport, ThrowingCallbackIsReportedAndTheWorkerKeepsWorking) {
  ThreadCount one(1);  // the only worker must survive the throw
  StderrCapture err;
  streamrt::Stream s;
  Gate g;
  s.launch([&] { g.wait(); });
  streamrt::Event e = s.record_event();
  e.on_complete([](std::exception_ptr) { throw std::runtime_error("callback-marker-7781"); });
  g.open();
  EXPECT_TRUE(err.wait_for_text("callback-marker-7781")) << err.text();
  EXPECT_TRUE(runs_new_work(s));
}

TEST(OnCompleteReport, ThrowingCallbackOnACompleteEventIsReportedNotPropagated) {
  StderrCapture err;
  streamrt::Stream s;
  streamrt::Event e = s.record_event();
  EXPECT_NO_THROW(e.on_complete([](std::exception_ptr) { throw NotStd{3}; }));
  EXPECT_NO_THROW(
      e.on_complete([](std::exception_ptr) { throw std::logic_error("callback-marker-8812"); }));
  EXPECT_TRUE(err.wait_for_text("callback-marker-8812")) << err.text();
  EXPECT_NE(err.text().find("callback"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Workers, OnComplete, ::testing::Values(1, 2, 4, 8));

// ---- 10. Failures -----------------------------------------------------------------------------

class Failures : public WorkersTest {};

TEST_P(Failures, LaterItemsAreSkippedAndLaterEventsCarryTheFailure) {
  streamrt::Stream s;
  Gate g;
  std::atomic<bool> before_ran{false};
  std::atomic<bool> skipped_ran{false};
  s.launch([&] {
    g.wait();
    before_ran = true;
  });
  streamrt::Event before = s.record_event();
  s.launch([] { throw TestFailure("boom-1"); });
  s.launch([&] { skipped_ran = true; });
  streamrt::Event after = s.record_event();
  g.open();

  const TestFailure* first = nullptr;
  try {
    after.synchronize();
    ADD_FAILURE() << "Event::synchronize did not rethrow";
  } catch (const TestFailure& f) {
    EXPECT_STREQ(f.what(), "boom-1");
    first = &f;
  }
  EXPECT_TRUE(after.query());  // complete, with a failure
  EXPECT_EQ(after.state(), streamrt::EventState::Failed);
  EXPECT_NO_THROW(before.synchronize());
  EXPECT_EQ(before.state(), streamrt::EventState::Complete);
  EXPECT_TRUE(before_ran.load());

  std::vector<streamrt::Event> both{before, after};
  try {
    streamrt::wait_all(both);  // the old record still covers the failure
    ADD_FAILURE() << "wait_all did not rethrow";
  } catch (const TestFailure& f) {
    EXPECT_STREQ(f.what(), "boom-1");
    EXPECT_EQ(&f, first) << "not the original exception object";
  }
  // The event wait reported it (rule 10): the stream has nothing left to report.
  EXPECT_NO_THROW(s.synchronize());
  EXPECT_FALSE(skipped_ran.load()) << "an item after a failure ran";

  // Reported: the stream runs new work again, and new events are clean.
  std::atomic<bool> ran_again{false};
  s.launch([&] { ran_again = true; });
  streamrt::Event clean = s.record_event();
  EXPECT_NO_THROW(s.synchronize());
  EXPECT_TRUE(ran_again.load());
  EXPECT_NO_THROW(clean.synchronize());
  EXPECT_EQ(clean.state(), streamrt::EventState::Complete);
  // The old record still covers the failure.
  EXPECT_THROW(after.synchronize(), TestFailure);
}

TEST_P(Failures, SynchronizeCalledWhileTheFailingItemIsStillRunning) {
  streamrt::Stream s;
  Gate g;
  launch_failure_at<TestFailure>(s, g, "boom-2");
  std::atomic<bool> skipped_ran{false};
  s.launch([&] { skipped_ran = true; });
  std::thread opener([&] {
    std::this_thread::sleep_for(5ms);
    g.open();
  });
  EXPECT_THROW(s.synchronize(), TestFailure);
  opener.join();
  EXPECT_FALSE(skipped_ran.load());
  EXPECT_NO_THROW(s.synchronize());  // reported once
  EXPECT_TRUE(runs_new_work(s));
}

TEST_P(Failures, StreamsWaitingOnAFailedEventInheritTheFailure) {
  streamrt::Stream a;
  streamrt::Stream b;
  streamrt::Stream c;
  std::atomic<bool> b_before{false};
  std::atomic<bool> b_after{false};
  std::atomic<bool> c_after{false};
  Gate g;
  a.launch([&] {
    g.wait();
    throw TestFailure("boom-3");
  });
  b.launch([&] { b_before = true; });
  b.wait_event(a.record_event());
  b.launch([&] { b_after = true; });
  c.wait_event(b.record_event());  // inherits through b
  c.launch([&] { c_after = true; });
  g.open();
  EXPECT_THROW(b.synchronize(), TestFailure);
  EXPECT_THROW(c.synchronize(), TestFailure);
  EXPECT_THROW(a.synchronize(), TestFailure);
  EXPECT_TRUE(b_before.load());
  EXPECT_FALSE(b_after.load());
  EXPECT_FALSE(c_after.load());
}

TEST_P(Failures, NonStandardExceptionTypesAreRethrownAsThemselves) {
  streamrt::Stream s;
  s.launch([] { throw 42; });
  try {
    s.synchronize();
    ADD_FAILURE() << "no rethrow";
  } catch (int v) {
    EXPECT_EQ(v, 42);
  }
  s.launch([] { throw NotStd{7}; });
  streamrt::Event e = s.record_event();
  try {
    e.synchronize();
    ADD_FAILURE() << "no rethrow";
  } catch (const NotStd& n) {
    EXPECT_EQ(n.code, 7);
  }
  EXPECT_THROW(e.synchronize(), NotStd);  // raised again: a non-Error type is rethrown as is
  EXPECT_NO_THROW(s.synchronize());       // the event wait reported it (rule 10)
}

TEST_P(Failures, AFailureDoesNotHarmOtherStreamsOrWorkers) {
  constexpr int kStreams = 8;
  std::vector<streamrt::Stream> bad(kStreams);  // new streams, each
  std::vector<streamrt::Stream> good(kStreams);
  std::atomic<int> good_count{0};
  for (int i = 0; i < 20; ++i) {
    for (int k = 0; k < kStreams; ++k) {
      bad[k].launch([] { throw TestFailure("boom-4"); });
      good[k].launch([&] { good_count.fetch_add(1); });
    }
  }
  for (auto& s : good) EXPECT_NO_THROW(s.synchronize());
  EXPECT_EQ(good_count.load(), 20 * kStreams);
  for (auto& s : bad) EXPECT_THROW(s.synchronize(), TestFailure);
  for (auto& s : bad) EXPECT_NO_THROW(s.synchronize());
}

TEST_P(Failures, DeviceSynchronizeRethrowsAndReportsOnce) {
  streamrt::Stream s;
  s.launch([] { throw TestFailure("boom-5"); });
  EXPECT_THROW(streamrt::synchronize(), TestFailure);
  EXPECT_NO_THROW(streamrt::synchronize());
  EXPECT_NO_THROW(s.synchronize());
}

TEST_P(Failures, WaitAllWaitsForEveryEventThenRethrowsTheFirstFailureInArgumentOrder) {
  struct Other : std::runtime_error {
    using std::runtime_error::runtime_error;
  };
  streamrt::Stream ok_stream;
  streamrt::Stream first_bad;
  streamrt::Stream second_bad;
  Gate g;
  std::atomic<bool> slow_done{false};
  ok_stream.launch([&] {
    g.wait();
    std::this_thread::sleep_for(5ms);
    slow_done = true;
  });
  first_bad.launch([] { throw TestFailure("first-in-order"); });
  second_bad.launch([] { throw Other("second-in-order"); });
  // The failure listed first wins, even though it is given after a clean, slower event.
  std::vector<streamrt::Event> events{ok_stream.record_event(), second_bad.record_event(),
                                      first_bad.record_event()};
  std::thread opener([&] {
    std::this_thread::sleep_for(5ms);
    g.open();
  });
  try {
    streamrt::wait_all(events);
    ADD_FAILURE() << "wait_all did not rethrow";
  } catch (const Other& e) {
    EXPECT_STREQ(e.what(), "second-in-order");
  } catch (...) {
    ADD_FAILURE() << "wait_all rethrew another failure than the first in argument order";
  }
  opener.join();
  EXPECT_TRUE(slow_done.load()) << "wait_all returned before every event completed";
  // Only the failure wait_all raised was reported; the other is still there for its stream.
  EXPECT_THROW(first_bad.synchronize(), TestFailure);
  EXPECT_NO_THROW(second_bad.synchronize());
  ok_stream.synchronize();
  std::vector<streamrt::Event> clean{ok_stream.record_event(), first_bad.record_event()};
  EXPECT_NO_THROW(streamrt::wait_all(clean));
}

// Rule 10: a failure raised by an event wait is reported like one raised by a stream sync.
TEST_P(Failures, AFailureRaisedByAnEventWaitLetsWorkSubmittedAfterItRun) {
  streamrt::Stream s;
  Gate g;
  std::atomic<bool> queued_before_ran{false};
  std::atomic<bool> after_ran{false};
  s.launch([] { throw TestFailure("boom-7"); });
  streamrt::Event failed = s.record_event();
  s.launch([&] {  // holds the stream busy, so the clearing point is queued, not immediate
    if (!g.wait()) fail_hard("never released");
  });
  s.launch([&] { queued_before_ran = true; });
  streamrt::Event before = s.record_event();
  EXPECT_THROW(failed.synchronize(), TestFailure);
  s.launch([&] { after_ran = true; });
  streamrt::Event after = s.record_event();
  g.open();
  EXPECT_NO_THROW(after.synchronize());
  EXPECT_TRUE(after_ran.load()) << "work submitted after the reporting wait was skipped";
  EXPECT_FALSE(queued_before_ran.load()) << "work submitted before the report ran";
  EXPECT_EQ(after.state(), streamrt::EventState::Complete);
  EXPECT_THROW(before.synchronize(), TestFailure);  // it still covers the failed position
  EXPECT_NO_THROW(s.synchronize());                 // nothing left to report
}

TEST_P(Failures, AnIdleStreamIsClearedAtOnceAndNothingIsPrintedAtTheEnd) {
  StderrCapture err;
  {
    streamrt::Stream s;
    s.launch([] { throw TestFailure("reported-once-8813"); });
    streamrt::Event e = s.record_event();
    EXPECT_THROW(e.synchronize(), TestFailure);
    std::atomic<bool> ran{false};
    s.launch([&] { ran = true; });
    EXPECT_NO_THROW(s.synchronize());
    EXPECT_TRUE(ran.load());
  }
  EXPECT_NO_THROW(streamrt::synchronize());
  EXPECT_EQ(err.text().find("reported-once-8813"), std::string::npos) << err.text();
}

TEST_P(Failures, AReportingWaitDoesNotClearALaterFailure) {
  streamrt::Stream s;
  Gate g;
  s.launch([] { throw TestFailure("first-failure"); });
  streamrt::Event first = s.record_event();
  EXPECT_THROW(s.synchronize(), TestFailure);  // reported and cleared by the stream itself
  s.launch([&] {
    if (!g.wait()) fail_hard("never released");
    throw TestFailure("second-failure");
  });
  // The old event raises the first failure again; it is not the stream's active one, so the
  // second failure must survive for the next sync.
  EXPECT_THROW(first.synchronize(), TestFailure);
  g.open();
  try {
    s.synchronize();
    ADD_FAILURE() << "the second failure was lost";
  } catch (const TestFailure& f) {
    EXPECT_STREQ(f.what(), "second-failure");
  }
}

TEST_P(Failures, AStreamrtErrorRaisedAgainSaysWhereAndWhatToDo) {
  streamrt::Stream s;
  s.launch([] { throw streamrt::Error("division by zero in test-kernel"); });
  streamrt::Event e = s.record_event();
  // The first time as raised, then said again with where it came from.
  EXPECT_EQ(error_of([&] { e.synchronize(); }), "division by zero in test-kernel");
  const std::string what = error_of([&] { e.synchronize(); });
  EXPECT_NE(what.find("division by zero in test-kernel"), std::string::npos) << what;
  EXPECT_NE(what.find("raised again"), std::string::npos) << what;
  EXPECT_NE(what.find(s.device().str() + " stream " + std::to_string(s.id())), std::string::npos)
      << what;
  EXPECT_NE(what.find("submit that work again"), std::string::npos) << what;
}

INSTANTIATE_TEST_SUITE_P(Workers, Failures, ::testing::Values(1, 2, 4, 8));

TEST(FailureReport, UnobservedFailureIsReportedOnStderrWhenTheStreamGoes) {
  StderrCapture err;
  {
    streamrt::Stream s;
    s.launch([] { throw TestFailure("unobserved-marker-5521"); });
    streamrt::Event e = s.record_event();
    // query() only looks; it does not observe the failure.
    ASSERT_TRUE(eventually([&] { return e.query(); }));
  }
  EXPECT_TRUE(err.wait_for_text("unobserved-marker-5521")) << err.text();
}

TEST(FailureReport, UnobservedNonStdFailureIsReportedToo) {
  StderrCapture err;
  {
    streamrt::Stream s;
    s.launch([] { throw NotStd{1}; });
    streamrt::Event e = s.record_event();
    ASSERT_TRUE(eventually([&] { return e.query(); }));
  }
  EXPECT_TRUE(err.wait_for_text("never reported")) << err.text();
}

}  // namespace
