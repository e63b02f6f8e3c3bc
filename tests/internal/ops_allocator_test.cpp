// The stream-ordered caching allocator: reuse, the stream-ordering rule (with its negative
// control: the same scenario with the rule switched off hands the block to a racing stream), the
// counters, empty_cache and the cache limit. Whitebox where it needs the test switch and the
// size-class helpers (src/ops/allocator.hpp).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <string>
#include <thread>

#include "ops/allocator.hpp"
#include "ops_test_util.hpp"
#include "streamrt/streamrt.hpp"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define STREAMRT_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define STREAMRT_TEST_SANITIZED 1
#endif
#endif

namespace streamrt {
namespace {

// 4 MiB of float32: a class of its own in these tests, and a huge-page sized block.
constexpr std::int64_t kN = std::int64_t{1} << 20;

// STREAMRT_TEST_ALLOCATOR_ORDERING=0 runs the ordering tests with the rule switched off, to show
// that they fail then (docs/ops.md quotes the output).
bool ordering_for_tests() {
  const char* v = std::getenv("STREAMRT_TEST_ALLOCATOR_ORDERING");
  return v == nullptr || std::string(v) != "0";
}

// The negative controls make a real data race on purpose; ThreadSanitizer would (rightly) report
// it.
#if defined(__SANITIZE_THREAD__)
#define STREAMRT_TEST_UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define STREAMRT_TEST_UNDER_TSAN 1
#endif
#endif
#ifndef STREAMRT_TEST_UNDER_TSAN
#define STREAMRT_TEST_UNDER_TSAN 0
#endif
#define SKIP_UNDER_TSAN_RACE()                                                                \
  if (STREAMRT_TEST_UNDER_TSAN)                                                               \
  GTEST_SKIP() << "this negative control makes a real data race on purpose; ThreadSanitizer " \
                  "would (rightly) report it"

using OrderingSwitch = test::ScopedSwitch<&ops::set_stream_ordering_for_testing>;

class Allocator : public test::WorkersWithEmptyCache {};

INSTANTIATE_TEST_SUITE_P(Workers, Allocator, ::testing::ValuesIn(test::kWorkerCounts));

// What happens when stream `a` still has queued work writing a tensor's memory through a raw
// pointer (as a CUDA kernel would) and the host drops the tensor, then stream `b` allocates the
// same size: returns whether b got the same block, and whether a's late write landed in b's
// tensor.
struct CrossStreamOutcome {
  bool same_block = false;
  bool corrupted = false;
  bool reused_after_work = false;
};

CrossStreamOutcome cross_stream_case() {
  CrossStreamOutcome out;
  Stream a, b;
  test::Gate gate;
  void* p = nullptr;
  {
    StreamContext ctx(a);
    Tensor t = empty({kN});
    p = t.data_ptr_unsafe();
    gate.hold(a);
    // Untracked work on `a` that still uses the memory after the host drops the tensor.
    a.launch([f = static_cast<float*>(p)] {
      for (std::int64_t i = 0; i < kN; ++i) f[i] = 1.0f;
    });
  }  // t dropped here: the free is ordered on `a`, whose work has not run
  Tensor u;
  {
    StreamContext ctx(b);
    u = empty({kN});
    out.same_block = u.data_ptr_unsafe() == p;
    float* f = u.data<float>();
    for (std::int64_t i = 0; i < kN; ++i) f[i] = 2.0f;
  }
  gate.open();
  a.synchronize();
  out.corrupted = !test::all_equal(u, 2.0f);
  // Once a's work is done, b may have the block.
  if (!out.same_block) {
    StreamContext ctx(b);
    Tensor w = empty({kN});
    out.reused_after_work = w.data_ptr_unsafe() == p;
  }
  return out;
}

TEST_P(Allocator, BlockFreedOnOneStreamIsNotReusedByAnotherBeforeItsWorkEnds) {
  OrderingSwitch rule(ordering_for_tests());
  const auto out = cross_stream_case();
  EXPECT_FALSE(out.same_block) << "stream b got a block that stream a's queued work still writes";
  EXPECT_FALSE(out.corrupted) << "stream a's late write landed in stream b's tensor";
  EXPECT_TRUE(out.reused_after_work) << "the block was not reused once a's work had finished";
}

// Negative control: without the rule the very same scenario is a race (b gets the block and a's
// late write corrupts b's tensor), so the test above can fail.
TEST_P(Allocator, WithoutTheRuleAnotherStreamGetsTheBlockAndRaces) {
  SKIP_UNDER_TSAN_RACE();
  OrderingSwitch rule(false);
  const auto out = cross_stream_case();
  EXPECT_TRUE(out.same_block);
  EXPECT_TRUE(out.corrupted);
}

// The allocating stream itself may reuse the block at once: its later work runs after the
// earlier work (FIFO), so an op on the new tensor sees no stale write.
TEST_P(Allocator, SameStreamReusesAtOnceInStreamOrder) {
  Stream a;
  StreamContext ctx(a);
  test::Gate gate;
  void* p = nullptr;
  {
    Tensor t = empty({kN});
    p = t.data_ptr_unsafe();
    gate.hold(a);
    a.launch([f = static_cast<float*>(p)] {
      for (std::int64_t i = 0; i < kN; ++i) f[i] = 1.0f;
    });
  }
  const auto before = memory_stats();
  Tensor u = full({kN}, 3.0);  // queued behind the late write on the same stream
  EXPECT_EQ(u.data_ptr_unsafe(), p);
  EXPECT_EQ(memory_stats().cache_hits, before.cache_hits + 1);
  gate.open();
  const float* f = u.data<float>();
  for (std::int64_t i = 0; i < kN; ++i) ASSERT_EQ(f[i], 3.0f) << "at " << i;
}

// The loop `out = matmul(a, b)` with every product still queued (the stream held at a gate):
// each dropped result goes back to the stream's pool at once, so the pool does not grow with the
// loop length. Returns the bytes the loop added (peak in use, and held by the pool: in use plus
// cached) and its cache hits; checks the result.
struct LoopUse {
  std::size_t peak = 0;
  std::size_t pool = 0;
  std::uint64_t hits = 0;
};

LoopUse queued_matmul_loop(int iterations) {
  constexpr std::int64_t kM = 256;
  Stream s;
  StreamContext ctx(s);
  const Tensor a = randn({kM, kM}, 1), b = randn({kM, kM}, 2);
  const Tensor expected = matmul(a, b);
  expected.wait();
  empty_cache();
  reset_peak_memory_stats();
  const auto before = memory_stats();
  test::Gate gate;
  gate.hold(s);
  Tensor out;
  for (int i = 0; i < iterations; ++i) out = matmul(a, b);
  const auto after = memory_stats();
  gate.open();
  EXPECT_TRUE(equal(out, expected));
  return LoopUse{
      after.peak_bytes_in_use - before.bytes_in_use,
      after.bytes_in_use + after.bytes_cached - before.bytes_in_use - before.bytes_cached,
      after.cache_hits - before.cache_hits};
}

TEST_P(Allocator, AQueuedLoopOnOneStreamReusesItsResultsAtOnce) {
  const std::size_t cls = ops::size_class(256 * 256 * sizeof(float));
  const LoopUse short_loop = queued_matmul_loop(5);
  const LoopUse long_loop = queued_matmul_loop(25);
  // Two results live at a time: the one held and the one being made.
  EXPECT_LE(long_loop.peak, 3 * cls) << "results in use grew with the loop of queued products";
  EXPECT_LE(long_loop.pool, 3 * cls) << "the pool grew with the loop of queued products";
  EXPECT_EQ(long_loop.pool, short_loop.pool) << "the pool depends on the loop length";
  EXPECT_GE(long_loop.hits, 25u - 2u) << "dropped results were not reused by the same stream";
}

// A queued op's result dropped by the host while the op has not run (its kernel writes the
// memory through a raw pointer): another stream allocating that size must not get the block.
// Returns whether it did, and whether the op's late write landed in the other stream's tensor.
CrossStreamOutcome queued_result_case() {
  constexpr std::int64_t kM = 1024;  // 4 MiB of float32: kN's class
  CrossStreamOutcome out;
  Stream a, b;
  const Tensor x = full({kM, kM}, 1.0 / kM), y = full({kM, kM}, 1.0);
  x.wait();
  y.wait();
  test::Gate gate;
  void* p = nullptr;
  {
    StreamContext ctx(a);
    gate.hold(a);
    Tensor r = matmul(x, y);  // every element 1 once it has run
    p = r.data_ptr_unsafe();
  }  // dropped while queued
  Tensor u;
  {
    StreamContext ctx(b);
    u = full({kN}, 2.0);
    out.same_block = u.data_ptr_unsafe() == p;
    u.wait();
  }
  gate.open();
  a.synchronize();
  out.corrupted = !test::all_equal(u, 2.0f);
  return out;
}

// queued_result_case() holds a worker at a gate while stream b's fill must run: it needs a
// second worker, or host-run items (b's wait runs the fill on the waiting thread).
#define SKIP_UNLESS_B_CAN_RUN_WHILE_A_IS_HELD()                                  \
  if (!Stream().host_run() && (GetParam() < 2 || ::streamrt_schedule::serial())) \
  GTEST_SKIP() << "one worker held at a gate and no host-run items: stream b's fill cannot run"

TEST_P(Allocator, AQueuedOpsDroppedResultIsNotReusedByAnotherStream) {
  SKIP_UNLESS_B_CAN_RUN_WHILE_A_IS_HELD();
  OrderingSwitch rule(ordering_for_tests());
  const auto out = queued_result_case();
  EXPECT_FALSE(out.same_block) << "stream b got the block a queued product on stream a writes";
  EXPECT_FALSE(out.corrupted) << "the queued product's write landed in stream b's tensor";
}

// Negative control of the test above: without the rule, b gets the block and the product,
// running later, overwrites b's tensor.
TEST_P(Allocator, WithoutTheRuleAQueuedOpWritesIntoAnotherStreamsTensor) {
  SKIP_UNDER_TSAN_RACE();
  SKIP_UNLESS_B_CAN_RUN_WHILE_A_IS_HELD();
  OrderingSwitch rule(false);
  const auto out = queued_result_case();
  EXPECT_TRUE(out.same_block);
  EXPECT_TRUE(out.corrupted);
}

// The last tensor of a stream whose handles are all gone: its free hands the block to any stream
// and does not keep the dead stream alive in the cache (a free keeps the allocating stream only
// while it may still have work).
TEST(AllocatorStreams, AFreeDoesNotKeepADeadIdleStreamAlive) {
  std::weak_ptr<impl::StreamImpl> dead;
  Tensor t;
  {
    Stream a;
    dead = a.impl();
    StreamContext ctx(a);
    t = full({kN}, 2.0);
    a.synchronize();
  }
  // The worker may hold the stream a little longer after its last item (a lingering drain); once
  // it lets go, only the tensor's storage holds it (as its allocating stream, and through the
  // tracked position of the write that filled it).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (dead.use_count() > 2 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(dead.use_count(), 2) << "something besides the storage still holds the stream";
  t = Tensor();
  EXPECT_TRUE(dead.expired()) << "the freed block keeps its dead stream alive";
  Stream b;
  StreamContext ctx(b);
  const auto before = memory_stats();
  Tensor u = empty({kN});  // another stream gets the block at once
  EXPECT_EQ(memory_stats().cache_hits, before.cache_hits + 1);
}

// A tensor read by an op on another stream and dropped while that op waits: the op keeps the
// memory until it has run, then the block returns and is reused; the reader saw the right data.
TEST_P(Allocator, TensorDroppedWhileAnotherStreamReadsIt) {
  Stream a, b;
  test::Gate gate;
  Tensor sum_b;
  {
    Tensor t;
    {
      StreamContext ctx(a);
      t = full({kN}, 1.0);
    }
    StreamContext ctx(b);
    gate.hold(b);
    sum_b = sum(t);
  }
  {
    StreamContext ctx(a);
    Tensor u = full({kN}, 5.0);  // must not be the block b is about to read
    gate.open();
    EXPECT_EQ(sum_b.item<float>(), static_cast<float>(kN));
    EXPECT_EQ(u.data<float>()[kN - 1], 5.0f);
  }
}

TEST(AllocatorStats, CountsUseCacheHitsAndPeak) {
  empty_cache();
  reset_peak_memory_stats();
  const auto s0 = memory_stats();
  const std::size_t cls = ops::size_class(static_cast<std::size_t>(kN) * 4);
  {
    Tensor t = empty({kN});
    const auto s1 = memory_stats();
    EXPECT_EQ(s1.bytes_in_use, s0.bytes_in_use + cls);
    EXPECT_EQ(s1.allocations, s0.allocations + 1);
    EXPECT_GE(s1.peak_bytes_in_use, s1.bytes_in_use);
  }
  const auto s2 = memory_stats();
  EXPECT_EQ(s2.bytes_in_use, s0.bytes_in_use);
  EXPECT_EQ(s2.bytes_cached, s0.bytes_cached + cls);
  {
    Tensor t = empty({kN});
    EXPECT_EQ(memory_stats().cache_hits, s2.cache_hits + 1);
  }
  empty_cache();
  const auto s3 = memory_stats();
  EXPECT_EQ(s3.bytes_cached, 0u);
  EXPECT_GT(s3.releases, s2.releases);
  EXPECT_GE(s3.peak_bytes_in_use, s0.bytes_in_use + cls);
}

TEST(AllocatorStats, CachedBytesStayWithinTheLimit) {
  empty_cache();
  const std::size_t limit = std::size_t{1} << 20;
  set_memory_cache_limit(limit);
  EXPECT_EQ(memory_stats().cache_limit, limit);
  for (std::int64_t n = 1000; n < 400000; n += 7919) {
    Tensor t = empty({n});
    EXPECT_LE(memory_stats().bytes_cached, limit);
  }
  EXPECT_LE(memory_stats().bytes_cached, limit);
  EXPECT_GT(memory_stats().releases, 0u);
  set_memory_cache_limit(std::size_t{1} << 30);
}

TEST(AllocatorStats, OtherDevicesAreRejected) {
  EXPECT_THROW(memory_stats(Device{DeviceType::CUDA, 0}), Error);
  EXPECT_THROW(empty_cache(Device{DeviceType::CUDA, 0}), Error);
}

// fork() while another thread allocates: the child's first tensor must not find the allocator's
// lock held by a thread that does not exist there (pthread_atfork in allocator.cpp). Without the
// handlers a child can hang; the parent kills it after the time-out and the test fails.
TEST(AllocatorFork, ChildAllocatesWhileParentThreadsAllocate) {
#ifdef STREAMRT_TEST_SANITIZED
  GTEST_SKIP() << "sanitizer allocators are not fork-safe with live threads (docs/reliability.md)";
#endif
  std::atomic<bool> stop{false};
  std::thread churn([&] {
    while (!stop.load(std::memory_order_relaxed)) {
      Tensor x = empty({1000});
      Tensor y = empty({3000});
    }
  });
  for (int round = 0; round < 30; ++round) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      Tensor t = empty({1000});
      _exit(t.defined() ? 0 : 1);
    }
    int status = 0;
    pid_t done = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while ((done = waitpid(pid, &status, WNOHANG)) == 0 &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (done == 0) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      ADD_FAILURE() << "a child hung allocating a tensor after fork (round " << round << ")";
      break;
    }
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "round " << round;
  }
  stop.store(true);
  churn.join();
}

