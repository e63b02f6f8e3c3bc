// Automatic dependency tracking: cross-stream results are right with no manual sync, the host is
// never blocked by it, and independent work on two streams still runs at the same time.
#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "ops_test_util.hpp"
#include "streamrt/streamrt.hpp"

namespace streamrt {
namespace {

using test::Gate;
using test::Rendezvous;
using test::to_vector;

class Tracking : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override { cpu::set_num_threads(GetParam()); }
  test::ThreadCountGuard guard_;
};

// Rendezvous of two streams need two workers: these run at 2, 4 and 8.
class TrackingOverlap : public Tracking {
 protected:
  void SetUp() override {
    STREAMRT_SKIP_UNDER_SERIAL_SCHEDULE();
    Tracking::SetUp();
  }
};

// Read after write on another stream: the consumer waits for the producer (which is held back
// by a gate, so without tracking the consumer would deterministically read the old zeros).
TEST_P(Tracking, ReadAfterWriteAcrossStreams) {
  Stream s1, s2;
  Tensor a = zeros({1000});
  a.wait();
  Gate gate;
  gate.hold(s1);
  Tensor b;
  {
    StreamContext ctx(s1);
    a.fill_(5.0);  // behind the gate
  }
  {
    StreamContext ctx(s2);
    b = a + 1.0;  // must wait for the fill; the call itself returns at once
  }
  EXPECT_FALSE(b.ready());
  gate.open();
  EXPECT_EQ(to_vector(b), std::vector<double>(1000, 6.0));
  EXPECT_FALSE(gate.timed_out());
}

// Write after read: a writer on another stream waits until the reader has read.
TEST_P(Tracking, WriteAfterReadAcrossStreams) {
  Stream s1, s2;
  Tensor a = full({512}, 2.0);
  Gate gate;
  gate.hold(s1);
  Tensor c;
  {
    StreamContext ctx(s1);
    c = a * 10.0;  // reads a, behind the gate
  }
  {
    StreamContext ctx(s2);
    a.fill_(9.0);  // must not overwrite a before s1 read it
  }
  gate.open();
  EXPECT_EQ(to_vector(c), std::vector<double>(512, 20.0));
  EXPECT_EQ(to_vector(a), std::vector<double>(512, 9.0));
  EXPECT_FALSE(gate.timed_out());
}

// Write after write: the later submission wins.
TEST_P(Tracking, WriteAfterWriteAcrossStreams) {
  Stream s1, s2;
  Tensor a = zeros({64});
  Gate gate;
  gate.hold(s1);
  {
    StreamContext ctx(s1);
    a.fill_(1.0);
  }
  {
    StreamContext ctx(s2);
    a.fill_(2.0);
  }
  gate.open();
  EXPECT_EQ(to_vector(a), std::vector<double>(64, 2.0));
  EXPECT_FALSE(gate.timed_out());
}

// A chain across three streams with matmuls, checked against the same chain on one stream.
TEST_P(Tracking, ChainAcrossStreamsMatchesSingleStream) {
  Stream s1, s2, s3;
  Tensor x, y, z, total;
  {
    StreamContext ctx(s1);
    x = randn({96, 80}, 1);
  }
  {
    StreamContext ctx(s2);
    y = matmul(x, randn({80, 70}, 2));
  }
  {
    StreamContext ctx(s3);
    z = relu(y) * 2.0;
    total = sum(z);
  }
  Tensor ref = relu(matmul(randn({96, 80}, 1), randn({80, 70}, 2))) * 2.0;
  EXPECT_TRUE(equal(z, ref));
  EXPECT_EQ(total.item<float>(), sum(ref).item<float>());
}

// The proof that tracking does not serialise independent work: stream 1 queues a rendezvous and
// then an op reading the shared input X; stream 2 queues an op reading X and then the rendezvous.
// Read-read needs no wait, so stream 2 reaches its rendezvous while stream 1 is in its own. If
// tracking made stream 2 wait for stream 1's read (or for stream 1 as a whole), stream 2's
// rendezvous would come after stream 1's and the two would never meet.
TEST_P(TrackingOverlap, IndependentWorkStillOverlaps) {
  for (int round = 0; round < 10; ++round) {
    Stream s1, s2;
    Tensor x = randn({128, 128}, 3);  // written on the default stream, read by both
    auto meet = std::make_shared<Rendezvous>(2);
    auto met1 = std::make_shared<std::atomic<bool>>(false);
    auto met2 = std::make_shared<std::atomic<bool>>(false);
    Tensor y1, y2, z1, z2;
    {
      StreamContext ctx(s1);
      Tensor w1 = ones({128, 128});  // own tensor
      s1.launch("rendezvous", [meet, met1] { met1->store(meet->arrive()); });
      y1 = matmul(x, w1);  // reads x after the rendezvous
      z1 = y1 + x;
    }
    {
      StreamContext ctx(s2);
      y2 = x * 3.0;  // reads x before the rendezvous
      s2.launch("rendezvous", [meet, met2] { met2->store(meet->arrive()); });
      z2 = y2 - x;
    }
    s1.synchronize();
    s2.synchronize();
    ASSERT_TRUE(met1->load() && met2->load())
        << "the two streams did not run at the same time: tracking serialised them";
    EXPECT_TRUE(allclose(z2, x * 2.0));
    EXPECT_TRUE(allclose(z1, matmul(x, ones({128, 128})) + x));
  }
}

// Two streams producing into different tensors from a common input, plus a consumer of both:
// overlap (rendezvous inside both producers) and the right join.
TEST_P(TrackingOverlap, ForkJoinOverlapsAndJoins) {
  Stream s1, s2, s3;
  Tensor x = rand({200, 200}, 4);
  auto meet = std::make_shared<Rendezvous>(2);
  std::atomic<int> met{0};
  Tensor a, b, c;
  {
    StreamContext ctx(s1);
    a = x * 2.0;
    s1.launch("rendezvous", [meet, &met] { met += meet->arrive() ? 1 : 0; });
  }
  {
    StreamContext ctx(s2);
    b = x + 1.0;
    s2.launch("rendezvous", [meet, &met] { met += meet->arrive() ? 1 : 0; });
  }
  {
    StreamContext ctx(s3);
    c = a + b;  // waits for both producers
  }
  EXPECT_TRUE(allclose(c, x * 3.0 + 1.0));
  s1.synchronize();
  s2.synchronize();
  EXPECT_EQ(met.load(), 2);
}

// Tracking off: CUDA-style manual ordering. The consumer does not wait (it reads the old zeros
// while the producer is held), and an explicit wait_event restores the order.
// (Needs two workers: stream 2 runs while stream 1 holds one at its gate.)
TEST_P(TrackingOverlap, OffMeansManualOrdering) {
  Stream s1, s2;
  Tensor a = zeros({100});
  a.wait();
  Gate gate;
  gate.hold(s1);
  Tensor unordered, ordered;
  {
    DependencyTrackingGuard off(false);
    EXPECT_FALSE(dependency_tracking());
    {
      StreamContext ctx(s1);
      a.fill_(5.0);
    }
    Event filled = s1.record_event();
    {
      StreamContext ctx(s2);
      unordered = a + 1.0;  // no wait: runs at once on the old zeros
      unordered.wait();     // not tracked either: returns at once
      s2.synchronize();
      s2.wait_event(filled);  // manual ordering, as with CUDA
      ordered = a + 1.0;
    }
  }
  EXPECT_TRUE(dependency_tracking());
  EXPECT_EQ(to_vector(unordered), std::vector<double>(100, 1.0));
  gate.open();
  s2.synchronize();
  EXPECT_EQ(to_vector(ordered), std::vector<double>(100, 6.0));
  EXPECT_FALSE(gate.timed_out());
}

TEST(TrackingSwitch, GuardNestsIsPerThreadAndGlobalDefaultApplies) {
  EXPECT_TRUE(dependency_tracking());
  {
    DependencyTrackingGuard off(false);
    EXPECT_FALSE(dependency_tracking());
    {
      DependencyTrackingGuard on(true);
      EXPECT_TRUE(dependency_tracking());
    }
    EXPECT_FALSE(dependency_tracking());
    bool other = false;
    std::thread([&] { other = dependency_tracking(); }).join();
    EXPECT_TRUE(other) << "the guard leaked to another thread";
  }
  EXPECT_TRUE(dependency_tracking());
  set_dependency_tracking(false);
  bool other = true;
  std::thread([&] { other = dependency_tracking(); }).join();
  EXPECT_FALSE(other);
  {
    DependencyTrackingGuard on(true);
    EXPECT_TRUE(dependency_tracking());
  }
  set_dependency_tracking(true);
  EXPECT_TRUE(dependency_tracking());
}

// A failed producer fails its consumers on other streams (nothing runs on bad data).
TEST_P(Tracking, FailureFlowsToConsumersOnOtherStreams) {
  Stream s1, s2;
  Tensor bad;
  {
    StreamContext ctx(s1);
    bad = ones({4}, DType::Int64) / zeros({4}, DType::Int64);  // fails while running
  }
  Tensor consumer;
  {
    StreamContext ctx(s2);
    consumer = bad + 1.0;
  }
  EXPECT_THROW(consumer.data<std::int64_t>(), Error);
  EXPECT_NO_THROW(s2.synchronize());      // the read reported it on the consumer's stream (rule 10)
  EXPECT_THROW(s1.synchronize(), Error);  // still active where it happened
}

// Many host threads, each on its own stream, reading a shared tensor and writing their own.
TEST_P(Tracking, ConcurrentSubmissionFromManyThreads) {
  Tensor shared = arange(1000, DType::Float64);
  std::vector<std::thread> threads;
  std::vector<int> ok(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      Stream s;
      StreamContext ctx(s);
      Tensor acc = zeros({1000}, DType::Float64);
      for (int i = 0; i < 25; ++i) acc.copy_(acc + shared);
      const auto v = to_vector(acc);
      ok[static_cast<std::size_t>(t)] = 1;
      for (std::size_t j = 0; j < v.size(); ++j) {
        if (v[j] != 25.0 * static_cast<double>(j)) ok[static_cast<std::size_t>(t)] = 0;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(ok, std::vector<int>(4, 1));
}

// Two imports of one buffer (as a binding makes for memory another framework tracks): once the
// second shares the first's tracking, an op through one is ordered after a write through the other
// (read-after-write), a write waits for a read (write-after-read), and host reads wait. Without
// share_tracking the reader would run at once and see the old values.
TEST_P(Tracking, SharedTrackingOrdersTwoImportsOfOneBuffer) {
  std::vector<float> buffer(256, 1.0f);
  Tensor first = from_blob(buffer.data(), {256}, DType::Float32);
  Tensor second = from_blob(buffer.data(), {256}, DType::Float32);
  share_tracking(second, first);
  Stream s1, s2;
  Gate gate;
  gate.hold(s1);
  {
    StreamContext ctx(s1);
    first.fill_(5.0);  // behind the gate
  }
  Tensor read;
  {
    StreamContext ctx(s2);
    read = second + 1.0;  // waits for the fill through `first`
  }
  EXPECT_FALSE(second.ready());  // the host sees the pending write through the other import
  gate.open();
  EXPECT_EQ(to_vector(read), std::vector<double>(256, 6.0));
  EXPECT_EQ(second.data<float>()[0], 5.0f);

  // Write after read: a write through `first` on s2 waits for a read through `second` on s1.
  Gate gate2;
  gate2.hold(s1);
  Tensor copy;
  {
    StreamContext ctx(s1);
    copy = second.clone();  // behind the gate
  }
  {
    StreamContext ctx(s2);
    first.fill_(7.0);
  }
  gate2.open();
  EXPECT_EQ(to_vector(copy), std::vector<double>(256, 5.0));
  EXPECT_EQ(first.data<float>()[0], 7.0f);
}

TEST_P(Tracking, SharedTrackingIsTransitiveAndRefusesMisuse) {
  std::vector<double> buffer(16, 0.0);
  std::vector<double> other(16, 0.0);
  Tensor a = from_blob(buffer.data(), {16}, DType::Float64);
  Tensor b = from_blob(other.data(), {16}, DType::Float64);
  share_tracking(b, a);
  Tensor c = from_blob(other.data(), {4, 4}, DType::Float64);  // joins b's, so a's, at the wrap
  share_tracking(c, a);                                        // already so: no-op
  Stream s;
  Gate gate;
  gate.hold(s);
  {
    StreamContext ctx(s);
    a.fill_(3.0);
  }
  EXPECT_FALSE(b.ready());
  EXPECT_FALSE(c.ready());
  gate.open();
  EXPECT_EQ(b.data<double>()[15], 0.0);  // other memory: only the tracking is shared

  Tensor own = zeros({16}, DType::Float64);  // the allocator's memory
  EXPECT_THROW(share_tracking(own, a), Error);
  std::vector<double> third(16, 0.0), fourth(16, 0.0);
  Tensor used = from_blob(third.data(), {16}, DType::Float64);
  used.fill_(1.0);
  EXPECT_THROW(share_tracking(used, a), Error);  // has accesses of its own already
  Tensor d = from_blob(fourth.data(), {16}, DType::Float64);
  Tensor e = from_blob(fourth.data(), {16}, DType::Float64);  // joins d at the wrap
  EXPECT_THROW(share_tracking(d, a), Error);  // e records its accesses in d's tracking
  share_tracking(e, a);                       // e joins a's tracking too
  EXPECT_THROW(share_tracking(Tensor(), a), Error);
  used.wait();
}

INSTANTIATE_TEST_SUITE_P(Workers, Tracking, ::testing::ValuesIn(test::kWorkerCounts),
                         [](const auto& info) { return std::to_string(info.param) + "workers"; });
INSTANTIATE_TEST_SUITE_P(Workers, TrackingOverlap, ::testing::ValuesIn(test::kParallelWorkerCounts),
                         [](const auto& info) { return std::to_string(info.param) + "workers"; });

}  // namespace
}  // namespace streamrt
