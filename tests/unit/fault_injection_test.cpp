// Fault injection. Work that throws anything, callbacks that throw, bad_alloc,
// streams destroyed while items fail, a million queued items, process exit with pending work,
// and bad STREAMRT_SCHEDULE values. (fork() is in fork_test.cpp: its own process.)
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <cstdlib>
#include <limits>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "streamrt/impl/backend.hpp"
#include "streamrt/streamrt.hpp"
#include "test_util.hpp"

namespace {

using namespace streamrt_test;  // the shared test helpers (test_util.hpp)
using namespace std::chrono_literals;

constexpr bool kSanitized = sizeof(STREAMRT_TEST_SANITIZER) > 1;

std::size_t count_of(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (auto pos = text.find(needle); pos != std::string::npos; pos = text.find(needle, pos + 1))
    ++n;
  return n;
}

struct NotStd {
  int code;
};

// The rest of the line after `key` in `text`; empty when absent. (No <regex>: GCC 12 warns inside
// it under the sanitizer builds' -O1.)
std::string value_after(const std::string& text, const std::string& key) {
  const auto at = text.find(key);
  if (at == std::string::npos) return {};
  const auto from = at + key.size();
  return text.substr(from, text.find('\n', from) - from);
}

// ---- work that throws anything ----------------------------------------------------------------

class ThrowsAnything : public WorkersTest {};

// Pointers are caught by value: clang (14 here) reads a pointer caught by reference after
// std::rethrow_exception from the wrong place (llvm/llvm-project#55340; ASan reports a
// heap-buffer-overflow in the catch), a compiler bug that catching by value avoids.
template <class Ex>
using CatchAs = std::conditional_t<std::is_pointer_v<Ex>, Ex, const Ex&>;

// Launches `thrower` after a good item, checks every rethrow path gives back the same type and
// value, that later work was skipped, and that the stream then works again.
template <class Ex, class Thrower, class Check>
void expect_rethrown_as_itself(Thrower thrower, Check check) {
  streamrt::Stream s;
  std::atomic<int> before{0}, after{0};
  s.launch([&] { before = 1; });
  s.launch(thrower);
  s.launch([&] { after = 1; });
  streamrt::Event e = s.record_event();
  std::array<streamrt::Event, 1> all{e};
  for (int i = 0; i < 2; ++i) {  // events report it every time
    try {
      e.synchronize();
      ADD_FAILURE() << "Event::synchronize did not rethrow";
    } catch (CatchAs<Ex> x) {
      check(x);
    }
  }
  try {
    streamrt::wait_all(all);
    ADD_FAILURE() << "wait_all did not rethrow";
  } catch (CatchAs<Ex> x) {
    check(x);
  }
  EXPECT_NO_THROW(s.synchronize());  // the first event wait reported it (rule 10)
  EXPECT_EQ(before.load(), 1);
  EXPECT_EQ(after.load(), 0);
  // A stream synchronize reports it in the same way.
  s.launch(thrower);
  s.launch([&] { after = 3; });
  try {
    s.synchronize();
    ADD_FAILURE() << "Stream::synchronize did not rethrow";
  } catch (CatchAs<Ex> x) {
    check(x);
  }
  EXPECT_NO_THROW(s.synchronize());  // reported once
  EXPECT_EQ(after.load(), 0);
  s.launch([&] { after = 2; });
  s.synchronize();
  EXPECT_EQ(after.load(), 2);
}

TEST_P(ThrowsAnything, Int) {
  expect_rethrown_as_itself<int>([] { throw 42; }, [](int v) { EXPECT_EQ(v, 42); });
}

TEST_P(ThrowsAnything, CString) {
  expect_rethrown_as_itself<const char*>([] { throw "c-string"; },
                                         [](const char* v) { EXPECT_STREQ(v, "c-string"); });
}

TEST_P(ThrowsAnything, StdString) {
  expect_rethrown_as_itself<std::string>([] { throw std::string("std-string"); },
                                         [](const std::string& v) { EXPECT_EQ(v, "std-string"); });
}

TEST_P(ThrowsAnything, StructNotDerivedFromStdException) {
  expect_rethrown_as_itself<NotStd>([] { throw NotStd{7}; },
                                    [](const NotStd& v) { EXPECT_EQ(v.code, 7); });
}

TEST_P(ThrowsAnything, UniquePointer) {
  expect_rethrown_as_itself<std::unique_ptr<int>>(
      [] { throw std::make_unique<int>(9); },
      [](const std::unique_ptr<int>& v) { EXPECT_EQ(*v, 9); });
}

TEST_P(ThrowsAnything, StreamrtErrorFromUserCode) {
  // A user throwing streamrt::Error / Cancelled themselves: kept as is (not treated as a cancel).
  expect_rethrown_as_itself<streamrt::Error>(
      [] { throw streamrt::Error("user-error"); },
      [](const streamrt::Error& v) {
        // As raised the first time; raised again with a note after it (rule 10).
        EXPECT_EQ(std::string(v.what()).rfind("user-error", 0), 0u) << v.what();
      });
}

TEST_P(ThrowsAnything, BadAllocInsideWork) {
  expect_rethrown_as_itself<std::bad_alloc>(
      [] {
        if constexpr (kSanitized) {
          // Sanitizer allocators abort on impossible sizes instead of throwing.
          throw std::bad_alloc();
        } else {
          // A real failed allocation, thrown by operator new (kept in a volatile so the
          // compiler cannot elide the call).
          static void* volatile sink = nullptr;
          sink = ::operator new(std::numeric_limits<std::size_t>::max() / 2);
          ::operator delete(sink);
        }
      },
      [](const std::bad_alloc&) {});
}

TEST_P(ThrowsAnything, ExceptionThrownWhileUnwindingIsCaughtNotTerminated) {
  // A nested exception (std::throw_with_nested) survives the trip through the runtime.
  expect_rethrown_as_itself<std::runtime_error>(
      [] {
        try {
          throw 5;
        } catch (...) {
          std::throw_with_nested(std::runtime_error("outer"));
        }
      },
      [](const std::runtime_error& v) {
        EXPECT_STREQ(v.what(), "outer");
        try {
          std::rethrow_if_nested(v);
          ADD_FAILURE() << "nested exception lost";
        } catch (int inner) {
          EXPECT_EQ(inner, 5);
        }
      });
}

INSTANTIATE_TEST_SUITE_P(Workers, ThrowsAnything, ::testing::Values(1, 2, 4, 8));

// ---- callbacks that throw ---------------------------------------------------------------------

TEST(ThrowingCallbacks, ManyThrowingCallbacksOfAnyTypeNeverKillTheOnlyWorker) {
  ThreadCount one(1);
  StderrCapture err;
  streamrt::Stream s;
  Gate g;
  s.launch([&] {
    if (!g.wait()) fail_hard("never released");
  });
  streamrt::Event e = s.record_event();
  constexpr int kCallbacks = 50;
  std::atomic<int> called{0};
  for (int i = 0; i < kCallbacks; ++i) {
    e.on_complete([&, i](std::exception_ptr) {
      called.fetch_add(1);
      switch (i % 4) {
        case 0:
          throw 42;
        case 1:
          throw NotStd{i};
        case 2:
          throw std::runtime_error("cb-marker-" + std::to_string(i));
        default:
          throw std::bad_alloc();
      }
    });
  }
  g.open();
  ASSERT_TRUE(eventually([&] { return called.load() == kCallbacks; }));
  ASSERT_TRUE(err.wait_for_text("cb-marker-46"));
  // Every throw was reported, one line each.
  EXPECT_TRUE(eventually([&] {
    return count_of(err.text(), "streamrt: a completion callback threw") ==
           static_cast<std::size_t>(kCallbacks);
  })) << err.text();
  // The worker survived all of them.
  EXPECT_TRUE(runs_new_work(s));
}

TEST(ThrowingCallbacks, CallbackOnAFailedEventThatRethrowsTheFailureIsReportedOnce) {
  StderrCapture err;
  streamrt::Stream s;
  s.launch([] { throw std::runtime_error("work-failure-5521"); });
  streamrt::Event e = s.record_event();
  Gate done;
  e.on_complete([&](std::exception_ptr p) {
    done.open();
    std::rethrow_exception(p);  // the callback rethrows what it was given
  });
  ASSERT_TRUE(done.wait());
  EXPECT_TRUE(err.wait_for_text("work-failure-5521"));
  EXPECT_THROW(s.synchronize(), std::runtime_error);  // the stream still reports it itself
}

// ---- streams destroyed while items fail -------------------------------------------------------

TEST(DestroyedWhileFailing, UnobservedFailureIsReportedExactlyOnceWhenTheStreamGoes) {
  StderrCapture err;
  Gate started, release;
  std::weak_ptr<streamrt::impl::StreamImpl> weak;
  std::atomic<int> skipped_ran{0};
  {
    streamrt::Stream s;
    weak = s.impl();
    s.launch([&] {
      started.open();
      if (!release.wait()) fail_hard("never released");
      throw std::runtime_error("dying-stream-failure-9173");
    });
    for (int i = 0; i < 100; ++i) s.launch([&] { skipped_ran.fetch_add(1); });
    ASSERT_TRUE(started.wait());
  }  // last handle dropped while the failing item runs
  release.open();
  ASSERT_TRUE(eventually([&] { return weak.expired(); }));
  ASSERT_TRUE(err.wait_for_text("dying-stream-failure-9173"));
  EXPECT_EQ(count_of(err.text(), "dying-stream-failure-9173"), 1u) << err.text();
  EXPECT_EQ(skipped_ran.load(), 0);
}

TEST(DestroyedWhileFailing, AnInheritedFailureSharedByTwoDyingStreamsIsReportedOnce) {
  StderrCapture err;
  std::weak_ptr<streamrt::impl::StreamImpl> wa, wb;
  Gate release;
  {
    streamrt::Stream a, b;
    wa = a.impl();
    wb = b.impl();
    a.launch([&] {
      if (!release.wait()) fail_hard("never released");
      throw NotStd{1};
    });
    b.wait_event(a.record_event());
    b.launch([] {});
  }
  release.open();
  ASSERT_TRUE(eventually([&] { return wa.expired() && wb.expired(); }));
  ASSERT_TRUE(err.wait_for_text("was never reported"));
  std::this_thread::sleep_for(20ms);  // a second (wrong) report would come from the same thread
  EXPECT_EQ(count_of(err.text(), "was never reported"), 1u) << err.text();
}

TEST(DestroyedWhileFailing, ManyShortLivedStreamsFailingConcurrently) {
  // Streams created, failed and dropped from several threads at once: every failure is reported
  // (no stream lost, none reported twice) and nothing crashes.
  StderrCapture err;
  constexpr int kThreads = 4, kPerThread = 50;
  std::vector<std::weak_ptr<streamrt::impl::StreamImpl>> weaks(kThreads * kPerThread);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        streamrt::Stream s;
        weaks[static_cast<std::size_t>(t * kPerThread + i)] = s.impl();
        s.launch([] {});
        s.launch(
            [t, i] { throw std::runtime_error("fail-" + std::to_string(t * 1000 + i) + "|"); });
        s.launch([] {});
      }
    });
  }
  for (auto& th : threads) th.join();
  ASSERT_TRUE(eventually([&] {
    for (auto& w : weaks) {
      if (!w.expired()) return false;
    }
    return true;
  }));
  ASSERT_TRUE(eventually([&] {
    return count_of(err.text(), "was never reported") ==
           static_cast<std::size_t>(kThreads * kPerThread);
  })) << err.text().substr(0, 2000);
  const std::string text = err.text();
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kPerThread; ++i) {
      EXPECT_EQ(count_of(text, "fail-" + std::to_string(t * 1000 + i) + "|"), 1u);
    }
  }
}

