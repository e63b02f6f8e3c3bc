// Host-run items (docs/design.md, "Host-run items"): a host thread that waits for a stream without
// a time-out runs the stream's ready items itself when no worker runs them, in order, with the
// stream as the current stream, failures handled as on a worker, and self-synchronize still an
// error. The one worker is held by another stream in these tests, so only the waiting thread can
// run the items; a watchdog frees the worker if the host does not, and the test then fails
// (instead of hanging) because the items ran on the worker.
#include <gtest/gtest.h>

#include <atomic>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "streamrt/streamrt.hpp"
#include "test_util.hpp"

namespace {

using namespace std::chrono_literals;
using streamrt_test::Gate;
using streamrt_test::ThreadCount;

// One worker, held by an item of another stream until release() (or the watchdog's time-out).
class HostRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    threads_.emplace(1);
    streamrt_test::occupy_worker(holder_, hold_);
    watchdog_ = std::thread([this] {
      if (!done_.wait(watchdog_after())) hold_.open();
    });
  }
  void TearDown() override {
    done_.open();
    hold_.open();
    watchdog_.join();
    holder_.synchronize();
    threads_.reset();
  }
  // The held worker is freed after this even if the host ran nothing.
  virtual std::chrono::nanoseconds watchdog_after() const { return streamrt_test::kTimeout; }
  void release() { hold_.open(); }

  Gate done_;

 private:
  std::optional<ThreadCount> threads_;
  streamrt::Stream holder_;
  Gate hold_;
  std::thread watchdog_;
};

#define SKIP_UNLESS_HOST_RUN(s)                                                        \
  if (!(s).host_run())                                                                 \
  GTEST_SKIP() << "host-run items are off in this process (STREAMRT_HOST_RUN=0, or a " \
                  "STREAMRT_SCHEDULE fuzzer, which decides every pick itself)"

TEST_F(HostRunTest, SynchronizeRunsTheItemsOnTheWaitingThreadInOrderOnTheirStream) {
  streamrt::Stream s;
  SKIP_UNLESS_HOST_RUN(s);
  const auto me = std::this_thread::get_id();
  std::vector<int> order;
  int on_host = 0, right_stream = 0;
  for (int i = 0; i < 20; ++i) {
    s.launch([&, i] {
      order.push_back(i);
      if (std::this_thread::get_id() == me) ++on_host;
      if (streamrt::current_stream() == s) ++right_stream;
    });
  }
  s.synchronize();
  std::vector<int> expected(20);
  for (int i = 0; i < 20; ++i) expected[static_cast<std::size_t>(i)] = i;
  EXPECT_EQ(order, expected);
  EXPECT_EQ(on_host, 20) << "the worker was held: only the synchronizing thread could run them";
  EXPECT_EQ(right_stream, 20) << "current_stream() inside a host-run item is its stream";
  EXPECT_EQ(streamrt::current_stream(), streamrt::default_stream()) << "restored afterwards";
}

TEST_F(HostRunTest, AHostRunItemIsNotOnAWorkerThread) {
  // What a library with per-thread settings asks to give a host thread its own back.
  streamrt::Stream s;
  SKIP_UNLESS_HOST_RUN(s);
  const auto me = std::this_thread::get_id();
  std::thread::id ran_on;
  bool on_worker = true;
  s.launch([&] {
    ran_on = std::this_thread::get_id();
    on_worker = streamrt::cpu::on_worker_thread();
  });
  s.synchronize();
  ASSERT_EQ(ran_on, me);
  EXPECT_FALSE(on_worker);
}

TEST_F(HostRunTest, EventSynchronizeRunsTheRecordingStreamsItems) {
  streamrt::Stream s;
  SKIP_UNLESS_HOST_RUN(s);
  const auto me = std::this_thread::get_id();
  std::thread::id ran_on;
  s.launch([&] { ran_on = std::this_thread::get_id(); });
  streamrt::Event e = s.record_event();
  e.synchronize();
  EXPECT_EQ(ran_on, me);
}

TEST_F(HostRunTest, AFailureOnTheHostIsHandledAsOnAWorker) {
  streamrt::Stream s;
  SKIP_UNLESS_HOST_RUN(s);
  bool first = false, skipped_ran = false, after = false;
  s.launch([&] { first = true; });
  s.launch([] { throw std::runtime_error("host-run-failure"); });
  s.launch([&] { skipped_ran = true; });
  streamrt::Event e = s.record_event();
  try {
    s.synchronize();
    ADD_FAILURE() << "the failure was not reported";
  } catch (const std::runtime_error& ex) {
    EXPECT_STREQ(ex.what(), "host-run-failure");
  }
  EXPECT_TRUE(first);
  EXPECT_FALSE(skipped_ran) << "work after a failure is skipped, also on the host";
  EXPECT_EQ(e.state(), streamrt::EventState::Failed);
  s.launch([&] { after = true; });
  EXPECT_NO_THROW(s.synchronize());  // reported once; the stream runs new work again
  EXPECT_TRUE(after);
}

