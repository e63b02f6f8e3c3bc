// Workers under SCHED_BATCH (set_worker_batch, STREAMRT_WORKER_BATCH): every worker, present and
// started later, runs under the policy asked for, at 1, 2, 4 and 8 workers; the host thread keeps
// its own; the environment variable sets it and a bad value is a clear error.
#include <gtest/gtest.h>
#include <sched.h>

#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "schedule_util.hpp"
#include "streamrt/streamrt.hpp"
#include "test_util.hpp"

namespace {

using streamrt_test::expect_bad_setting;
using streamrt_test::Rendezvous;
using streamrt_test::run_child;

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