TEST(AllocatorSizeClasses, CoverTheSizeWithBoundedSlack) {
  std::size_t prev = 0;
  for (std::size_t n = 0; n < (std::size_t{1} << 22); n = n * 9 / 8 + 1) {
    const std::size_t c = ops::size_class(n);
    EXPECT_GE(c, n);
    EXPECT_EQ(c % 64, 0u) << n;
    EXPECT_LE(c, std::max<std::size_t>(64, n + n / 4 + 64)) << n;
    EXPECT_GE(c, prev);
    EXPECT_EQ(ops::size_class(c), c) << "a class size maps to itself";
    prev = c;
  }
}

TEST(AllocatorParseSize, AcceptsBytesAndBinaryUnits) {
  EXPECT_EQ(ops::parse_size("0", "X"), 0u);
  EXPECT_EQ(ops::parse_size("4096", "X"), 4096u);
  EXPECT_EQ(ops::parse_size("512K", "X"), 512u << 10);
  EXPECT_EQ(ops::parse_size("64m", "X"), std::size_t{64} << 20);
  EXPECT_EQ(ops::parse_size("2G", "X"), std::size_t{2} << 30);
  EXPECT_EQ(ops::parse_size("1GiB", "X"), std::size_t{1} << 30);
  for (const char* bad : {"", "-1", "1.5G", "12X", "G", "1 G", "99999999999999999999"}) {
    try {
      ops::parse_size(bad, "STREAMRT_CACHE_LIMIT");
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("STREAMRT_CACHE_LIMIT"), std::string::npos);
      EXPECT_NE(std::string(e.what()).find("512M"), std::string::npos);
    }
  }
}

}  // namespace
}  // namespace streamrt