// ---- a million queued items -------------------------------------------------------------------

// Fewer under sanitizers (each queued item costs several times more there); same code path.
constexpr int kMillion = kSanitized ? 200'000 : 1'000'000;

TEST(MillionQueued, AllRunInOrder) {
  streamrt::Stream s;
  Blocker hold;
  hold.launch_on(s);
  ASSERT_TRUE(hold.started.wait());
  long next = 0, out_of_order = 0;  // touched by stream work only, read after synchronize
  for (int i = 0; i < kMillion; ++i) {
    s.launch([&next, &out_of_order, i] {
      if (next != i) ++out_of_order;
      next = i + 1;
    });
  }
  EXPECT_EQ(s.pending(), static_cast<std::uint64_t>(kMillion) + 1);
  hold.release.open();
  s.synchronize();
  EXPECT_EQ(next, kMillion);
  EXPECT_EQ(out_of_order, 0);
  EXPECT_EQ(s.pending(), 0u);
}

TEST(MillionQueued, CancelDropsThemAllAndDestroysTheirState) {
  streamrt::Stream s;
  Blocker hold;
  hold.launch_on(s);
  ASSERT_TRUE(hold.started.wait());
  auto alive = std::make_shared<int>(0);  // each item holds a reference
  std::atomic<int> ran{0};
  for (int i = 0; i < kMillion; ++i) s.launch([alive, &ran] { ran.fetch_add(1); });
  EXPECT_EQ(alive.use_count(), kMillion + 1);
  streamrt::Event after = s.record_event();
  EXPECT_EQ(s.cancel(), static_cast<std::uint64_t>(kMillion));
  EXPECT_EQ(alive.use_count(), 1);  // released by cancel() itself
  hold.release.open();
  EXPECT_THROW(after.synchronize(), streamrt::Cancelled);
  EXPECT_EQ(ran.load(), 0);
  EXPECT_EQ(s.pending(), 0u);
}

