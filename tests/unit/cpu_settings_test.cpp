// streamrt::cpu (cpu.hpp), the CPU backend's own settings. The worker count and the idle poll:
// set, read back, bad values and the environment variables. Workers under SCHED_BATCH
// (set_worker_batch, STREAMRT_WORKER_BATCH): every worker, present and started later, runs under
// the policy asked for, at 1, 2, 4 and 8 workers; the host thread keeps its own; the environment
// variable sets it and a bad value is a clear error. The priority range of CPU streams.
#include <gtest/gtest.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "schedule_util.hpp"
#include "streamrt/streamrt.hpp"
#include "test_util.hpp"

namespace {

using streamrt_test::error_of;
using streamrt_test::expect_bad_setting;
using streamrt_test::Rendezvous;
using streamrt_test::run_child;

TEST(WorkerCount, SetNumThreadsChangesTheCountAndRejectsBadValues) {
  const int saved = streamrt::cpu::num_threads();
  EXPECT_GE(saved, 1);
  for (int bad : {0, -1, 4097, 1 << 20}) {
    const std::string msg = error_of([&] { streamrt::cpu::set_num_threads(bad); });
    EXPECT_NE(msg.find("set_num_threads(" + std::to_string(bad) + ")"), std::string::npos) << msg;
    EXPECT_NE(msg.find("from 1 to 4096"), std::string::npos) << msg;
  }
  EXPECT_EQ(streamrt::cpu::num_threads(), saved);
  streamrt::cpu::set_num_threads(3);
  EXPECT_EQ(streamrt::cpu::num_threads(), 3);
  // Resizing keeps working: work still runs after shrinking and growing.
  streamrt::Stream s;
  std::atomic<int> n{0};
  for (int i = 0; i < 100; ++i) s.launch([&] { n.fetch_add(1); });
  streamrt::cpu::set_num_threads(1);
  for (int i = 0; i < 100; ++i) s.launch([&] { n.fetch_add(1); });
  s.synchronize();
  EXPECT_EQ(n.load(), 200);
  streamrt::cpu::set_num_threads(saved);
  EXPECT_EQ(streamrt::cpu::num_threads(), saved);
}

class OnWorkerThread : public ::testing::TestWithParam<int> {};

TEST_P(OnWorkerThread, TrueOnEveryWorkerAndFalseOnTheHost) {
  streamrt_test::ThreadCount threads(GetParam());
  EXPECT_FALSE(streamrt::cpu::on_worker_thread());
  // Items on more streams than workers; this thread waits with a time-out, which runs no item
  // here (an untimed wait may run them on this thread: host-run items).
  const int n = 2 * GetParam();
  std::atomic<int> on_worker{0};
  std::vector<streamrt::Stream> streams(static_cast<std::size_t>(n));
  for (auto& s : streams) {
    s.launch([&] {
      // (relaxed: read after the synchronize, which orders it)
      if (streamrt::cpu::on_worker_thread()) on_worker.fetch_add(1, std::memory_order_relaxed);
    });
  }
  for (auto& s : streams) ASSERT_TRUE(s.synchronize_for(streamrt_test::kTimeout));
  EXPECT_EQ(on_worker.load(std::memory_order_relaxed), n);
}

INSTANTIATE_TEST_SUITE_P(Workers, OnWorkerThread, ::testing::Values(1, 2, 4, 8));

TEST(WorkerSpin, SetAndReadBackAndBadValuesAreErrors) {
  using std::chrono::microseconds;
  const microseconds saved = streamrt::cpu::worker_spin();
  EXPECT_GE(saved.count(), 0);
  for (long bad : {-1L, 1'000'001L}) {
    const std::string msg = error_of([&] { streamrt::cpu::set_worker_spin(microseconds(bad)); });
    EXPECT_NE(msg.find("set_worker_spin(" + std::to_string(bad) + " us)"), std::string::npos)
        << msg;
    EXPECT_NE(msg.find("from 0 to 1000000"), std::string::npos) << msg;
  }
  EXPECT_EQ(streamrt::cpu::worker_spin(), saved);
  streamrt::cpu::set_worker_spin(microseconds(0));
  EXPECT_EQ(streamrt::cpu::worker_spin(), microseconds(0));
  // Work still runs with workers that park at once.
  streamrt::Stream s;
  std::atomic<int> n{0};
  for (int i = 0; i < 100; ++i) {
    s.launch([&] { n.fetch_add(1); });
    if (i % 10 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  s.synchronize();
  EXPECT_EQ(n.load(), 100);
  streamrt::cpu::set_worker_spin(saved);
  EXPECT_EQ(streamrt::cpu::worker_spin(), saved);
}

TEST(WorkerCount, SetNumThreadsFromWorkIsAnError) {
  streamrt::Stream s;
  std::string msg;
  s.launch([&] { msg = error_of([] { streamrt::cpu::set_num_threads(2); }); });
  s.synchronize();
  EXPECT_NE(msg.find("worker thread"), std::string::npos) << msg;
}

TEST(WorkerCount, EnvironmentVariableSetsTheCount) {
  // The child counts workers that meet, so it runs with the normal scheduler even when this suite
  // runs under STREAMRT_SCHEDULE=serial (one worker whatever the count).
  const auto r =
      run_child(std::string("env -u STREAMRT_SCHEDULE STREAMRT_NUM_THREADS=3 timeout 120 ") +
                STREAMRT_TEST_CHILD + " num-threads");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("num_threads=3\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("met=3\n"), std::string::npos) << r.output;
}

TEST(WorkerCount, BadEnvironmentVariableIsAClearError) {
  for (const char* bad : {"zero", "0", "-2", "4x"}) {
    expect_bad_setting("STREAMRT_NUM_THREADS", bad,
                       std::string(STREAMRT_TEST_CHILD) + " num-threads");
    // Launching work reports it too, instead of running without workers.
    const auto l = run_child(std::string("STREAMRT_NUM_THREADS=") + bad + " timeout 120 " +
                             STREAMRT_TEST_CHILD + " launch");
    EXPECT_EQ(l.status, 3) << bad << ": " << l.output;
    EXPECT_NE(l.output.find("STREAMRT_NUM_THREADS"), std::string::npos) << l.output;
  }
}

TEST(WorkerSpin, EnvironmentVariableSetsThePollAndBadValuesAreAClearError) {
  const auto r = run_child(std::string("STREAMRT_WORKER_SPIN_US=7 timeout 120 ") +
                           STREAMRT_TEST_CHILD + " worker-spin");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("worker_spin=7\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("launched"), std::string::npos) << r.output;
  for (const char* bad : {"-5", "fast", "2000000"}) {
    expect_bad_setting("STREAMRT_WORKER_SPIN_US", bad,
                       std::string(STREAMRT_TEST_CHILD) + " worker-spin");
  }
}

TEST(CpuPriorities, RangeIsThatOfCpuStreams) {
  const auto range = streamrt::cpu::priority_range();
  const int least = range.first, greatest = range.second;  // lambdas below capture them
  EXPECT_EQ(least, 0);
  EXPECT_LT(greatest, least);
  EXPECT_EQ(streamrt::Stream::priority_range(), std::make_pair(least, greatest));
  // Both ends are accepted, one beyond either is an Error.
  EXPECT_EQ(streamrt::Stream(streamrt::Device{}, greatest).priority(), greatest);
  EXPECT_EQ(streamrt::Stream(streamrt::Device{}, least).priority(), least);
  EXPECT_NE(error_of([&] { streamrt::Stream(streamrt::Device{}, greatest - 1); }), "<no error>");
  EXPECT_NE(error_of([&] { streamrt::Stream(streamrt::Device{}, least + 1); }), "<no error>");
}

struct Seen {
  std::vector<int> policies;
  std::set<std::thread::id> threads;
  bool all_arrived = true;
};

// The policy of `n` different workers: one item per stream, all held at a rendezvous, so that each
// runs on its own worker (a worker holding one cannot take another). Host-run items are off on
// these streams, so none runs on this thread.
Seen worker_policies(int n) {
  std::mutex m;
  Seen seen;
  Rendezvous all(n);
  std::vector<streamrt::Stream> streams;
  for (int i = 0; i < n; ++i) {
    streams.emplace_back();
    streams.back().set_host_run(false);
    streams.back().launch([&] {
      {
        std::lock_guard lock(m);
        seen.policies.push_back(sched_getscheduler(0));
        seen.threads.insert(std::this_thread::get_id());
      }
      const bool met = all.arrive_and_wait();  // a missing worker shows as all_arrived == false
      std::lock_guard lock(m);
      seen.all_arrived = seen.all_arrived && met;
    });
  }
  for (auto& s : streams) s.synchronize();
  return seen;
}

// The worker count of the parameter (streamrt_test::WorkersTest); the batch setting is restored.
class WorkerBatch : public streamrt_test::WorkersTest {
 protected:
  void SetUp() override {
    saved_batch_ = streamrt::cpu::worker_batch();
    WorkersTest::SetUp();
  }
  void TearDown() override {
    streamrt::cpu::set_worker_batch(saved_batch_);
    WorkersTest::TearDown();
  }
  bool saved_batch_ = false;
};

TEST_P(WorkerBatch, EveryWorkerRunsUnderThePolicyAskedFor) {
  const int n = workers();
  if (n > 1) STREAMRT_SKIP_UNDER_SERIAL_SCHEDULE();
  const int host_policy = sched_getscheduler(0);
  for (const bool batch : {true, false, true}) {
    streamrt::cpu::set_worker_batch(batch);
    EXPECT_EQ(streamrt::cpu::worker_batch(), batch);
    const Seen seen = worker_policies(n);
    ASSERT_TRUE(seen.all_arrived) << n << " items did not all run at once on " << n << " workers";
    EXPECT_EQ(seen.threads.size(), static_cast<std::size_t>(n));
    for (const int p : seen.policies) EXPECT_EQ(p, batch ? SCHED_BATCH : SCHED_OTHER) << batch;
    EXPECT_EQ(sched_getscheduler(0), host_policy);  // the host thread is not a worker
  }
}

TEST_P(WorkerBatch, WorkersStartedLaterTakeThePolicy) {
  const int n = workers();
  if (n > 1) STREAMRT_SKIP_UNDER_SERIAL_SCHEDULE();
  // Grown from one worker, then shrunk and grown again under the other policy: no worker is left
  // out, none keeps an old policy.
  for (const bool batch : {true, false}) {
    streamrt::cpu::set_num_threads(1);
    streamrt::cpu::set_worker_batch(batch);
    streamrt::cpu::set_num_threads(n);
    const Seen seen = worker_policies(n);
    ASSERT_TRUE(seen.all_arrived);
    for (const int p : seen.policies) EXPECT_EQ(p, batch ? SCHED_BATCH : SCHED_OTHER) << batch;
  }
}

INSTANTIATE_TEST_SUITE_P(Workers, WorkerBatch, ::testing::Values(1, 2, 4, 8));

TEST(WorkerBatchEnvironment, VariableSetsThePolicyAndBadValuesAreAClearError) {
  const std::string child = std::string(STREAMRT_TEST_CHILD) + " worker-batch";
  const auto on = run_child("STREAMRT_WORKER_BATCH=1 timeout 120 " + child);
  EXPECT_EQ(on.status, 0) << on.output;
  EXPECT_NE(on.output.find("worker_batch=1 item_policy=batch\n"), std::string::npos) << on.output;
  const auto off = run_child("STREAMRT_WORKER_BATCH=0 timeout 120 " + child);
  EXPECT_EQ(off.status, 0) << off.output;
  EXPECT_NE(off.output.find("worker_batch=0 item_policy=other\n"), std::string::npos) << off.output;
  for (const char* bad : {"yes", "2", "on"})
    expect_bad_setting("STREAMRT_WORKER_BATCH", bad, child);
}

}  // namespace
