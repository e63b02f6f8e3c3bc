// Whitebox: intra-op parallel_for on the shared pool (an internal the public tests cannot reach).
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <set>
#include <thread>

#include "core/intra_op.hpp"
#include "cpu/cpu_backend.hpp"
#include "cpu/worker_pool.hpp"
#include "ops_test_util.hpp"
#include "streamrt/streamrt.hpp"

namespace streamrt {
namespace {

// `n` streams each holding one worker at `gate`, and how many of those workers had reached it when
// every one had, or when test::kMeetTimeout ran out (the caller checks the count).
struct Held {
  std::vector<Stream> streams;
  int reached = 0;
};

Held hold_workers(test::Gate& gate, int n) {
  Held held;
  held.streams.resize(static_cast<std::size_t>(n));
  auto entered = std::make_shared<std::atomic<int>>(0);
  for (auto& h : held.streams) gate.hold(h, entered);
  const auto deadline = std::chrono::steady_clock::now() + test::kMeetTimeout;
  while (entered->load() < n && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  held.reached = entered->load();
  return held;
}

class ParallelFor : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override { cpu::set_num_threads(GetParam()); }
  test::ThreadCountGuard guard_;
  std::thread::id main_thread_ = std::this_thread::get_id();
};

TEST_P(ParallelFor, CoversEveryIndexExactlyOnce) {
  for (std::int64_t n : {0, 1, 2, 7, 1000, 100003}) {
    for (std::int64_t grain : {1, 3, 64, 4096}) {
      std::vector<std::atomic<int>> hits(static_cast<std::size_t>(n));
      runtime::parallel_for(0, n, grain, [&](std::int64_t b, std::int64_t e) {
        ASSERT_LT(b, e);
        for (std::int64_t i = b; i < e; ++i) hits[static_cast<std::size_t>(i)].fetch_add(1);
      });
      for (std::int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(hits[static_cast<std::size_t>(i)].load(), 1) << "n=" << n << " grain=" << grain;
      }
    }
  }
}

TEST_P(ParallelFor, RethrowsTheFirstExceptionAndSkipsTheRest) {
  if (GetParam() > 1) {
    STREAMRT_SKIP_UNDER_SERIAL_SCHEDULE();  // it holds every one of GetParam() workers at once
  }
  // Every worker is held, so the calling (host) thread runs the chunks, in order: chunk 0 throws
  // and none of the other 999 may run after that.
  test::Gate gate;
  Held held = hold_workers(gate, GetParam());
  ASSERT_EQ(held.reached, GetParam()) << "the workers never all reached the gates";
  std::atomic<int> ran{0};
  try {
    runtime::parallel_for(0, 1000, 1, [&](std::int64_t b, std::int64_t) {
      ran.fetch_add(1);
      if (b == 0) throw Error("chunk 0 failed");
    });
    ADD_FAILURE() << "no exception";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "chunk 0 failed");
  }
  EXPECT_EQ(ran.load(), 1);
  gate.open();
  for (auto& h : held.streams) h.synchronize();
}

TEST_P(ParallelFor, NestedCallsRunInline) {
  std::atomic<std::int64_t> total{0};
  runtime::parallel_for(0, 8, 1, [&](std::int64_t b, std::int64_t e) {
    EXPECT_TRUE(runtime::in_parallel_region());
    for (std::int64_t i = b; i < e; ++i) {
      runtime::parallel_for(0, 100, 1, [&](std::int64_t b2, std::int64_t e2) { total += e2 - b2; });
    }
  });
  EXPECT_EQ(total.load(), 800);
  EXPECT_FALSE(runtime::in_parallel_region());
}

class ParallelForMulti : public ParallelFor {
 protected:
  void SetUp() override {
    STREAMRT_SKIP_UNDER_SERIAL_SCHEDULE();
    ParallelFor::SetUp();
  }
};

// The sub-ranges of [begin, end) are offset by begin (the contract is ATen's, not [0, n)).
TEST_P(ParallelFor, CoversARangeThatDoesNotStartAtZero) {
  std::vector<std::atomic<int>> hits(1000);
  runtime::parallel_for(300, 1000, 7, [&](std::int64_t b, std::int64_t e) {
    ASSERT_GE(b, 300);
    ASSERT_LE(e, 1000);
    for (std::int64_t i = b; i < e; ++i) hits[static_cast<std::size_t>(i)].fetch_add(1);
  });
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(hits[static_cast<std::size_t>(i)].load(), i >= 300);
}

// Waits until the pool counts every one of its workers idle, or test::kMeetTimeout ran out. A
// worker that ran a chunk counts as busy until it has left the chunk's task, a moment after the
// caller returned; help-first asks only idle workers, so a round started before then (a helper
// descheduled on a loaded machine) would run inline.
bool wait_until_all_idle(const cpu::WorkerPool& pool) {
  const auto deadline = std::chrono::steady_clock::now() + test::kMeetTimeout;
  while (pool.idle_workers() < pool.size()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

// Chunks really run on several threads at once: two chunks must meet each other.
TEST_P(ParallelForMulti, ChunksRunConcurrentlyOnTheSamePool) {
  const cpu::WorkerPool& pool =
      static_cast<cpu::CpuBackend&>(impl::backend(DeviceType::CPU)).pool();
  for (int round = 0; round < 20; ++round) {
    ASSERT_TRUE(wait_until_all_idle(pool)) << "the workers never all became idle";
    test::Rendezvous meet(2);
    std::atomic<int> met{0};
    std::atomic<bool> on_worker{false};
    runtime::parallel_for(0, 2, 1, [&](std::int64_t, std::int64_t) {
      if (meet.arrive()) met.fetch_add(1);
      if (std::this_thread::get_id() != main_thread_) on_worker.store(true);
    });
    ASSERT_EQ(met.load(), 2) << "the two chunks did not run at the same time";
    EXPECT_TRUE(on_worker.load());
  }
}

// A helper counts itself idle before it reports its last chunk done, so a split made right after
// a loop returns finds it idle (back-to-back loops, graph replays: help-first asks only the
// workers counted idle). Every worker pauses after each task here (a descheduled helper on a
// loaded machine): a helper counted busy until its task has returned fails every round.
TEST_P(ParallelForMulti, HelpersAreIdleAgainWhenTheLoopReturns) {
  const cpu::WorkerPool& pool =
      static_cast<cpu::CpuBackend&>(impl::backend(DeviceType::CPU)).pool();
  struct Delay {
    Delay() { cpu::WorkerPool::set_task_exit_delay_for_testing(std::chrono::milliseconds(20)); }
    ~Delay() { cpu::WorkerPool::set_task_exit_delay_for_testing(std::chrono::nanoseconds(0)); }
  } delay;
  int busy_after = 0;
  for (int round = 0; round < 20; ++round) {
    ASSERT_TRUE(wait_until_all_idle(pool)) << "the workers never all became idle";
    test::Rendezvous meet(2);
    std::atomic<int> met{0};
    runtime::parallel_for(0, 2, 1, [&](std::int64_t, std::int64_t) {
      if (meet.arrive()) met.fetch_add(1);
    });
    ASSERT_EQ(met.load(), 2) << "the two chunks did not run at the same time";
    if (pool.idle_workers() < pool.size()) ++busy_after;
  }
  EXPECT_EQ(busy_after, 0) << "rounds after which a helper still counted as busy";
}

// A big op inside stream work while every other worker is held by another stream: the caller
// does all the chunks itself (no wait for helpers that cannot run, no deadlock).
TEST_P(ParallelForMulti, CompletesWhenEveryOtherWorkerIsBusy) {
  std::vector<std::unique_ptr<test::Gate>> gates;
  std::vector<Stream> holders;
  for (int i = 0; i < GetParam() - 1; ++i) {
    gates.push_back(std::make_unique<test::Gate>());
    holders.emplace_back();
    gates.back()->hold(holders.back());
  }
  Stream s;
  StreamContext ctx(s);
  Tensor x = ones({1 << 21}, DType::Float64);
  Tensor total = sum(x * 2.0);  // split into many chunks
  EXPECT_EQ(total.item<double>(), 2.0 * (1 << 21));
  for (auto& g : gates) {
    g->open();
    EXPECT_FALSE(g->timed_out());
  }
  synchronize();
}

// Help-first: a loop inside stream work while every other worker runs its own stream's work
// asks no worker to help (no task pushed, every chunk on the calling worker); with the same
// workers idle, it does. Fails with helpers pushed regardless of the idle count.
TEST_P(ParallelForMulti, AsksOnlyIdleWorkersToHelp) {
  cpu::WorkerPool& pool = static_cast<cpu::CpuBackend&>(impl::backend(DeviceType::CPU)).pool();
  if (pool.randomized()) GTEST_SKIP() << "the schedule fuzzer makes every split, idle or not";
  test::Gate gate;
  Held held = hold_workers(gate, GetParam() - 1);
  ASSERT_EQ(held.reached, GetParam() - 1) << "the other workers never all reached the gates";
  auto loop_on_a_stream = [&pool] {
    struct Seen {
      std::uint64_t pushes = 0;
      bool other_thread = false;
    };
    auto seen = std::make_shared<Seen>();
    Stream s;
    s.launch([seen, &pool] {
      const auto me = std::this_thread::get_id();
      std::atomic<bool> other{false};
      const std::uint64_t before = pool.push_generation();
      runtime::parallel_for(0, 64, 1, [&](std::int64_t, std::int64_t) {
        if (std::this_thread::get_id() != me) other.store(true);
      });
      seen->pushes = pool.push_generation() - before;
      seen->other_thread = other.load();
    });
    // Polled, not synchronize(): a host-run item would make this thread the loop's caller.
    while (!s.query()) std::this_thread::yield();
    return *seen;
  };
  const auto busy = loop_on_a_stream();
  EXPECT_EQ(busy.pushes, 0u) << "a helper was asked for while every other worker was busy";
  EXPECT_FALSE(busy.other_thread);
  gate.open();
  for (auto& h : held.streams) h.synchronize();
  // A released worker may still be leaving its drain: it counts as busy until it has.
  std::uint64_t idle_pushes = 0;
  for (int i = 0; i < 1000 && idle_pushes == 0; ++i) {
    idle_pushes = loop_on_a_stream().pushes;
    if (idle_pushes == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_GE(idle_pushes, 1u) << "no idle worker was asked to help";
}

// A product big enough to be cut into blocks gives the same bits whether idle workers helped with
// it or the stream's worker ran every block itself (OpenBLAS rounds differently for other block
// shapes, so blocks chosen by the load would change the result from run to run).
TEST_P(ParallelForMulti, AProductsBitsDoNotDependOnTheLoad) {
  STREAMRT_SKIP_UNDER_SERIAL_SCHEDULE();  // it holds all but one of GetParam() workers
  const Tensor a = randn({256, 256}, 1), b = randn({256, 256}, 2);
  Stream s;
  auto product = [&] {
    StreamContext ctx(s);
    Tensor c = matmul(a, b);
    c.wait();
    return c;
  };
  const Tensor on_idle_pool = product();
  test::Gate gate;
  Held held = hold_workers(gate, GetParam() - 1);
  const Tensor on_busy_pool = product();
  gate.open();
  for (auto& h : held.streams) h.synchronize();
  EXPECT_TRUE(equal(on_idle_pool, on_busy_pool));
}

// Splits of a loop inside a partition's stream run only on that partition's workers, although the
// shared workers are idle: they would otherwise be asked too. Help-first asks only workers that
// look idle, so a round may run inline; the rounds go on until a helper has run a chunk.
TEST_P(ParallelForMulti, SplitsInsideAPartitionStayOnItsWorkers) {
  if (GetParam() < 4) GTEST_SKIP() << "needs a partition of two workers beside the shared ones";
  const int k = GetParam() / 2;
  std::mutex mutex;
  std::set<std::thread::id> mine, chunks;
  auto note = [&](std::set<std::thread::id>& into) {
    std::lock_guard lock(mutex);
    into.insert(std::this_thread::get_id());
  };
  {
    cpu::Partition part(k);
    test::Rendezvous meet(k);  // k items that meet: the partition's k threads
    std::vector<Stream> own;
    for (int i = 0; i < k; ++i) {
      own.push_back(part.new_stream());
      own.back().set_host_run(false);  // every item on a worker, none on this thread
      own.back().launch([&] {
        note(mine);
        EXPECT_TRUE(meet.arrive());
      });
    }
    for (auto& s : own) s.synchronize();
    ASSERT_EQ(mine.size(), static_cast<std::size_t>(k));
    std::atomic<bool> helped{false};
    for (int round = 0; round < 1000 && !helped.load(); ++round) {
      own.front().launch([&] {
        const auto caller = std::this_thread::get_id();
        std::atomic<int> started{0};
        runtime::parallel_for(0, 2, 1, [&](std::int64_t, std::int64_t) {
          note(chunks);
          if (std::this_thread::get_id() != caller) helped.store(true);
          // Gives a helper time to claim the other chunk (no bound on correctness: the check is
          // where the chunks ran, and the rounds go on until one was helped).
          started.fetch_add(1);
          for (int i = 0; i < 1000 && started.load() < 2; ++i) {
            std::this_thread::sleep_for(std::chrono::microseconds(10));
          }
        });
      });
      own.front().synchronize();
    }
    EXPECT_TRUE(helped.load()) << "no helper ever joined a split";
  }
  for (const auto& id : chunks) {
    EXPECT_EQ(mine.count(id), 1u) << "a chunk ran on a worker outside the partition";
  }
}

INSTANTIATE_TEST_SUITE_P(Workers, ParallelFor, ::testing::ValuesIn(test::kWorkerCounts),
                         [](const auto& info) { return std::to_string(info.param) + "workers"; });
INSTANTIATE_TEST_SUITE_P(Workers, ParallelForMulti,
                         ::testing::ValuesIn(test::kParallelWorkerCounts),
                         [](const auto& info) { return std::to_string(info.param) + "workers"; });

}  // namespace
}  // namespace streamrt
