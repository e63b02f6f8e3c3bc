// Failures that say where they came from: the error a wait raises names the failed work's label
// and, when a binding gave one, the source line that launched it; launch-blocking mode raises a
// failure at the launch itself.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "streamrt/impl/launch_site.hpp"
#include "streamrt/streamrt.hpp"
#include "test_util.hpp"

namespace {

using streamrt_test::error_of;
using streamrt_test::run_child;

// A user exception type: the runtime cannot re-word it and must keep its type and text.
struct UserFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(FailureSite, TheErrorRaisedBySynchronizeNamesTheFailedLabelAndStream) {
  streamrt::Stream s;
  s.launch("my_kernel", [] { throw streamrt::Error("boom"); });
  const std::string what = error_of([&] { s.synchronize(); });
  EXPECT_EQ(what.rfind("boom", 0), 0u) << what;  // the original text first
  EXPECT_TRUE(contains(what, "'my_kernel'")) << what;
  EXPECT_TRUE(contains(what, "cpu:0 stream " + std::to_string(s.id()))) << what;
}

TEST(FailureSite, AnOriginScopeNamesTheLineThatLaunched) {
  streamrt::Stream s;
  {
    const streamrt::impl::LaunchOriginScope origin("model.py:12");
    s.launch("my_kernel", [] { throw streamrt::Error("boom"); });
  }
  s.launch("later", [] {});  // outside the scope: carries no origin
  const std::string what = error_of([&] { s.synchronize(); });
  EXPECT_TRUE(contains(what, "'my_kernel', queued at model.py:12")) << what;
}

TEST(FailureSite, TheOriginRidesInTheLabelButTracesShowTheLabelAlone) {
  streamrt::Stream s;
  streamrt::Profiler prof;
  {
    const streamrt::ProfilerGuard on(prof);
    const streamrt::impl::LaunchOriginScope origin("model.py:12");
    s.launch("my_kernel", [] {});
    s.launch([] {});  // no label: traced as "launch", as without an origin
    s.synchronize();
  }
  std::vector<std::string> labels;
  for (const auto& r : prof.records()) labels.push_back(r.label);
  EXPECT_EQ(labels, (std::vector<std::string>{"my_kernel", "launch"}));
}

TEST(FailureSite, AnOpKernelFailureAtALaterWaitNamesTheOp) {
  streamrt::Stream s;
  streamrt::Tensor out;
  {
    const streamrt::StreamContext ctx(s);
    const auto a = streamrt::zeros({4});
    const auto index = streamrt::full({1}, 7, streamrt::DType::Int64);  // out of range
    out = streamrt::index_select(a, 0, index);
  }
  const std::string what = error_of([&] { s.synchronize(); });
  EXPECT_TRUE(contains(what, "out of range")) << what;
  EXPECT_TRUE(contains(what, "[failed work: 'index_select'")) << what;
}

TEST(FailureSite, ErrorsKeepTheirTypeAndOthersPassUnchanged) {
  streamrt::Stream s;
  s.launch("refused", [] { throw streamrt::ResourceUnavailable("no thread"); });
  try {
    s.synchronize();
    ADD_FAILURE() << "no failure raised";
  } catch (const streamrt::ResourceUnavailable& e) {
    EXPECT_TRUE(contains(e.what(), "'refused'")) << e.what();
  }
  s.launch("user", [] { throw UserFailure("mine"); });
  try {
    s.synchronize();
    ADD_FAILURE() << "no failure raised";
  } catch (const UserFailure& e) {
    EXPECT_STREQ(e.what(), "mine");
  }
}

// Launch-blocking mode for the whole test, restored after it.
class LaunchBlocking : public ::testing::Test {
 protected:
  void SetUp() override { streamrt::cpu::set_launch_blocking(true); }
  void TearDown() override { streamrt::cpu::set_launch_blocking(false); }
};

TEST_F(LaunchBlocking, AFailureIsRaisedByTheLaunchItself) {
  streamrt::Stream s;
  const std::string what =
      error_of([&] { s.launch("my_kernel", [] { throw streamrt::Error("boom"); }); });
  EXPECT_TRUE(contains(what, "boom")) << what;
  EXPECT_TRUE(contains(what, "'my_kernel'")) << what;
  // Raised there and cleared: the stream runs new work and its synchronize has nothing to say.
  EXPECT_TRUE(streamrt_test::runs_new_work(s));
}

TEST_F(LaunchBlocking, AnOpIsFinishedWhenItsCallReturnsAndItsFailureRaisedThere) {
  streamrt::Stream s;
  const streamrt::StreamContext ctx(s);
  int ran = 0;
  s.launch([&] { ++ran; });
  EXPECT_EQ(ran, 1);  // no wait in between: the launch waited
  const auto a = streamrt::zeros({4});
  const auto index = streamrt::full({1}, 7, streamrt::DType::Int64);
  const std::string what = error_of([&] { (void)streamrt::index_select(a, 0, index); });
  EXPECT_TRUE(contains(what, "'index_select'")) << what;
}

TEST_F(LaunchBlocking, LaunchesFromInsideStreamWorkDoNotWait) {
  streamrt::Stream s;
  int inner = 0;
  s.launch([&] {
    // Waiting here for the stream running this item would never end.
    s.launch([&] { ++inner; });
  });
  s.synchronize();
  EXPECT_EQ(inner, 1);
}

TEST(LaunchBlockingEnvironment, VariableTurnsItOnAndBadValuesAreAClearError) {
  const std::string child = std::string(STREAMRT_TEST_CHILD) + " launch-blocking";
  const auto on = run_child("STREAMRT_LAUNCH_BLOCKING=1 timeout 120 " + child);
  EXPECT_EQ(on.status, 0) << on.output;
  EXPECT_TRUE(contains(on.output, "launch_blocking=1 raised_at_launch=1\n")) << on.output;
  const auto off = run_child("STREAMRT_LAUNCH_BLOCKING=0 timeout 120 " + child);
  EXPECT_EQ(off.status, 0) << off.output;
  EXPECT_TRUE(contains(off.output, "launch_blocking=0 raised_at_launch=0\n")) << off.output;
  for (const char* bad : {"yes", "2", "on"}) {
    streamrt_test::expect_bad_setting("STREAMRT_LAUNCH_BLOCKING", bad, child);
  }
}

}  // namespace
