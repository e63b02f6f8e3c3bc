// Memory reached twice: tensors wrapped over overlapping memory, from any start address, and
// wraps of memory the allocator exposed, are ordered as one storage (read after write, write
// after write, host reads), while memory handed out afresh does not inherit what stood there.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <vector>

#include "ops_test_util.hpp"
#include "streamrt/streamrt.hpp"

namespace streamrt {
namespace {

using test::Gate;
using test::to_vector;

class Aliasing : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override { cpu::set_num_threads(GetParam()); }
  test::ThreadCountGuard guard_;
};

// Two gates held at once, one opened while the other holds its worker: at 2, 4 and 8 workers.
class AliasingTwoGates : public Aliasing {
 protected:
  void SetUp() override {
    STREAMRT_SKIP_UNDER_SERIAL_SCHEDULE();
    Aliasing::SetUp();
  }
};

// Read after write: the reader's wrap starts inside the writer's, so only tracking by memory
// range (not by start address) makes the reader wait for the fill held back by the gate.
TEST_P(Aliasing, AWrapStartingInsideAnotherReadsAfterItsWriter) {
  std::vector<double> buffer(16, 0.0);
  Tensor whole = from_blob(buffer.data(), {16}, DType::Float64);
  Tensor tail = from_blob(buffer.data() + 4, {12}, DType::Float64);
  Stream s1, s2;
  Gate gate;
  gate.hold(s1);
  Tensor out;
  {
    StreamContext ctx(s1);
    whole.fill_(5.0);
  }
  {
    StreamContext ctx(s2);
    out = tail + 1.0;
  }
  EXPECT_FALSE(out.ready());
  EXPECT_FALSE(tail.ready()) << "a host read of the tail would not wait for the fill";
  gate.open();
  EXPECT_EQ(to_vector(out), std::vector<double>(12, 6.0));
}

// Write after write: the second fill (on another stream, through the tail) waits for the first
// and lands last. Its own stream is free (gate2 opened), so without the wait it would run at once.
TEST_P(Aliasing, OverlappingWritesLandInIssueOrder) {
  std::vector<double> buffer(8, 0.0);
  Tensor whole = from_blob(buffer.data(), {8}, DType::Float64);
  Tensor tail = from_blob(buffer.data() + 4, {4}, DType::Float64);
  Stream s1, s2;
  Gate gate1, gate2;
  gate1.hold(s1);
  gate2.hold(s2);
  {
    StreamContext ctx(s1);
    whole.fill_(1.0);
  }
  {
    StreamContext ctx(s2);
    tail.fill_(2.0);
  }
  gate2.open();
  // With the wait, the tail's fill cannot finish while gate1 holds the first fill back.
  EXPECT_FALSE(tail.wait_for(std::chrono::milliseconds(200)));
  gate1.open();
  s1.synchronize();
  s2.synchronize();
  EXPECT_EQ(buffer, (std::vector<double>{1, 1, 1, 1, 2, 2, 2, 2}));
}

// A wrap over two buffers wrapped apart joins both: its reader waits for each writer.
TEST_P(AliasingTwoGates, AWrapOverTwoSeparateWrapsWaitsForBoth) {
  std::vector<double> buffer(16, 0.0);
  Tensor lo = from_blob(buffer.data(), {8}, DType::Float64);
  Tensor hi = from_blob(buffer.data() + 8, {8}, DType::Float64);
  Stream s1, s2, s3;
  Gate gate1, gate2;
  gate1.hold(s1);
  gate2.hold(s2);
  {
    StreamContext ctx(s1);
    lo.fill_(1.0);
  }
  {
    StreamContext ctx(s2);
    hi.fill_(2.0);
  }
  Tensor whole = from_blob(buffer.data(), {16}, DType::Float64);
  Tensor out;
  {
    StreamContext ctx(s3);
    out = whole + 0.0;
  }
  gate1.open();
  lo.wait();
  EXPECT_FALSE(out.ready()) << "the reader did not wait for the second buffer's writer";
  gate2.open();
  std::vector<double> expected(8, 1.0);
  expected.resize(16, 2.0);
  EXPECT_EQ(to_vector(out), expected);
}

// The allocator's memory, once exposed (as the numpy and DLPack exports do), is joined by wraps.
TEST_P(Aliasing, AWrapOfExposedMemoryReadsAfterItsWriter) {
  Tensor x = zeros({16}, DType::Float64);
  auto* data = static_cast<double*>(x.data_ptr());  // waits for the zeros
  expose_memory(x);
  Tensor alias = from_blob(data + 2, {14}, DType::Float64);
  Stream s1, s2;
  Gate gate;
  gate.hold(s1);
  {
    StreamContext ctx(s1);
    x.fill_(3.0);
  }
  Tensor out;
  {
    StreamContext ctx(s2);
    out = alias + 1.0;
  }
  EXPECT_FALSE(out.ready());
  gate.open();
  EXPECT_EQ(to_vector(out), std::vector<double>(14, 4.0));
}

// Memory claimed as newly allocated does not join what was wrapped there before (whose memory
// is gone): it does not inherit that wrap's failed write, and later wraps join it instead.
TEST_P(Aliasing, ClaimedMemoryStartsItsOwnTracking) {
  std::vector<double> buffer(8, 0.0);
  Tensor stale = from_blob(buffer.data(), {8}, DType::Float64);
  Stream s1;
  const Tensor* writes[] = {&stale};
  enqueue_tracked(s1, "fails", {}, writes,
                  [](Stream& s) { s.launch([] { throw Error("the old write failed"); }); });
  EXPECT_THROW(s1.synchronize(), Error);
  claim_memory(buffer.data(), sizeof(double) * buffer.size());
  Tensor fresh = from_blob(buffer.data(), {8}, DType::Float64);
  Tensor later = from_blob(buffer.data() + 4, {4}, DType::Float64);
  Stream s2;
  {
    StreamContext ctx(s2);
    fresh.fill_(1.0);
    later.copy_(later + 1.0);
  }
  EXPECT_NO_THROW(s2.synchronize());
  EXPECT_EQ(buffer, (std::vector<double>{1, 1, 1, 1, 2, 2, 2, 2}));
  EXPECT_THROW(stale.wait(), Error);  // the stale wrap still reports its own failure
}

TEST_P(Aliasing, ReleasedAndDestroyedWrapsAreNotJoined) {
  std::vector<double> buffer(8, 0.0);
  EXPECT_FALSE(memory_tracked(buffer.data(), sizeof(double) * 8));
  {
    Tensor a = from_blob(buffer.data(), {8}, DType::Float64);
    EXPECT_TRUE(memory_tracked(buffer.data() + 7, sizeof(double)));
    EXPECT_FALSE(memory_tracked(buffer.data() + 8, sizeof(double)));
    release_memory(a);
    EXPECT_FALSE(memory_tracked(buffer.data(), sizeof(double) * 8));
  }
  Tensor b = from_blob(buffer.data(), {8}, DType::Float64);
  EXPECT_TRUE(memory_tracked(buffer.data(), 1));
  b = Tensor();
  EXPECT_FALSE(memory_tracked(buffer.data(), sizeof(double) * 8));
}

// Past the most buffers one wrap can join, the wrap is refused, and its memory stays the caller's.
TEST_P(Aliasing, AWrapOverTooManySeparateWrapsIsRefused) {
  std::vector<double> buffer(16, 0.0);
  std::vector<Tensor> pieces;
  for (int i = 0; i < 5; ++i)
    pieces.push_back(from_blob(buffer.data() + 3 * i, {3}, DType::Float64));
  std::atomic<int> deleted{0};
  try {
    (void)from_blob(buffer.data(), {16}, DType::Float64, [&](void*) { deleted.fetch_add(1); });
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("wrap the whole buffer once"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(deleted.load(), 0);
  Tensor four = from_blob(buffer.data(), {12}, DType::Float64);  // four pieces: joined
  EXPECT_EQ(four.numel(), 12);
}

INSTANTIATE_TEST_SUITE_P(Workers, Aliasing, ::testing::ValuesIn(test::kWorkerCounts),
                         [](const auto& info) { return std::to_string(info.param) + "workers"; });
INSTANTIATE_TEST_SUITE_P(Workers, AliasingTwoGates,
                         ::testing::ValuesIn(test::kParallelWorkerCounts),
                         [](const auto& info) { return std::to_string(info.param) + "workers"; });

}  // namespace
}  // namespace streamrt
