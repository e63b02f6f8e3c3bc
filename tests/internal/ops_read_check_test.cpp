// The read checker: memory with a queued write is closed to host threads until the write has
// run, a host access to it is reported with the op and its stream, workers get their access back,
// and memory is open again once its write ran and someone touches it, or once its tensor goes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <vector>

#include "ops/read_check.hpp"
#include "ops_test_util.hpp"
#include "streamrt/streamrt.hpp"

namespace streamrt {
namespace {

using test::Gate;

constexpr std::size_t kPage = 4096;
constexpr std::size_t kPages = 4;
constexpr std::size_t kDoubles = kPages * kPage / sizeof(double);

// Page-aligned memory for tensors wrapped with from_blob, so that all of it can be protected.
struct Pages {
  Pages() : data(static_cast<double*>(std::aligned_alloc(kPage, kPages * kPage))) {
    for (std::size_t i = 0; i < kDoubles; ++i) data[i] = 0.0;
  }
  ~Pages() { std::free(data); }
  Pages(const Pages&) = delete;
  Pages& operator=(const Pages&) = delete;
  double* data;
};

// Whether the host can read `p` now, asked without faulting: the kernel copies from it into a
// pipe and answers EFAULT when the page is closed.
bool host_can_read(const void* p) {
  int fds[2];
  if (::pipe(fds) != 0) return false;
  const bool ok = ::write(fds[1], p, 1) == 1;
  ::close(fds[0]);
  ::close(fds[1]);
  return ok;
}

class ReadCheck : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    cpu::set_num_threads(GetParam());
    ops::read_check::set_enabled_for_testing(true);
  }
  void TearDown() override { ops::read_check::set_enabled_for_testing(false); }
  test::ThreadCountGuard guard_;
};

TEST_P(ReadCheck, MemoryWithAQueuedWriteIsClosedToTheHostUntilItRuns) {
  Pages pages;
  Tensor t = from_blob(pages.data, {static_cast<std::int64_t>(kDoubles)}, DType::Float64);
  Stream s;
  Gate gate;
  gate.hold(s);
  {
    StreamContext ctx(s);
    t.fill_(2.0);
  }
  EXPECT_FALSE(host_can_read(pages.data + kDoubles / 2)) << "the queued fill left it open";
  gate.open();
  s.synchronize();
  // The worker that ran the fill got its access back; the host reads the result.
  EXPECT_EQ(pages.data[kDoubles / 2], 2.0);
  EXPECT_TRUE(host_can_read(pages.data));
}

TEST_P(ReadCheck, WorkersRunQueuedWritesAndReadsOnCheckedMemory) {
  Pages pages;
  Tensor t = from_blob(pages.data, {static_cast<std::int64_t>(kDoubles)}, DType::Float64);
  Stream s1, s2;
  Gate gate;
  gate.hold(s1);
  Tensor sum;
  {
    StreamContext ctx(s1);
    sum = streamrt::sum(t);  // reads, held back by the gate
  }
  {
    StreamContext ctx(s2);
    for (int i = 0; i < 20; ++i) t.copy_(t + 1.0);  // waits for the read; closes the memory
  }
  gate.open();
  s1.synchronize();
  s2.synchronize();
  EXPECT_EQ(sum.item<double>(), 0.0);
  EXPECT_EQ(pages.data[kDoubles - 1], 20.0);
}

// Queues a fill of `t` on `s` behind a gate and cancels it: the memory stays closed, and the
// write it was closed for will never run.
void queue_cancelled_fill(Tensor& t, Stream& s) {
  Gate gate;
  gate.hold(s);
  {
    StreamContext ctx(s);
    t.fill_(1.0);
  }
  s.cancel();
  gate.open();
  try {
    s.synchronize();
  } catch (const Cancelled&) {
  }
}

TEST_P(ReadCheck, MemoryWhoseWriteWillNeverRunOpensOnTheFirstTouch) {
  Pages pages;
  Tensor t = from_blob(pages.data, {static_cast<std::int64_t>(kDoubles)}, DType::Float64);
  Stream s;
  queue_cancelled_fill(t, s);
  EXPECT_FALSE(host_can_read(pages.data + kDoubles - 1));
  EXPECT_EQ(pages.data[kDoubles - 1], 0.0);  // faults, and the handler opens the memory
  EXPECT_TRUE(host_can_read(pages.data));
}

TEST_P(ReadCheck, MemoryOpensWhenItsTensorGoes) {
  Pages pages;
  Stream s;
  {
    Tensor t = from_blob(pages.data, {static_cast<std::int64_t>(kDoubles)}, DType::Float64);
    queue_cancelled_fill(t, s);
    EXPECT_FALSE(host_can_read(pages.data));
  }
  EXPECT_TRUE(host_can_read(pages.data)) << "memory stayed closed after its last tensor went";
}

TEST_P(ReadCheck, AHostReadOfMemoryWithAQueuedWriteIsReported) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Pages pages;
  Tensor t = from_blob(pages.data, {static_cast<std::int64_t>(kDoubles)}, DType::Float64);
  Stream s;
  auto early_read = [&] {
    Gate gate;
    gate.hold(s);
    {
      StreamContext ctx(s);
      t.fill_(3.0);
    }
    volatile double seen = pages.data[kDoubles / 2];
    (void)seen;
    gate.open();
  };
  EXPECT_DEATH(early_read(),
               "read check: a host thread read memory that queued stream work has not written"
               "(.|\n)*float64 tensor of shape \\[2048\\](.|\n)*'fill' queued on cpu:0 stream");
}

INSTANTIATE_TEST_SUITE_P(Workers, ReadCheck, ::testing::Values(1, 2, 4, 8));

TEST(ReadCheckSetting, AValueThatIsNoSettingIsAnError) {
  ::setenv("STREAMRT_READ_CHECK", "yes", 1);
  try {
    ops::read_check::enabled_slow();
    ADD_FAILURE() << "STREAMRT_READ_CHECK=yes was taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("STREAMRT_READ_CHECK='yes' is not a setting"),
              std::string::npos)
        << e.what();
  }
  ::unsetenv("STREAMRT_READ_CHECK");
  EXPECT_FALSE(ops::read_check::enabled_slow());
}

}  // namespace
}  // namespace streamrt
