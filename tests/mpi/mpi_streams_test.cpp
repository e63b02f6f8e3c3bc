// Communication as stream work: stream order with compute, parked streams that leave workers
// free, cross-stream waits, dependency tracking, failures and host time-outs.
#include <sched.h>
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "mpi/engine.hpp"
#include "mpi/shared_cores.hpp"
#include "mpi_util.hpp"

namespace {

using namespace streamrt_mpi_test;
using namespace streamrt_test;
using streamrt::Error;
using streamrt::Event;
using streamrt::Stream;
using streamrt::StreamContext;
using streamrt::Tensor;

// Ranks pair up (0,1), (2,3); with an odd count the last rank sits the test out.
struct Pair {
  bool active;
  bool first;
  int peer;
};
Pair pair_of(const Communicator& c) {
  const int r = c.rank();
  if (c.size() % 2 != 0 && r == c.size() - 1) return {false, false, -1};
  return {true, r % 2 == 0, r % 2 == 0 ? r + 1 : r - 1};
}

TEST(Streams, CommunicationIsOrderedWithComputeOnTheSameStream) {
  Communicator& c = world();
  Stream s;
  const std::size_t n = 4096;
  std::vector<float> buf(n, -1.0f), after(n, 0.0f);
  Gate go;
  // The fill runs late (after the gate opens); the all_reduce must still see its values, and the
  // copy after it must see the reduced ones.
  s.launch([&] {
    ASSERT_TRUE(go.wait());
    auto v = data_of<float>(c.rank(), n);
    std::memcpy(buf.data(), v.data(), n * sizeof(float));
  });
  c.all_reduce(buf.data(), buf.data(), n, DType::Float32, ReduceOp::Sum, s);
  s.launch([&] { std::memcpy(after.data(), buf.data(), n * sizeof(float)); });
  go.open();
  ASSERT_TRUE(s.synchronize_for(kTimeout));
  EXPECT_EQ(after, reduce_reference<float>(c.size(), n, ReduceOp::Sum));
}

// Rank "first" receives on stream A while its only worker must run stream B's compute, whose
// result the peer needs before it sends what A receives. If the receive held the worker (a
// blocking MPI_Recv inside stream work), B would never run and the ranks would deadlock: the
// synchronize_for below would time out.
TEST(Streams, InFlightCommunicationParksItsStreamNotTheWorker) {
  Communicator& c = world();
  const Pair p = pair_of(c);
  if (!p.active) GTEST_SKIP() << "no partner rank";
  ThreadCount one(1);
  Tensor x = streamrt::zeros({1}, DType::Int64);
  Tensor v = streamrt::zeros({1}, DType::Int64);
  x.wait();
  v.wait();
  if (p.first) {
    Stream a, b;
    c.recv(x, p.peer, 11, a);
    ASSERT_TRUE(eventually([] { return Communicator::in_flight() > 0; }));  // parked in MPI now
    {
      StreamContext ctx(b);
      v.fill_(42 + c.rank());
    }
    c.send(v, p.peer, 12, b);
    ASSERT_TRUE(b.synchronize_for(kTimeout));
    ASSERT_TRUE(a.synchronize_for(kTimeout)) << "the receive never completed";
    EXPECT_EQ(x.item<std::int64_t>(), 42 + c.rank() + 1000);
  } else {
    Stream s;
    c.recv(v, p.peer, 12, s);
    {
      StreamContext ctx(s);
      Tensor y = v + 1000.0;
      x.copy_(y);
    }
    c.send(x, p.peer, 11, s);
    ASSERT_TRUE(s.synchronize_for(kTimeout));
  }
}

// A large collective runs as a blocking MPI call on the communicator's own thread: its stream is
// parked, not a worker. With one worker (and no host running stream b's work), the partner
// enters the all_reduce only after stream b has run; if the all_reduce held the worker, b could
// not run and the all_reduce would never complete.
TEST(Streams, LargeCollectiveParksItsStreamNotTheWorker) {
  Communicator& c = world();
  const Pair p = pair_of(c);
  ThreadCount one(1);
  std::vector<float> big(1 << 18, static_cast<float>(c.rank() + 1));  // 1 MiB: the blocking form
  int go = 1;
  if (!p.active || p.first) {  // a rank without a partner just takes part
    Stream a, b;
    b.set_host_run(false);  // b's item must run on the one worker
    Event done = c.all_reduce(big.data(), big.data(), big.size(), DType::Float32, ReduceOp::Sum, a);
    b.launch([&] {
      if (p.active) MPI_Send(&go, 1, MPI_INT, p.peer, 51, MPI_COMM_WORLD);
    });
    ASSERT_TRUE(b.synchronize_for(kTimeout)) << "the all_reduce held the only worker";
    ASSERT_TRUE(done.wait_for(kTimeout));
  } else {
    Stream s;
    MPI_Recv(&go, 1, MPI_INT, p.peer, 51, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    c.all_reduce(big.data(), big.data(), big.size(), DType::Float32, ReduceOp::Sum, s);
    ASSERT_TRUE(s.synchronize_for(kTimeout));
  }
  const float sum = static_cast<float>(c.size() * (c.size() + 1) / 2);  // every rank's rank + 1
  EXPECT_EQ(big.front(), sum);
  EXPECT_EQ(big.back(), sum);
}

// Large (blocking, on the communicator's thread) and small (nonblocking) collectives alternate
// over two streams: each rank issues them to MPI in the same order, and each gets its own result.
TEST(Streams, LargeAndSmallCollectivesInterleaveOverTwoStreams) {
  Communicator& c = world();
  Stream a, b;
  constexpr int kRounds = 6;
  std::vector<std::vector<double>> bigs, smalls;
  for (int i = 0; i < kRounds; ++i) {
    bigs.emplace_back(1 << 15, (c.rank() + 1) * (i + 1));  // 256 KiB
    smalls.emplace_back(3, (c.rank() + 1) * (i + 100));
  }
  for (int i = 0; i < kRounds; ++i) {
    c.all_reduce(bigs[i].data(), bigs[i].data(), bigs[i].size(), DType::Float64, ReduceOp::Sum,
                 i % 2 == 0 ? a : b);
    c.all_reduce(smalls[i].data(), smalls[i].data(), smalls[i].size(), DType::Float64,
                 ReduceOp::Max, i % 2 == 0 ? b : a);
  }
  ASSERT_TRUE(a.synchronize_for(kTimeout));
  ASSERT_TRUE(b.synchronize_for(kTimeout));
  const double ranks_sum = c.size() * (c.size() + 1) / 2.0;
  for (int i = 0; i < kRounds; ++i) {
    EXPECT_EQ(bigs[i].front(), ranks_sum * (i + 1)) << i;
    EXPECT_EQ(bigs[i].back(), ranks_sum * (i + 1)) << i;
    EXPECT_EQ(smalls[i][2], static_cast<double>(c.size() * (i + 100))) << i;
  }
}

TEST(Streams, OtherStreamsWaitOnCommunicationEvents) {
  Communicator& c = world();
  const std::size_t n = 1000;
  std::vector<double> buf = data_of<double>(c.rank(), n), seen(n, 0.0);
  Stream comm_stream, consumer;
  Blocker late;
  late.launch_on(comm_stream);  // the all_reduce starts only after the consumer has its wait
  Event done = c.all_reduce(buf.data(), buf.data(), n, DType::Float64, ReduceOp::Sum, comm_stream);
  consumer.wait_event(done);
  consumer.launch([&] { seen = buf; });
  ASSERT_TRUE(late.started.wait());
  EXPECT_FALSE(done.query());
  late.release.open();
  ASSERT_TRUE(consumer.synchronize_for(kTimeout));
  EXPECT_TRUE(done.query());
  EXPECT_EQ(seen, reduce_reference<double>(c.size(), n, ReduceOp::Sum));
}

// Dependency tracking: the all_reduce of `grad` on the communication stream waits for the op on
// the compute stream that writes it; the op that reads it on a third stream waits for the
// all_reduce. Without tracking the all_reduce would reduce the zeros, and the reader would read
// before the reduction.
TEST(Streams, DependencyTrackingOrdersCommunicationWithOps) {
  Communicator& c = world();
  Tensor grad = streamrt::zeros({257});
  grad.wait();
  Stream compute, comm_stream, reader;
  Blocker late;
  late.launch_on(compute);
  {
    StreamContext ctx(compute);
    grad.fill_(c.rank() + 1);
  }
  c.all_reduce(grad, ReduceOp::Sum, comm_stream);
  Tensor doubled;
  {
    StreamContext ctx(reader);
    doubled = grad * 2.0;
  }
  ASSERT_TRUE(late.started.wait());
  late.release.open();
  const float sum = static_cast<float>(c.size() * (c.size() + 1) / 2);
  const float* d = doubled.data<float>();
  for (int i = 0; i < 257; ++i) ASSERT_EQ(d[i], 2 * sum) << i;
  // A host write waits for the all_reduce too (it reads and writes grad).
  EXPECT_EQ(grad.data<float>()[0], sum);
}

TEST(Streams, MismatchedSizesFailTheStreamWithMpisErrorAndTheOperation) {
  Communicator& c = world();
  const Pair p = pair_of(c);
  if (!p.active) GTEST_SKIP() << "no partner rank";
  Stream s;
  if (p.first) {
    Tensor big = streamrt::ones({16});
    Tensor small = streamrt::ones({4});
    c.send(big, p.peer, 31, s);
    c.send(small, p.peer, 32, s);
    ASSERT_TRUE(s.synchronize_for(kTimeout));
  } else {
    Tensor eight = streamrt::zeros({8});
    std::atomic<bool> ran{false};
    c.recv(eight, p.peer, 31, s);  // 64 bytes arrive for 32: MPI reports truncation
    s.launch([&] { ran = true; });
    const std::string msg = error_of([&] { s.synchronize(); });
    EXPECT_NE(msg.find("recv (8 x float32 from rank"), std::string::npos) << msg;
    EXPECT_NE(msg.find("MPI_ERR_TRUNCATE"), std::string::npos) << msg;
    EXPECT_NE(msg.find("different sizes or dtypes"), std::string::npos) << msg;
    EXPECT_FALSE(ran.load()) << "work after the failed receive must be skipped";
    // 16 bytes arrive for 32: MPI calls that a success; the size check names it.
    Tensor eight2 = streamrt::zeros({8});
    c.recv(eight2, p.peer, 32, s);
    const std::string short_msg = error_of([&] { s.synchronize(); });
    EXPECT_NE(short_msg.find("has 16 bytes but the receive expects exactly 32"), std::string::npos)
        << short_msg;
  }
  c.barrier(s);  // the stream runs again after the failure was reported
  ASSERT_TRUE(s.synchronize_for(kTimeout));
}

// Every rank's stream fails before an all_reduce, so every rank skips it: the skipped operation
// still takes its turn, so later operations on the communicator are not held up.
TEST(Streams, SkippedOperationsDoNotHoldUpLaterOnes) {
  Communicator& c = world();
  Stream s;
  std::vector<int> buf(5, c.rank() + 1);
  s.launch([] { throw Error("injected failure"); });
  c.all_reduce(buf.data(), buf.data(), buf.size(), DType::Int32, ReduceOp::Sum, s);
  EXPECT_NE(error_of([&] { s.synchronize(); }).find("injected failure"), std::string::npos);
  EXPECT_EQ(buf[0], c.rank() + 1) << "the skipped all_reduce ran";
  c.all_reduce(buf.data(), buf.data(), buf.size(), DType::Int32, ReduceOp::Sum, s);
  ASSERT_TRUE(s.synchronize_for(kTimeout));
  EXPECT_EQ(buf[0], c.size() * (c.size() + 1) / 2);
}

// A host wait with a time-out on a stream whose receive cannot complete yet returns false; the
// peer sends only after hearing (through a plain MPI message) that the wait has timed out.
TEST(Streams, SynchronizeForTimesOutWithCommunicationInFlight) {
  Communicator& c = world();
  const Pair p = pair_of(c);
  if (!p.active) GTEST_SKIP() << "no partner rank";
  Stream s;
  Tensor t = streamrt::zeros({3}, DType::Int32);
  t.wait();
  int go = 0;
  if (p.first) {
    Event e = c.recv(t, p.peer, 41, s);
    EXPECT_FALSE(s.synchronize_for(std::chrono::milliseconds(30)));
    EXPECT_FALSE(e.wait_for(std::chrono::milliseconds(1)));
    MPI_Send(&go, 1, MPI_INT, p.peer, 42, MPI_COMM_WORLD);
    ASSERT_TRUE(s.synchronize_for(kTimeout));
    EXPECT_EQ(t.data<std::int32_t>()[2], 7);
  } else {
    MPI_Recv(&go, 1, MPI_INT, p.peer, 42, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    {
      StreamContext ctx(s);
      t.fill_(7);
    }
    c.send(t, p.peer, 41, s);
    ASSERT_TRUE(s.synchronize_for(kTimeout));
  }
}

// Nothing in flight: the progress thread sleeps (idle <= 1 CPU ms/s; the bound here is generous
// for a shared machine, a spinning thread would use ~500 ms).
TEST(Streams, ProgressThreadIsIdleWhenNothingIsInFlight) {
  Communicator& c = world();
  c.barrier().synchronize();
  ASSERT_TRUE(eventually([] { return Communicator::in_flight() == 0; }));
  auto cpu_ms = [] {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e3 +
           (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e3;
  };
  const double before = cpu_ms();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_LT(cpu_ms() - before, 50.0);
  c.barrier().synchronize();
}

// Ranks that oversubscribe the machine's cores get short worker polls (a polling worker holds a
// core another rank needs); a user's STREAMRT_WORKER_SPIN_US is kept. On the test machines
// (2 cores, 2 or 4 ranks with their workers) the cores are oversubscribed.
TEST(Streams, OversubscribedRanksGetShortWorkerPolls) {
  using std::chrono::microseconds;
  const char* env = std::getenv("STREAMRT_WORKER_SPIN_US");
  if (env != nullptr && *env != '\0') GTEST_SKIP() << "STREAMRT_WORKER_SPIN_US is set";
  const microseconds saved = streamrt::cpu::worker_spin();
  streamrt::cpu::set_worker_spin(microseconds(50));
  const bool shared = streamrt::mpi::detail::cores_oversubscribed(MPI_COMM_WORLD);
  {
    Communicator c;  // collective: every rank makes it
    if (shared) {
      EXPECT_EQ(streamrt::cpu::worker_spin(),
                microseconds(streamrt::mpi::detail::kSharedCoresSpinUs));
    } else {
      EXPECT_EQ(streamrt::cpu::worker_spin(), microseconds(50));
    }
  }
  // Never raised: a shorter poll set by the user stays.
  streamrt::cpu::set_worker_spin(microseconds(1));
  { Communicator c; }
  EXPECT_EQ(streamrt::cpu::worker_spin(), microseconds(1));
  streamrt::cpu::set_worker_spin(saved);
}

// The woken worker that would preempt the host on a shared core runs under SCHED_BATCH instead
// (docs/distributed.md, "Ranks sharing cores"); with cores to spare nothing changes.
TEST(Streams, OversubscribedRanksRunWorkersUnderBatch) {
  const char* env = std::getenv("STREAMRT_WORKER_BATCH");
  if (env != nullptr && *env != '\0') GTEST_SKIP() << "STREAMRT_WORKER_BATCH is set";
  const bool saved = streamrt::cpu::worker_batch();
  streamrt::cpu::set_worker_batch(false);
  const bool shared = streamrt::mpi::detail::cores_oversubscribed(MPI_COMM_WORLD);
  {
    Communicator c;  // collective: every rank makes it
    EXPECT_EQ(streamrt::cpu::worker_batch(), shared);
    streamrt::Stream s;
    s.set_host_run(false);  // the item runs on a worker
    int policy = -1;
    s.launch([&] { policy = sched_getscheduler(0); });
    s.synchronize();
    EXPECT_EQ(policy, shared ? SCHED_BATCH : SCHED_OTHER);
  }
  streamrt::cpu::set_worker_batch(saved);
}

// Error messages name what the operation moves; the text is made only when a message is.
TEST(Streams, DescriptionsOfOperationsReadAsBefore) {
  using streamrt::DType;
  using streamrt::mpi::detail::Describe;
  EXPECT_EQ(Describe::reduction(1024, DType::Float32, "", "sum").str(), "1024 x float32, sum");
  EXPECT_EQ(Describe::of(8, DType::Float64, ", root ", 3).str(), "8 x float64, root 3");
  EXPECT_EQ(Describe::of(4, DType::Int32, " per rank").str(), "4 x int32 per rank");
  EXPECT_EQ(Describe::reduction(4, DType::Float32, " per rank", "max").str(),
            "4 x float32 per rank, max");
  EXPECT_EQ(Describe::of(2, DType::Int64, " per rank pair").str(), "2 x int64 per rank pair");
  EXPECT_EQ(Describe::of(8, DType::Float32, " to rank ", 1, 31).str(),
            "8 x float32 to rank 1, tag 31");
  EXPECT_EQ(Describe::of(8, DType::Float32, " from rank ", 0, 7).str(),
            "8 x float32 from rank 0, tag 7");
  EXPECT_EQ(Describe::none().str(), "no data");
}

}  // namespace
