// Stream capture and graph replay (docs/graphs.md): what is recorded instead of run, fork/join
// across streams, the refused calls, tensor ops with their memory, replay as stream work
// (order, events, serialized launches, parallel branches, failures, cancel) and update().
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "test_util.hpp"

namespace streamrt {
namespace {

using streamrt_test::Blocker;
using streamrt_test::Gate;
using streamrt_test::Rendezvous;
using streamrt_test::ThreadCount;
using streamrt_test::WorkersTest;

// Appends to a shared log from stream work (any thread).
struct Log {
  std::mutex mutex;
  std::vector<int> items;
  void add(int v) {
    std::lock_guard lock(mutex);
    items.push_back(v);
  }
  std::vector<int> take() {
    std::lock_guard lock(mutex);
    return std::exchange(items, {});
  }
};

std::vector<int> iota_vector(int n) {
  std::vector<int> v(n);
  for (int i = 0; i < n; ++i) v[i] = i;
  return v;
}

void expect_error_containing(const std::function<void()>& fn, const std::string& text) {
  try {
    fn();
    ADD_FAILURE() << "no Error thrown; expected one containing '" << text << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
}

class GraphTest : public WorkersTest {};

TEST_P(GraphTest, CapturedWorkIsRecordedNotRunThenReplayed) {
  Stream s;
  std::atomic<int> runs{0};
  Graph g;
  EXPECT_FALSE(s.is_capturing());
  {
    GraphCapture cap(s, g);
    EXPECT_TRUE(s.is_capturing());
    s.launch([&] { runs.fetch_add(1); });
    s.launch("second", [&] { runs.fetch_add(10); });
  }
  EXPECT_FALSE(s.is_capturing());
  s.synchronize();
  EXPECT_EQ(runs.load(), 0);
  EXPECT_EQ(g.num_nodes(), 2u);
  EXPECT_EQ(g.num_edges(), 1u);
  const std::string dot = g.to_dot();
  EXPECT_NE(dot.find("digraph"), std::string::npos);
  EXPECT_NE(dot.find("second"), std::string::npos);
  EXPECT_NE(dot.find("n0 -> n1"), std::string::npos);
  // A label with a quote and a backslash stays inside its DOT string.
  Graph quoted;
  {
    GraphCapture cap(s, quoted);
    s.launch("say \"hi\" \\ bye", [] {});
  }
  const std::string quoted_dot = quoted.to_dot();
  EXPECT_NE(quoted_dot.find("say \\\"hi\\\" \\\\ bye"), std::string::npos) << quoted_dot;
  GraphExec exec = g.instantiate();
  EXPECT_EQ(exec.num_nodes(), 2u);
  for (int i = 0; i < 3; ++i) exec.launch(s);
  s.synchronize();
  EXPECT_EQ(runs.load(), 33);
}

TEST_P(GraphTest, ChainReplaysInCaptureOrderEveryTime) {
  Stream s;
  Log log;
  s.begin_capture();
  for (int i = 0; i < 100; ++i) s.launch([&log, i] { log.add(i); });
  Graph g = s.end_capture();
  GraphExec exec = g.instantiate();
  exec.launch(s);
  exec.launch(s);
  s.synchronize();
  std::vector<int> want = iota_vector(100);
  want.insert(want.end(), want.begin(), want.end());
  EXPECT_EQ(log.take(), want);
}

TEST_P(GraphTest, ForkJoinThroughEvents) {
  Stream s, side;
  Log log;
  Graph g;
  {
    GraphCapture cap(s, g);
    s.launch([&] { log.add(0); });
    Event fork = s.record_event();
    side.wait_event(fork);  // joins the capture
    EXPECT_TRUE(side.is_capturing());
    side.launch([&] { log.add(1); });
    s.launch([&] { log.add(2); });
    Event join = side.record_event();
    s.wait_event(join);
    s.launch([&] { log.add(3); });
  }
  EXPECT_FALSE(side.is_capturing());
  EXPECT_EQ(g.num_nodes(), 4u);
  // 0 -> 1, 0 -> 2, 1 -> 3, 2 -> 3
  EXPECT_EQ(g.num_edges(), 4u);
  GraphExec exec = g.instantiate();
  for (int r = 0; r < 5; ++r) {
    exec.launch(s);
    s.synchronize();
    const auto got = log.take();
    ASSERT_EQ(got.size(), 4u);
    EXPECT_EQ(got.front(), 0);
    EXPECT_EQ(got.back(), 3);
  }
}

TEST_P(GraphTest, WaitStreamJoinsAndJoinsBack) {
  Stream s, side;
  std::atomic<int> n{0};
  s.begin_capture();
  side.wait_stream(s);
  side.launch([&] { n.fetch_add(1); });
  s.wait_stream(side);
  Graph g = s.end_capture();
  EXPECT_EQ(g.num_nodes(), 1u);
  g.instantiate().launch(s);
  s.synchronize();
  EXPECT_EQ(n.load(), 1);
}

TEST_P(GraphTest, UnjoinedStreamFailsEndCaptureAndIsNamed) {
  Stream s, side;
  s.begin_capture();
  s.launch([] {});
  side.wait_event(s.record_event());
  side.launch([] {});
  expect_error_containing([&] { s.end_capture(); }, side.str());
  EXPECT_FALSE(s.is_capturing());
  EXPECT_FALSE(side.is_capturing());
  // Both streams work normally afterwards.
  std::atomic<int> n{0};
  side.launch([&] { n.fetch_add(1); });
  side.synchronize();
  EXPECT_EQ(n.load(), 1);
}

TEST_P(GraphTest, EndCaptureOnAJoinedStreamIsRefused) {
  Stream s, side;
  s.begin_capture();
  side.wait_event(s.record_event());
  expect_error_containing([&] { side.end_capture(); }, "end_capture on that stream");
  s.wait_stream(side);
  s.end_capture();
  expect_error_containing([&] { s.end_capture(); }, "is not capturing");
}

TEST_P(GraphTest, NestedCaptureIsRefusedAndTheFirstContinues) {
  Stream s, side;
  std::atomic<int> n{0};
  s.begin_capture();
  expect_error_containing([&] { s.begin_capture(); }, "nested capture");
  side.wait_event(s.record_event());
  expect_error_containing([&] { side.begin_capture(); }, "joined the capture");
  s.wait_stream(side);
  s.launch([&] { n.fetch_add(1); });
  Graph g = s.end_capture();
  g.instantiate().launch(s);
  s.synchronize();
  EXPECT_EQ(n.load(), 1);
}

TEST_P(GraphTest, CaptureIntoANonEmptyGraphIsRefused) {
  Stream s;
  Graph g;
  {
    GraphCapture cap(s, g);
    s.launch([] {});
  }
  expect_error_containing([&] { GraphCapture again(s, g); }, "clear()");
  g.clear();
  EXPECT_TRUE(g.empty());
  { GraphCapture again(s, g); }
}

// Every call that cannot be captured throws Error and invalidates the capture; end_capture then
// throws too, naming what invalidated it, and leaves the graph empty.
struct Refused {
  const char* name;
  std::function<void(Stream&, Event&)> call;
};

TEST_P(GraphTest, UncapturableCallsThrowAndInvalidate) {
  const std::vector<Refused> cases = {
      {"Stream::synchronize", [](Stream& s, Event&) { s.synchronize(); }},
      {"Stream::synchronize_for",
       [](Stream& s, Event&) { s.synchronize_for(std::chrono::milliseconds(1)); }},
      {"Stream::query", [](Stream& s, Event&) { s.query(); }},
      {"Stream::cancel", [](Stream& s, Event&) { s.cancel(); }},
      {"synchronize(device)", [](Stream&, Event&) { synchronize(); }},
      {"Event::synchronize", [](Stream&, Event& e) { e.synchronize(); }},
      {"Event::wait_for", [](Stream&, Event& e) { e.wait_for(std::chrono::milliseconds(1)); }},
      {"Event::query", [](Stream&, Event& e) { e.query(); }},
      {"wait_all", [](Stream&, Event& e) { wait_all(std::span<const Event>(&e, 1)); }},
      {"Event::on_complete", [](Stream&, Event& e) { e.on_complete([](std::exception_ptr) {}); }},
      {"Event::elapsed_time",
       [](Stream& s, Event&) {
         Event a(EventOptions{.enable_timing = true}), b(EventOptions{.enable_timing = true});
         a.record(s);
         b.record(s);
         a.elapsed_time(b);
       }},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    Stream s;
    std::atomic<int> runs{0};
    s.begin_capture();
    s.launch([&] { runs.fetch_add(1); });
    Event e = s.record_event();
    expect_error_containing([&] { c.call(s, e); }, "cannot be captured");
    // Later captured calls are refused too.
    expect_error_containing([&] { s.launch([] {}); }, "invalidated");
    expect_error_containing([&] { s.end_capture(); }, c.name);
    EXPECT_FALSE(s.is_capturing());
    s.synchronize();
    EXPECT_EQ(runs.load(), 0);
  }
}

TEST_P(GraphTest, CaptureModesDecideWhoMayWaitForTheDevice) {
  Stream s;
  auto sync_elsewhere = [] {
    std::exception_ptr error;
    std::thread t([&] {
      try {
        synchronize();
      } catch (...) {
        error = std::current_exception();
      }
    });
    t.join();
    return error;
  };
  // Global: refused on every thread.
  s.begin_capture(CaptureMode::Global);
  EXPECT_NE(sync_elsewhere(), nullptr);
  EXPECT_THROW(s.end_capture(), Error);
  // ThreadLocal: refused on the capturing thread only.
  s.begin_capture(CaptureMode::ThreadLocal);
  EXPECT_EQ(sync_elsewhere(), nullptr);
  EXPECT_THROW(synchronize(), Error);
  EXPECT_THROW(s.end_capture(), Error);
  // Relaxed: allowed everywhere; the capture stays valid.
  s.begin_capture(CaptureMode::Relaxed);
  EXPECT_EQ(sync_elsewhere(), nullptr);
  synchronize();
  s.launch([] {});
  EXPECT_EQ(s.end_capture().num_nodes(), 1u);
  // Calls on the captured stream itself are refused in every mode.
  s.begin_capture(CaptureMode::Relaxed);
  EXPECT_THROW(s.synchronize(), Error);
  EXPECT_THROW(s.end_capture(), Error);
}

TEST_P(GraphTest, WaitOnPendingOutsideWorkIsRefused) {
  Stream s, other;
  Gate gate;
  other.launch([&] { gate.wait(); });
  Event outside = other.record_event();
  s.begin_capture();
  expect_error_containing([&] { s.wait_event(outside); }, "outside the capture");
  EXPECT_THROW(s.end_capture(), Error);
  gate.open();
  other.synchronize();
  // Completed outside work needs no edge and is accepted.
  s.begin_capture();
  s.wait_event(outside);
  EXPECT_EQ(s.end_capture().num_nodes(), 0u);
}

TEST_P(GraphTest, LaunchingOnACapturingStreamIsRefused) {
  Stream s, t;
  s.begin_capture();
  s.launch([] {});
  Graph g = s.end_capture();
  GraphExec exec = g.instantiate();
  t.begin_capture();
  expect_error_containing([&] { exec.launch(t); }, "capturing");
  t.end_capture();
}

// ---- replay as stream work --------------------------------------------------------------------

TEST_P(GraphTest, ReplayIsOrderedWithTheStreamsOtherWork) {
  Stream s;
  Log log;
  s.begin_capture();
  s.launch([&] { log.add(1); });
  s.launch([&] { log.add(2); });
  GraphExec exec = s.end_capture().instantiate();
  s.launch([&] { log.add(0); });
  exec.launch(s);
  s.launch([&] { log.add(3); });
  exec.launch(s);
  s.synchronize();
  EXPECT_EQ(log.take(), (std::vector<int>{0, 1, 2, 3, 1, 2}));
}

TEST_P(GraphTest, EventAfterReplayCompletesWhenItIsDone) {
  Stream s;
  Gate gate;
  s.begin_capture();
  s.launch([&] { gate.wait(); });
  GraphExec exec = s.end_capture().instantiate();
  exec.launch(s);
  Event after = s.record_event();
  EXPECT_FALSE(after.query());
  EXPECT_FALSE(after.wait_for(std::chrono::milliseconds(20)));
  gate.open();
  after.synchronize();
  EXPECT_TRUE(after.query());
}

// Launches of one exec never overlap, even on different streams: the second replay's node would
// find the first one inside (it holds the gate) if they did.
TEST_P(GraphTest, TwoLaunchesOfOneExecRunOneAfterTheOther) {
  STREAMRT_SKIP_UNDER_SERIAL_SCHEDULE();
  if (workers() < 2) GTEST_SKIP() << "needs two workers to be able to overlap at all";
  Stream s1, s2;
  std::atomic<bool> inside{false};
  std::atomic<bool> overlap{false};
  std::atomic<int> entered{0};
  Gate first_started, release;
  s1.begin_capture();
  s1.launch([&] {
    if (inside.exchange(true)) overlap = true;
    if (entered.fetch_add(1) == 0) {
      first_started.open();
      release.wait();
    }
    inside = false;
  });
  GraphExec exec = s1.end_capture().instantiate();
  exec.launch(s1);
  ASSERT_TRUE(first_started.wait());
  exec.launch(s2);
  // s2 is idle otherwise: unless ordered after the first replay, its replay would start now.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(entered.load(), 1);
  release.open();
  s2.synchronize();
  s1.synchronize();
  EXPECT_EQ(entered.load(), 2);
  EXPECT_FALSE(overlap.load());
}

// Independent branches meet at a rendezvous: a serial replay would time out.
TEST_P(GraphTest, IndependentBranchesRunInParallel) {
  STREAMRT_SKIP_UNDER_SERIAL_SCHEDULE();
  if (workers() < 2) GTEST_SKIP() << "a rendezvous of two branches needs two workers";
  constexpr int kBranches = 2;
  Stream s, b1, b2;
  auto meet = std::make_shared<std::unique_ptr<Rendezvous>>();
  std::atomic<int> met{0};
  s.begin_capture();
  Event fork = s.record_event();
  for (Stream* b : {&b1, &b2}) {
    b->wait_event(fork);
    b->launch([meet, &met] {
      if ((*meet)->arrive_and_wait()) met.fetch_add(1);
    });
    s.wait_event(b->record_event());
  }
  GraphExec exec = s.end_capture().instantiate();
  for (int r = 0; r < 3; ++r) {
    *meet = std::make_unique<Rendezvous>(kBranches);
    exec.launch(s);
    s.synchronize();
  }
  EXPECT_EQ(met.load(), 3 * kBranches);
}

// An edge holds its successor back even when a worker is free to take it: C (on a side stream,
// after A through an event) must not start while A runs. A waits until C has started, giving up
// after a while; a replay that ran A and C side by side (no edge kept) lets C see A unfinished.
TEST_P(GraphTest, EdgesHoldSuccessorsBackWhileWorkersAreFree) {
  STREAMRT_SKIP_UNDER_SERIAL_SCHEDULE();
  if (workers() < 2) GTEST_SKIP() << "needs a free worker that could take C early";
  Stream s, side;
  std::atomic<bool> a_done{false}, c_saw_a_done{false};
  auto c_started = std::make_shared<std::unique_ptr<Gate>>();
  s.begin_capture();
  s.launch([&, c_started] {
    (*c_started)->wait(std::chrono::milliseconds(200));  // times out unless C starts early
    a_done = true;
  });
  side.wait_event(s.record_event());
  side.launch([&, c_started] {
    c_saw_a_done = a_done.load();
    (*c_started)->open();
  });
  s.launch([] {});  // B: A gets two successors, so A and C are not one inline chain
  s.wait_event(side.record_event());
  GraphExec exec = s.end_capture().instantiate();
  for (int r = 0; r < 2; ++r) {
    *c_started = std::make_unique<Gate>();
    a_done = false;
    exec.launch(s);
    s.synchronize();
    EXPECT_TRUE(c_saw_a_done.load()) << "replay " << r;
  }
}

TEST_P(GraphTest, ThrowingNodeFailsTheReplayLikeAnItem) {
  Stream s;
  Log log;
  s.begin_capture();
  for (int i = 0; i < 5; ++i) {
    s.launch([&log, i] {
      if (i == 2) throw std::runtime_error("node 2 failed");
      log.add(i);
    });
  }
  GraphExec exec = s.end_capture().instantiate();
  exec.launch(s);
  std::atomic<bool> later{false};
  s.launch([&] { later = true; });  // skipped: the stream failed before it
  try {
    s.synchronize();
    ADD_FAILURE() << "the failure was not rethrown";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "node 2 failed");
  }
  EXPECT_EQ(log.take(), (std::vector<int>{0, 1}));
  EXPECT_FALSE(later.load());
  // The stream is usable after the report.
  exec.launch(s);
  EXPECT_THROW(s.synchronize(), std::runtime_error);
  EXPECT_EQ(log.take(), (std::vector<int>{0, 1}));
  s.launch([&] { later = true; });
  s.synchronize();
  EXPECT_TRUE(later.load());
}

TEST_P(GraphTest, ThrowingBranchFailsTheReplayAndSkipsLaterLevels) {
  Stream s, b1, b2;
  std::atomic<bool> joined{false};
  s.begin_capture();
  Event fork = s.record_event();
  b1.wait_event(fork);
  b2.wait_event(fork);
  b1.launch([] { throw std::runtime_error("branch failed"); });
  b2.launch([] {});
  s.wait_event(b1.record_event());
  s.wait_event(b2.record_event());
  s.launch([&] { joined = true; });
  GraphExec exec = s.end_capture().instantiate();
  exec.launch(s);
  EXPECT_THROW(s.synchronize(), std::runtime_error);
  EXPECT_FALSE(joined.load());
}

TEST_P(GraphTest, CancelDropsAQueuedReplay) {
  Stream s;
  std::atomic<int> runs{0};
  s.begin_capture();
  s.launch([&] { runs.fetch_add(1); });
  GraphExec exec = s.end_capture().instantiate();
  Blocker blocker;
  blocker.launch_on(s);
  ASSERT_TRUE(blocker.started.wait());
  exec.launch(s);
  EXPECT_EQ(s.cancel(), 1u);
  blocker.release.open();
  s.synchronize();
  EXPECT_EQ(runs.load(), 0);
  exec.launch(s);
  s.synchronize();
  EXPECT_EQ(runs.load(), 1);
}

TEST_P(GraphTest, UpdateSwapsCallablesOfTheSameTopology) {
  Stream s;
  std::atomic<int> value{0};
  auto capture_chain = [&](int n, int v) {
    s.begin_capture();
    for (int i = 0; i < n; ++i) s.launch([&value, v] { value = v; });
    return s.end_capture();
  };
  GraphExec exec = capture_chain(3, 1).instantiate();
  exec.launch(s);
  s.synchronize();
  EXPECT_EQ(value.load(), 1);
  exec.update(capture_chain(3, 2));
  exec.launch(s);
  s.synchronize();
  EXPECT_EQ(value.load(), 2);
  expect_error_containing([&] { exec.update(capture_chain(4, 3)); }, "4 nodes");
  // Same node count, other edges: two independent nodes (fork/join through a side stream).
  Stream side;
  s.begin_capture();
  side.wait_event(s.record_event());
  s.launch([&] { value = 4; });
  side.launch([&] { value = 4; });
  s.wait_stream(side);
  s.launch([&] { value = 4; });
  Graph other = s.end_capture();
  ASSERT_EQ(other.num_nodes(), 3u);
  expect_error_containing([&] { exec.update(other); }, "node 1 depends on");
  exec.launch(s);
  s.synchronize();
  EXPECT_EQ(value.load(), 2);  // the failed updates changed nothing
}

TEST_P(GraphTest, EventRecordedDuringCaptureStandsForTheLatestReplayAfterIt) {
  Stream s;
  Gate gate;
  s.begin_capture();
  s.launch([&] { gate.wait(); });
  Event inside = s.record_event();
  GraphExec exec = s.end_capture().instantiate();
  EXPECT_TRUE(inside.query());  // never replayed: nothing to wait for
  exec.launch(s);
  EXPECT_FALSE(inside.query());
  Stream other;
  std::atomic<bool> after{false};
  other.wait_event(inside);
  other.launch([&] { after = true; });
  EXPECT_FALSE(other.synchronize_for(std::chrono::milliseconds(20)));
  EXPECT_FALSE(after.load());
  gate.open();
  other.synchronize();
  EXPECT_TRUE(after.load());
  EXPECT_TRUE(inside.query());
}

// ---- tensor ops ---------------------------------------------------------------------------------

std::vector<float> values(const Tensor& t) {
  const float* p = t.data<float>();
  return std::vector<float>(p, p + t.numel());
}

TEST_P(GraphTest, TensorOpsReplayIntoTheSameStorage) {
  Stream s;
  StreamContext ctx(s);
  Tensor a = full({64}, 2.0);
  Tensor b = full({64}, 3.0);
  a.wait();
  b.wait();
  Tensor out;
  Graph g;
  {
    GraphCapture cap(s, g);
    Tensor c = a + b;  // allocated during the capture: belongs to the graph
    out = c * b;
  }
  EXPECT_EQ(g.num_nodes(), 2u);
  const void* storage = out.data_ptr_unsafe();
  GraphExec exec = g.instantiate();
  exec.launch();
  EXPECT_EQ(values(out), std::vector<float>(64, 15.0f));
  // New inputs: copy into the captured tensors (on the launch stream), then replay.
  a.fill_(5.0);
  exec.launch();
  EXPECT_EQ(values(out), std::vector<float>(64, 24.0f));
  EXPECT_EQ(out.data_ptr_unsafe(), storage);
}

// The tracker's cross-stream waits during the capture become graph edges (and a fork/join).
TEST_P(GraphTest, DependencyTrackingBecomesEdges) {
  Stream s1, s2;
  Tensor a = full({256}, 1.0);
  a.wait();
  Tensor x, y;
  s1.begin_capture();
  {
    StreamContext c1(s1);
    x = a + a;  // node 0 on s1
  }
  {
    StreamContext c2(s2);
    y = x * x;  // node 1 on s2: waits for x (s2 joins the capture)
  }
  EXPECT_TRUE(s2.is_capturing());
  s1.wait_stream(s2);
  Graph g = s1.end_capture();
  ASSERT_EQ(g.num_nodes(), 2u);
  EXPECT_NE(g.to_dot().find("n0 -> n1"), std::string::npos);
  GraphExec exec = g.instantiate();
  for (int r = 1; r <= 3; ++r) {
    StreamContext c1(s1);
    a.fill_(static_cast<double>(r));
    exec.launch(s1);
    EXPECT_EQ(values(y), std::vector<float>(256, static_cast<float>(4 * r * r)));
  }
}

// Eager work after a replay waits for it through the tracker, on any stream: a position recorded
// during the capture stands for the latest replay.
TEST_P(GraphTest, EagerOpsAfterAReplayWaitForIt) {
  Stream s, other;
  Tensor a = full({128}, 2.0);
  Tensor out = zeros({128});
  out.wait();
  a.wait();
  Gate gate;
  s.begin_capture();
  {
    StreamContext c(s);
    s.launch([&] { gate.wait(); });
    out.copy_(a + a);
  }
  GraphExec exec = s.end_capture().instantiate();
  exec.launch(s);
  Tensor y;
  {
    StreamContext c(other);
    y = out + 1.0;
  }
  EXPECT_FALSE(y.ready());
  gate.open();
  EXPECT_EQ(values(y), std::vector<float>(128, 5.0f));
}

TEST_P(GraphTest, HostReadOfACapturedTensorIsRefused) {
  Stream s;
  Tensor a = full({8}, 1.0);
  a.wait();
  s.begin_capture();
  Tensor b;
  {
    StreamContext c(s);
    b = a + a;
  }
  expect_error_containing([&] { b.data<float>(); }, "cannot be captured");
  EXPECT_THROW(s.end_capture(), Error);
}

INSTANTIATE_TEST_SUITE_P(Workers, GraphTest, ::testing::Values(1, 2, 4, 8));

}  // namespace
}  // namespace streamrt