TEST_F(HostRunTest, SelfSynchronizeFromAHostRunItemIsStillAnError) {
  streamrt::Stream s;
  SKIP_UNLESS_HOST_RUN(s);
  const auto me = std::this_thread::get_id();
  std::string msg = "<no error>";
  std::thread::id ran_on;
  s.launch([&] {
    ran_on = std::this_thread::get_id();
    try {
      s.synchronize();
    } catch (const streamrt::Error& ex) {
      msg = ex.what();
    }
  });
  s.synchronize();
  EXPECT_EQ(ran_on, me);
  EXPECT_NE(msg.find("deadlock"), std::string::npos) << msg;
}

TEST_F(HostRunTest, WaitsWithATimeOutRunNothing) {
  streamrt::Stream s;
  SKIP_UNLESS_HOST_RUN(s);
  std::atomic<bool> ran{false};
  s.launch([&] { ran = true; });
  EXPECT_FALSE(s.synchronize_for(20ms)) << "the only worker is held";
  EXPECT_FALSE(s.record_event().wait_for(20ms));
  EXPECT_FALSE(ran.load()) << "a timed wait ran an item: it could outlast the deadline";
  release();
  s.synchronize();
  EXPECT_TRUE(ran.load());
}

// A host that leaves its stream to the workers because a more urgent stream waits for one parks;
// once the worker has taken the urgent stream (and stays in it), nothing else will run the host's
// stream, so the host must look again by itself and run it. Whether the host is parked when the
// worker is freed or still on its way there, it must end up running its items.
TEST_F(HostRunTest, AHostThatDeferredToAMoreUrgentStreamRunsItsItemsOnceThatOneHasAWorker) {
  streamrt::Stream s;
  SKIP_UNLESS_HOST_RUN(s);
  streamrt::Stream urgent({}, streamrt::Stream::priority_range().second);
  ASSERT_LT(urgent.priority(), s.priority());
  Gate urgent_open;
  urgent.launch([&] { urgent_open.wait(); });  // holds the worker once it takes this stream
  const auto me = std::this_thread::get_id();
  std::atomic<int> on_host{0};
  for (int i = 0; i < 4; ++i) {
    s.launch([&] {
      if (std::this_thread::get_id() == me) on_host.fetch_add(1);
    });
  }
  std::thread freer([this] {
    std::this_thread::sleep_for(20ms);  // mostly after the host parked; either order must pass
    release();
  });
  s.synchronize();
  urgent_open.open();
  freer.join();
  urgent.synchronize();
  EXPECT_EQ(on_host.load(), 4) << "the host stayed parked while its stream sat in the ready queue "
                                  "behind a worker held by the urgent stream";
}

class HostRunOffTest : public HostRunTest {
 protected:
  // The host runs nothing here, so the worker is freed soon.
  std::chrono::nanoseconds watchdog_after() const override { return 50ms; }
};

TEST_F(HostRunOffTest, OffForAStreamKeepsItsItemsOnWorkers) {
  streamrt::Stream s;
  s.set_host_run(false);
  EXPECT_FALSE(s.host_run());
  const auto me = std::this_thread::get_id();
  std::thread::id ran_on = me;
  s.launch([&] { ran_on = std::this_thread::get_id(); });
  s.synchronize();  // waits for the worker (freed by the watchdog)
  EXPECT_NE(ran_on, me) << "a stream with host-run off ran an item on the waiting thread";
  s.set_host_run(true);
  EXPECT_TRUE(s.host_run());
}

TEST(HostRunEnv, SwitchedOffByTheEnvironmentAndBadValuesAreAClearError) {
  const auto on = streamrt_test::run_child(std::string("env -u STREAMRT_SCHEDULE ") +
                                           STREAMRT_TEST_CHILD + " host-run");
  EXPECT_EQ(on.status, 0) << on.output;
  EXPECT_NE(on.output.find("host_run=1 ran_on_host=1"), std::string::npos) << on.output;
  const auto off =
      streamrt_test::run_child(std::string("env -u STREAMRT_SCHEDULE STREAMRT_HOST_RUN=0 ") +
                               STREAMRT_TEST_CHILD + " host-run");
  EXPECT_EQ(off.status, 0) << off.output;
  EXPECT_NE(off.output.find("host_run=0 ran_on_host=0"), std::string::npos) << off.output;
  const auto bad = streamrt_test::run_child(std::string("STREAMRT_HOST_RUN=yes ") +
                                            STREAMRT_TEST_CHILD + " host-run");
  // The child makes a stream in static storage, so the error surfaces before main (as an
  // uncaught streamrt::Error); what matters is that it names the variable and the values.
  EXPECT_NE(bad.status, 0) << bad.output;
  EXPECT_NE(bad.output.find("STREAMRT_HOST_RUN='yes' is not a switch: use 0"), std::string::npos)
      << bad.output;
}

}  // namespace