TEST(MillionQueued, MemoryPerQueuedItemIsMeasured) {
  // Measured in a fresh process, so freed memory of other tests does not hide the growth.
  const auto r =
      run_child(std::string(STREAMRT_PROCESS_CHILD) + " queue-memory " + std::to_string(kMillion));
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string figure = value_after(r.output, "bytes_per_item: ");
  ASSERT_FALSE(figure.empty()) << r.output;
  const double bytes = std::stod(figure);
  std::printf("[ figure   ] memory per queued item: %.1f bytes (%d items)\n", bytes, kMillion);
  RecordProperty("bytes_per_queued_item", std::to_string(bytes));
  // A sanity ceiling only: an entry is ~100 bytes, so a page per item means a leak or a copy.
  EXPECT_GT(bytes, 0.0);
  EXPECT_LT(bytes, 2048.0);
}

// ---- threads the OS refuses
// ----------------------------------------------------------------------

TEST(RefusedThreads, MoreWorkersThanTheOsStartsIsResourceUnavailableAndThePoolGoesOn) {
  if (kSanitized) GTEST_SKIP() << "an address-space limit leaves a sanitizer no room to run";
  // Unscheduled: the serial schedule would size the pool to one worker whatever is asked.
  const auto r = run_child("env -u STREAMRT_SCHEDULE " + std::string(STREAMRT_PROCESS_CHILD) +
                           " refused-threads");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("first 1 second 1 kept 1 ran 2"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("error: cannot start 256 CPU workers: the OS refused worker"),
            std::string::npos)
      << r.output;
}

