// cpu::Partition: workers reserved for the streams created in a partition. Other streams' work
// never runs there, the reserved streams do not wait behind other streams' work, bad requests get
// an Error naming the problem, and the shared pool gets its workers back afterwards.
#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "streamrt/streamrt.hpp"
#include "test_util.hpp"

namespace {

using streamrt::Error;
using streamrt::Stream;
using streamrt_test::eventually;
using streamrt_test::Gate;
using streamrt_test::kTimeout;
using streamrt_test::Rendezvous;
using streamrt_test::settled_asleep;
using streamrt_test::ThreadCount;
using streamrt_test::WorkersTest;
namespace cpu = streamrt::cpu;

// The kernel thread ids that ran some work.
class Threads {
 public:
  void add() {
    std::lock_guard lock(mutex_);
    ids_.insert(gettid());
  }
  std::set<pid_t> get() {
    std::lock_guard lock(mutex_);
    return ids_;
  }

 private:
  std::mutex mutex_;
  std::set<pid_t> ids_;
};

bool disjoint(const std::set<pid_t>& a, const std::set<pid_t>& b) {
  return std::none_of(a.begin(), a.end(), [&](pid_t t) { return b.count(t) > 0; });
}

// A stream whose waits never run its items on the waiting host thread, so that every item runs
// on a worker (host-run items would put the test's own thread in the sets).
Stream worker_only(Stream s) {
  s.set_host_run(false);
  return s;
}

// The cores this process may run on.
std::vector<int> allowed_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  EXPECT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  std::vector<int> out;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) out.push_back(c);
  }
  return out;
}

// Runs `make` and expects an Error whose message contains every one of `parts`.
template <class F>
void expect_error(F make, const std::vector<std::string>& parts) {
  try {
    make();
    ADD_FAILURE() << "no Error; expected one saying: " << parts.front();
  } catch (const Error& e) {
    for (const auto& p : parts) {
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what() << "\nlacks: " << p;
    }
  }
}

// Every shared worker held in an item at `gate`, each on its own stream; returns once all of
// them are inside (a rendezvous, so that nothing else can run on the shared pool).
std::vector<Stream> hold_shared_workers(int n, Gate& gate) {
  auto inside = std::make_shared<std::atomic<int>>(0);
  std::vector<Stream> held;
  for (int i = 0; i < n; ++i) {
    held.push_back(worker_only(Stream()));
    held.back().launch([inside, &gate] {
      inside->fetch_add(1);
      if (!gate.wait()) streamrt_test::fail_hard("a held worker was never released");
    });
  }
  if (!eventually([&] { return inside->load() == n; })) {
    ADD_FAILURE() << "only " << inside->load() << " of " << n << " shared workers got inside";
  }
  return held;
}

// Worker counts that can host a partition (the shared pool keeps at least one worker).
class Partitions : public WorkersTest {
 protected:
  void SetUp() override {
    STREAMRT_SKIP_UNDER_SERIAL_SCHEDULE();
    WorkersTest::SetUp();
  }
  int reserved() const { return std::max(1, workers() / 2); }
  int shared() const { return workers() - reserved(); }
};

// The partition's workers (k items that meet must be on k threads) never run an item of the
// shared streams launched at once in bulk, although they are idle meanwhile; nor do the shared
// workers run the partition's items.
TEST_P(Partitions, WorkersNeverRunForeignItems) {
  cpu::Partition part(reserved());
  EXPECT_EQ(part.num_workers(), reserved());
  EXPECT_TRUE(part.cores().empty());
  Threads mine, theirs;
  Rendezvous meet(reserved());
  std::vector<Stream> own;
  for (int i = 0; i < reserved(); ++i) {
    own.push_back(worker_only(part.new_stream()));
    own.back().launch([&] {
      mine.add();
      EXPECT_TRUE(meet.arrive_and_wait()) << "the partition's items did not meet";
    });
  }
  for (auto& s : own) s.synchronize();
  std::vector<Stream> bulk;
  for (int i = 0; i < 4 * workers(); ++i) bulk.push_back(worker_only(Stream()));
  for (int round = 0; round < 50; ++round) {
    for (auto& s : bulk) {
      s.launch([&] {
        theirs.add();
        std::atomic<int> spin{0};
        while (spin.fetch_add(1, std::memory_order_relaxed) < 2000) {
        }
      });
    }
    for (auto& s : own) s.launch([&] { mine.add(); });
  }
  for (auto& s : bulk) s.synchronize();
  for (auto& s : own) s.synchronize();
  EXPECT_EQ(mine.get().size(), static_cast<std::size_t>(reserved()))
      << "the partition's items ran on other threads than its workers";
  EXPECT_TRUE(disjoint(mine.get(), theirs.get()))
      << "a thread ran items of both the partition's and the shared streams";
}

