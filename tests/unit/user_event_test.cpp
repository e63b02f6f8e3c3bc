// UserEvent: positions the host completes (the primitive streamrt::mpi parks streams on).
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <vector>

#include "streamrt/streamrt.hpp"
#include "test_util.hpp"

namespace {

using namespace streamrt_test;
using streamrt::Error;
using streamrt::Event;
using streamrt::EventState;
using streamrt::Stream;
using streamrt::UserEvent;

std::string message_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    return ex.what();
  }
}

// The stream parked on the user event does not hold the only worker: the other stream's work
// runs meanwhile and completes the event. If the wait held the worker, B's item would never run
// and the synchronize_for below would time out.
TEST(UserEvent, ParkedStreamDoesNotHoldTheOnlyWorker) {
  ThreadCount one(1);
  UserEvent ue;
  Stream a, b;
  std::vector<int> order;
  std::mutex m;
  auto note = [&](int v) {
    std::lock_guard lock(m);
    order.push_back(v);
  };
  a.launch([&] { note(1); });
  a.wait_event(ue.event());
  a.launch([&] { note(3); });
  // A has started (and then parks at the wait); only then B's item is queued.
  ASSERT_TRUE(eventually([&] {
    std::lock_guard lock(m);
    return !order.empty();
  }));
  b.launch([&] {
    note(2);
    ue.complete();
  });
  ASSERT_TRUE(b.synchronize_for(kTimeout));
  ASSERT_TRUE(a.synchronize_for(kTimeout));
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
}

TEST(UserEvent, HostWaitsTimeOutUntilCompleted) {
  UserEvent ue;
  Event e = ue.event();
  EXPECT_FALSE(e.query());
  EXPECT_EQ(e.state(), EventState::Pending);
  EXPECT_FALSE(ue.completed());
  EXPECT_FALSE(e.wait_for(std::chrono::milliseconds(5)));
  Stream s;
  s.wait_event(e);
  EXPECT_FALSE(s.synchronize_for(std::chrono::milliseconds(5)));  // parked, and the host gives up
  std::thread t([&] { ue.complete(); });
  EXPECT_TRUE(e.wait_for(kTimeout));
  t.join();
  EXPECT_TRUE(ue.completed());
  EXPECT_TRUE(e.query());
  EXPECT_TRUE(s.synchronize_for(kTimeout));
  EXPECT_EQ(e.state(), EventState::Complete);
}

TEST(UserEvent, FailureIsInheritedByWaitingStreamsAndReportedOnce) {
  UserEvent ue;
  Stream s;
  std::atomic<bool> ran{false};
  s.wait_event(ue.event());
  s.launch([&] { ran = true; });
  ue.complete(std::make_exception_ptr(Error("transfer failed: peer went away")));
  try {
    s.synchronize();
    FAIL() << "synchronize did not report the user event's failure";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("peer went away"), std::string::npos);
  }
  EXPECT_FALSE(ran.load());  // skipped: nothing runs on the results of failed work
  EXPECT_EQ(ue.event().state(), EventState::Failed);
  EXPECT_THROW(ue.event().synchronize(), Error);
  s.launch([&] { ran = true; });  // reported: the stream runs new work again
  s.synchronize();
  EXPECT_TRUE(ran.load());
}

TEST(UserEvent, CompletingTwiceIsAnError) {
  UserEvent ue;
  ue.complete();
  try {
    ue.complete();
    FAIL() << "a second complete() was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("already completed"), std::string::npos);
  }
}

TEST(UserEvent, DroppedWithoutCompleteFailsItsWaitersInsteadOfHanging) {
  Stream s;
  Event e;
  {
    UserEvent ue;
    e = ue.event();
    s.wait_event(e);
  }
  try {
    ASSERT_TRUE(s.synchronize_for(kTimeout));
    FAIL() << "the waiting stream did not fail";
  } catch (const Error& ex) {
    EXPECT_NE(std::string(ex.what()).find("without complete()"), std::string::npos) << ex.what();
  }
}

TEST(UserEvent, CallbacksRunAfterCompletionWithTheFailure) {
  UserEvent ue;
  Gate called;
  std::string seen;
  ue.event().on_complete([&](std::exception_ptr f) {
    seen = f ? message_of(f) : "none";
    called.open();
  });
  EXPECT_FALSE(called.is_open());
  ue.complete(std::make_exception_ptr(Error("boom")));
  ASSERT_TRUE(called.wait());
  EXPECT_EQ(seen, "boom");
}

}  // namespace
