// The memory an op's kernel uses stays valid until the kernel has run, although kernels hold raw
// pointers (ops::submit's rule, storage.hpp): through the allocator's stream-ordered free while
// the op is tracked, and through references that submit keeps with the kernel where that order
// does not hold (memory not from the allocator, dependency tracking off, a capture). Each case has
// its negative control: with the references switched off the same scenario goes wrong.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <vector>

#include "ops/creation.hpp"
#include "ops/tracking.hpp"
#include "ops_test_util.hpp"
#include "streamrt/streamrt.hpp"

namespace streamrt {
namespace {

using test::all_equal;

constexpr std::int64_t kN = 4096;

using ReferencesSwitch = test::ScopedSwitch<&ops::set_kernel_references_for_testing>;

class KernelMemory : public test::WorkersWithEmptyCache {};

INSTANTIATE_TEST_SUITE_P(Workers, KernelMemory, ::testing::ValuesIn(test::kWorkerCounts));

// Wrapped memory (from_blob with a deleter) read by a queued op and dropped by the host: the
// deleter must wait until the op has run. Returns whether it ran while the op was still queued.
bool deleter_runs_before_the_op(Tensor& result) {
  auto memory = std::make_shared<std::vector<float>>(kN, 2.0f);
  auto gate_open = std::make_shared<std::atomic<bool>>(false);
  auto early = std::make_shared<std::atomic<bool>>(false);
  Stream s;
  StreamContext ctx(s);
  test::Gate gate;
  {
    // The deleter frees nothing (the vector outlives the test), so a premature call is seen,
    // not a use after free.
    Tensor blob = from_blob(memory->data(), {kN}, DType::Float32, [gate_open, early](void*) {
      if (!gate_open->load()) early->store(true);
    });
    gate.hold(s);
    result = blob + 1.0;
  }  // the host's last reference to the blob goes here
  gate_open->store(true);
  gate.open();
  s.synchronize();
  return early->load();
}

TEST_P(KernelMemory, WrappedMemoryOutlivesTheQueuedOp) {
  Tensor result;
  EXPECT_FALSE(deleter_runs_before_the_op(result))
      << "from_blob's deleter ran while an op reading the memory was still queued";
  EXPECT_TRUE(all_equal(result, 3.0f));
}

TEST_P(KernelMemory, WithoutReferencesTheDeleterRunsUnderTheQueuedOp) {
  ReferencesSwitch off(false);
  Tensor result;
  EXPECT_TRUE(deleter_runs_before_the_op(result));
}

// With dependency tracking off an op's read leaves no pending use in the free: an untracked op
// on `b` reads a tensor of stream `a`, the host drops the tensor, and `a` allocates the same
// size and fills it before b's op runs. Returns whether the op read the new tensor's values.
// `b` is held by a user event (parked, so a's work still finds a worker with one worker and
// no host-run, as under the schedule fuzzers).
bool untracked_read_sees_reused_memory(Tensor& result) {
  Stream a, b;
  UserEvent hold;
  Tensor filler;
  {
    DependencyTrackingGuard untracked(false);
    Tensor t;
    {
      StreamContext ctx(a);
      t = full({kN}, 1.0);
    }
    a.synchronize();
    {
      StreamContext ctx(b);
      b.wait_event(hold.event());
      result = t * 2.0;
    }
    t = Tensor();  // dropped while b's op is queued
    StreamContext ctx(a);
    filler = full({kN}, 5.0);
    a.synchronize();
  }
  hold.complete();
  b.synchronize();
  EXPECT_TRUE(all_equal(filler, 5.0f)) << "b's op wrote into a's new tensor";
  return all_equal(result, 10.0f);
}

TEST_P(KernelMemory, UntrackedOpKeepsItsMemory) {
  Tensor result;
  EXPECT_FALSE(untracked_read_sees_reused_memory(result))
      << "an untracked op read memory that was reused while it was queued";
  EXPECT_TRUE(all_equal(result, 2.0f));
}

TEST_P(KernelMemory, WithoutReferencesAnUntrackedOpReadsReusedMemory) {
  ReferencesSwitch off(false);
  Tensor result;
  EXPECT_TRUE(untracked_read_sees_reused_memory(result));
}

// A captured op's intermediate tensor, dropped during the capture, is used by every replay:
// tensors allocated after the capture must not get its memory. Returns whether a replay wrote
// into such a tensor.
bool replay_writes_into_new_tensors(Tensor& out) {
  Stream s;
  StreamContext ctx(s);
  Tensor a = full({kN}, 2.0);
  a.wait();
  Graph g;
  {
    GraphCapture cap(s, g);
    Tensor c = a + a;  // dropped at the end of the capture
    out = c * 3.0;
  }
  std::vector<Tensor> fillers;
  for (int i = 0; i < 4; ++i) fillers.push_back(full({kN}, 7.0));
  s.synchronize();
  GraphExec exec = g.instantiate();
  exec.launch(s);
  s.synchronize();
  bool written = false;
  for (const Tensor& f : fillers) written = written || !all_equal(f, 7.0f);
  return written;
}

TEST_P(KernelMemory, CapturedOpKeepsItsMemoryForReplays) {
  Tensor out;
  EXPECT_FALSE(replay_writes_into_new_tensors(out))
      << "a replay wrote into memory handed out after the capture";
  EXPECT_TRUE(all_equal(out, 12.0f));
}

TEST_P(KernelMemory, WithoutReferencesAReplayWritesIntoNewTensors) {
  ReferencesSwitch off(false);
  Tensor out;
  EXPECT_TRUE(replay_writes_into_new_tensors(out));
}

// The tracked case needs no references: a tensor dropped while ops on its own stream and on
// another stream still read it is reused by neither too early (the allocator's rule), and every
// result is right.
TEST_P(KernelMemory, TrackedOpsNeedNoReferences) {
  ReferencesSwitch off(false);  // what the tracked path runs with anyway
  Stream a, b;
  test::Gate gate_a, gate_b;
  Tensor ra, rb, fa, fb;
  {
    Tensor t;
    {
      StreamContext ctx(a);
      t = full({kN}, 1.0);
      gate_a.hold(a);
      ra = t + 1.0;
    }
    {
      StreamContext ctx(b);
      gate_b.hold(b);
      rb = t * 4.0;
    }
  }
  {
    StreamContext ctx(a);
    fa = full({kN}, 8.0);
  }
  {
    StreamContext ctx(b);
    fb = full({kN}, 9.0);
  }
  gate_a.open();
  gate_b.open();
  EXPECT_TRUE(all_equal(ra, 2.0f));
  EXPECT_TRUE(all_equal(rb, 4.0f));
  EXPECT_TRUE(all_equal(fa, 8.0f));
  EXPECT_TRUE(all_equal(fb, 9.0f));
}

}  // namespace
}  // namespace streamrt