// ---- process exit with pending work -----------------------------------------------------------

TEST(ProcessExit, PendingWorkIsFinishedAndAnUnobservedFailureIsReported) {
  for (const char* schedule : {"", "STREAMRT_SCHEDULE=serial ", "STREAMRT_SCHEDULE=random:7 "}) {
    const auto r =
        run_child(std::string(schedule) + STREAMRT_PROCESS_CHILD + " exit-pending 20000");
    SCOPED_TRACE(schedule);
    EXPECT_EQ(r.status, 0) << r.output;
    EXPECT_NE(r.output.find("main returns"), std::string::npos) << r.output;
    for (int k = 0; k < 3; ++k) {
      EXPECT_NE(r.output.find("stream " + std::to_string(k) + ": 20000 items in order"),
                std::string::npos)
          << r.output;
    }
    EXPECT_NE(r.output.find("late work ran"), std::string::npos) << r.output;
    EXPECT_EQ(count_of(r.output, "exit-unobserved-failure"), 1u) << r.output;
  }
}

// ---- STREAMRT_SCHEDULE ------------------------------------------------------------------------

TEST(ScheduleEnv, BadValuesGiveAClearError) {
  for (const char* bad : {"bogus", "random", "random:", "random:12x", "random:-3", "serial2",
                          "random:99999999999999999999999"}) {
    const auto r = run_child(std::string("STREAMRT_SCHEDULE='") + bad + "' " +
                             STREAMRT_PROCESS_CHILD + " schedule");
    SCOPED_TRACE(bad);
    EXPECT_EQ(r.status, 3) << r.output;
    EXPECT_NE(r.output.find(std::string("error: STREAMRT_SCHEDULE='") + bad + "'"),
              std::string::npos)
        << r.output;
    EXPECT_NE(r.output.find("random:SEED"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("serial"), std::string::npos) << r.output;
  }
}

TEST(ScheduleEnv, BadValuesAreRefusedBeforeAnythingIsQueued) {
  for (const std::string var : {"STREAMRT_SCHEDULE", "STREAMRT_NUM_THREADS"}) {
    const auto r = run_child(var + "=bogus " + STREAMRT_PROCESS_CHILD + " default-stream");
    SCOPED_TRACE(var);
    EXPECT_EQ(r.status, 3) << r.output;
    EXPECT_EQ(r.output.find("got the default stream"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("error: " + var + "='bogus'"), std::string::npos) << r.output;
  }
}

TEST(ScheduleEnv, GoodValuesRun) {
  for (const char* good : {"", "default", "serial", "random:0", "random:18446744073709551615"}) {
    const auto r = run_child(std::string("STREAMRT_SCHEDULE='") + good + "' " +
                             STREAMRT_PROCESS_CHILD + " schedule");
    SCOPED_TRACE(good);
    EXPECT_EQ(r.status, 0) << r.output;
    EXPECT_NE(r.output.find("ok 100"), std::string::npos) << r.output;
  }
}

TEST(ScheduleEnv, SerialRunsOneItemAtATime) {
  const auto r = run_child(std::string("STREAMRT_SCHEDULE=serial ") + STREAMRT_PROCESS_CHILD +
                           " max-concurrency");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("peak: 1 "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("num_threads: 4"), std::string::npos) << r.output;  // as configured
}

TEST(ScheduleEnv, RandomPicksAreSeededAndVaryWithTheSeed) {
  auto order = [](const std::string& env) {
    const auto r = run_child(env + STREAMRT_PROCESS_CHILD + " schedule-order");
    EXPECT_EQ(r.status, 0) << r.output;
    return value_after(r.output, "order:");
  };
  // The normal scheduler: first ready, first run. Without host-run items: the host's device-wide
  // synchronize would otherwise run a waiting stream's item itself while the one worker runs
  // another, and which of the two gets in first is a race (seen under ASan). The random
  // schedules turn host-run items off themselves.
  const std::string fifo = order("STREAMRT_SCHEDULE= STREAMRT_HOST_RUN=0 ");
  EXPECT_EQ(fifo, " 0 1 2 3 4 5 6 7");
  bool any_differs = false;
  for (int seed = 1; seed <= 6; ++seed) {
    const std::string env = "STREAMRT_SCHEDULE=random:" + std::to_string(seed) + " ";
    const std::string first = order(env);
    EXPECT_EQ(first.size(), fifo.size()) << first;
    EXPECT_EQ(order(env), first) << "seed " << seed << " does not replay";
    any_differs = any_differs || first != fifo;
  }
  EXPECT_TRUE(any_differs) << "random schedules all ran in FIFO order";
}

}  // namespace