// A partition's worker that waits for a shared stream does not help by running that stream's
// items (directed help stays in the worker's own pool): the shared stream's items are queued
// behind held shared workers, so a helping partition worker would run them while it waits.
TEST_P(Partitions, AWaitingWorkerDoesNotRunAnotherPoolsStream) {
  cpu::Partition part(reserved());
  Gate gate;
  auto held = hold_shared_workers(shared(), gate);
  Stream queued = worker_only(Stream());
  Threads ran_queued;
  for (int i = 0; i < 3; ++i) queued.launch([&] { ran_queued.add(); });
  auto done = queued.record_event();
  Stream waiter = worker_only(part.new_stream());
  std::atomic<pid_t> waiter_tid{0};
  Gate started;
  waiter.launch([&] {
    waiter_tid.store(gettid());
    started.open();
    done.synchronize();
  });
  ASSERT_TRUE(started.wait());
  // Either it helped (and finished) or it sleeps in its wait: only then is the gate opened.
  EXPECT_TRUE(eventually([&] { return waiter.query() || settled_asleep(waiter_tid.load()); }));
  gate.open();
  waiter.synchronize();
  for (auto& s : held) s.synchronize();
  EXPECT_EQ(ran_queued.get().count(waiter_tid.load()), 0u)
      << "the partition's worker ran a shared stream's items while it waited";
}

// The reserved stream's item completes on its own worker while every shared worker is held and
// more shared work is queued behind them (the host never runs it: it waits on a gate, not on
// the stream).
TEST_P(Partitions, ReservedStreamDoesNotWaitBehindBulkWork) {
  cpu::Partition part(1);
  Gate gate;
  auto held = hold_shared_workers(workers() - 1, gate);
  std::vector<Stream> bulk;
  for (int i = 0; i < 2 * workers(); ++i) {
    bulk.push_back(worker_only(Stream()));
    bulk.back().launch([] {});
  }
  Stream urgent = worker_only(part.new_stream());
  Gate ran;
  urgent.launch([&] { ran.open(); });
  EXPECT_TRUE(ran.wait(kTimeout)) << "the partition's item waited behind the shared work";
  gate.open();
  urgent.synchronize();
  for (auto& s : held) s.synchronize();
  for (auto& s : bulk) s.synchronize();
}

// Whether a partition of all `workers` but one can be reserved now (every reserved one is back).
bool all_but_one_can_be_reserved(int workers) {
  try {
    cpu::Partition again(workers - 1);
    return true;
  } catch (const Error&) {
    return false;
  }
}

// Dropping the handle while its stream has queued work loses nothing; once the stream is gone
// too, the shared pool has every worker back (as many shared items meet at once as there are
// workers) and the workers can be reserved again.
TEST_P(Partitions, WorkersComeBackAfterThePartitionAndItsStreamsAreGone) {
  std::atomic<int> ran{0};
  Gate gate;
  std::optional<Stream> s;
  {
    cpu::Partition part(reserved());
    s.emplace(worker_only(part.new_stream()));
    s->launch([&] { EXPECT_TRUE(gate.wait()); });
    for (int i = 0; i < 100; ++i) s->launch([&] { ran.fetch_add(1); });
  }
  gate.open();
  s->synchronize();
  EXPECT_EQ(ran.load(), 100);
  s.reset();
  Rendezvous meet(workers());
  std::vector<Stream> all;
  for (int i = 0; i < workers(); ++i) {
    all.push_back(worker_only(Stream()));
    all.back().launch([&] { EXPECT_TRUE(meet.arrive_and_wait()) << "a worker is missing"; });
  }
  for (auto& a : all) a.synchronize();
  EXPECT_TRUE(eventually([&] { return all_but_one_can_be_reserved(workers()); }))
      << "the reserved workers never came back";
  EXPECT_EQ(cpu::num_threads(), workers());
}

// What the partition's streams leave behind does not keep its workers: an event recorded there,
// a tensor allocated and written there (its memory and its tracked write refer to the stream),
// and memory freed into the cache from there. Once the partition and its streams' handles are
// gone, the workers come back while all of that still lives.
TEST_P(Partitions, WorkersComeBackWhateverItsStreamsLeaveBehind) {
  std::optional<streamrt::Event> done;
  std::optional<streamrt::Tensor> kept;
  {
    cpu::Partition part(reserved());
    Stream s = part.new_stream();
    {
      streamrt::StreamContext on_s(s);
      kept.emplace(streamrt::ones({4}) + streamrt::ones({4}));
      streamrt::Tensor freed = streamrt::ones({1024});
    }
    done.emplace(s.record_event());
    s.synchronize();
  }
  EXPECT_TRUE(eventually([&] { return all_but_one_can_be_reserved(workers()); }))
      << "the reserved workers never came back";
  EXPECT_TRUE(done->query());
  EXPECT_EQ(streamrt::sum(*kept).item<float>(), 8.0f);
}

// Pinned workers run only on their core.
TEST_P(Partitions, PinnedWorkersRunOnTheirCore) {
  const auto cores = allowed_cores();
  ASSERT_FALSE(cores.empty());
  const int core = cores.back();
  auto part = cpu::Partition::pinned({core});
  EXPECT_EQ(part.cores(), std::vector<int>{core});
  EXPECT_EQ(part.num_workers(), 1);
  Stream s = worker_only(part.new_stream());
  std::atomic<int> ran_on{-1};
  std::atomic<int> allowed{0};
  s.launch([&] {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) == 0) allowed.store(CPU_COUNT(&set));
    ran_on.store(sched_getcpu());
  });
  s.synchronize();
  EXPECT_EQ(ran_on.load(), core);
  EXPECT_EQ(allowed.load(), 1);
}

// Streams of a partition keep its priorities, and partition streams exist beside shared ones.
TEST_P(Partitions, NewStreamChecksThePriority) {
  cpu::Partition part(reserved());
  const auto range = cpu::priority_range();  // {least, most} urgent
  EXPECT_EQ(part.new_stream(range.second).priority(), range.second);
  expect_error([&] { part.new_stream(range.first + 1); }, {"priority", "out of range"});
}

INSTANTIATE_TEST_SUITE_P(Workers, Partitions, ::testing::Values(2, 4, 8));

// Bad requests: each Error names the problem and the way out.
TEST(PartitionErrors, TooManyOrTooFewWorkers) {
  {
    ThreadCount one(1);
    expect_error([] { cpu::Partition p(1); }, {"1 CPU workers", "at most 0", "set_num_threads"});
  }
  ThreadCount four(4);
  expect_error([] { cpu::Partition p(0); }, {"at least one worker"});
  expect_error([] { cpu::Partition p(-3); }, {"at least one worker"});
  expect_error([] { cpu::Partition p(4); }, {"4 CPU workers", "at most 3"});
  cpu::Partition two(2);
  expect_error([] { cpu::Partition p(2); }, {"2 reserved by other partitions", "at most 1"});
  expect_error([] { cpu::set_num_threads(2); }, {"reserve 2", "at least 3"});
  cpu::Partition one_more(1);  // the last one that fits
  EXPECT_EQ(cpu::num_threads(), 4);
}

TEST(PartitionErrors, BadCores) {
  ThreadCount four(4);
  const auto cores = allowed_cores();
  ASSERT_FALSE(cores.empty());
  const int c = cores.front();
  expect_error([] { cpu::Partition::pinned({}); }, {"at least one core"});
  expect_error([] { cpu::Partition::pinned({-1}); }, {"core -1", "negative"});
  expect_error(
      [&] {
        cpu::Partition::pinned({c, c});
      },
      {"core " + std::to_string(c), "named twice"});
  int outside = -1;
  for (int i = CPU_SETSIZE - 1; i >= 0 && outside < 0; --i) {
    if (!std::binary_search(cores.begin(), cores.end(), i)) outside = i;
  }
  ASSERT_GE(outside, 0);
  expect_error([&] { cpu::Partition::pinned({outside}); },
               {"core " + std::to_string(outside), "affinity mask"});
  auto first = cpu::Partition::pinned({c});
  expect_error([&] { cpu::Partition::pinned({c}); },
               {"core " + std::to_string(c), "already pinned by another live partition"});
}

TEST(PartitionErrors, NotFromStreamWork) {
  ThreadCount four(4);
  Stream s = worker_only(Stream());
  std::string message;
  s.launch([&] {
    try {
      cpu::Partition p(1);
    } catch (const Error& e) {
      message = e.what();
    }
  });
  s.synchronize();
  EXPECT_NE(message.find("from the host, outside stream work"), std::string::npos) << message;
}

}  // namespace
