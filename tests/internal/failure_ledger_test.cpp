// Unit tests of a stream's failure bookkeeping (src/cpu/failures.*): which positions a failure or
// a cancel covers, when the active failure is handed to a synchronize, how a failure inside a
// cancelled range takes over, and what a fork child sees. No threads: the drainer's calls are
// replayed by hand in the order it makes them.
#include <gtest/gtest.h>

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <utility>

#include "cpu/failures.hpp"

namespace {

using streamrt::cpu::ErrorRecord;
using streamrt::cpu::FailureLedger;

std::shared_ptr<ErrorRecord> error(const char* what) {
  auto e = std::make_shared<ErrorRecord>(std::make_exception_ptr(std::runtime_error(what)), "t");
  e->observed.store(true);  // no report on stderr from the tests
  return e;
}

// Expects, for each {position, record}, the record that covers the position (null: none).
void expect_covered(
    const FailureLedger& f,
    std::initializer_list<std::pair<std::uint64_t, std::shared_ptr<ErrorRecord>>> want) {
  for (const auto& [seq, record] : want) EXPECT_EQ(f.at(seq), record) << "position " << seq;
}

// What cancel() records: positions from `first` on are dropped, up to the mark at `mark`.
void cancel_range(FailureLedger& f, std::uint64_t first, std::uint64_t mark,
                  const std::shared_ptr<ErrorRecord>& record) {
  f.add_cancel(first, record);
  f.set_cancel_mark(mark);
}

TEST(FailureLedger, NothingCoveredBeforeAnyFailure) {
  FailureLedger f;
  EXPECT_FALSE(f.ever_failed());
  EXPECT_FALSE(f.maybe_active());
  EXPECT_EQ(f.active(), nullptr);
  expect_covered(f, {{1, nullptr}, {1000, nullptr}});
}

TEST(FailureLedger, FailureCoversItsPositionOnwardsUntilASyncConsumesIt) {
  FailureLedger f;
  auto e = error("boom");
  f.fail(e, 5);
  EXPECT_TRUE(f.ever_failed());
  EXPECT_TRUE(f.maybe_active());
  EXPECT_EQ(f.active(), e);
  expect_covered(f, {{4, nullptr}, {5, e}});
  EXPECT_EQ(f.at(1'000'000), e);  // open: later records complete with it
  f.consume(9);                   // a synchronize at position 9 reported it
  EXPECT_EQ(f.active(), nullptr);
  EXPECT_FALSE(f.maybe_active());
  EXPECT_EQ(f.at(8), e);
  EXPECT_EQ(f.at(9), nullptr);  // the sync's own position and later ones are clean
  EXPECT_EQ(f.at(50), nullptr);
  // A second failure gets its own span; the first one's positions keep theirs.
  auto e2 = error("again");
  f.fail(e2, 12);
  expect_covered(f, {{6, e}, {10, nullptr}, {12, e2}});
}

TEST(FailureLedger, CancelCoversFromTheFirstDroppedItemToItsMark) {
  FailureLedger f;
  auto c = error("cancelled");
  cancel_range(f, 3, 7, c);
  EXPECT_EQ(f.at(3), nullptr);  // nothing until the drainer gets there
  f.reach_dropped(3);
  f.reach_dropped(4);  // the span is already open
  expect_covered(f, {{2, nullptr}, {3, c}, {6, c}});
  EXPECT_EQ(f.active(), nullptr) << "a cancel is not a failure to report";
  f.reach_mark(7);
  expect_covered(f, {{6, c}, {7, nullptr}, {8, nullptr}});
}

TEST(FailureLedger, FailureInsideACancelledRangeTakesOver) {
  FailureLedger f;
  auto c = error("cancelled");
  auto e = error("inherited");
  cancel_range(f, 3, 8, c);
  f.reach_dropped(3);
  f.fail(e, 5);  // a wait at 5 inherits a failure from another stream
  expect_covered(f, {{4, c}, {5, e}});
  f.reach_mark(8);  // must not close the failure's span
  EXPECT_EQ(f.at(8), e);
  EXPECT_EQ(f.active(), e);
}

TEST(FailureLedger, DroppedItemsAfterAFailureStayCoveredByTheFailure) {
  FailureLedger f;
  auto e = error("boom");
  auto c = error("cancelled");
  f.fail(e, 2);
  cancel_range(f, 3, 6, c);
  f.reach_dropped(3);
  f.reach_mark(6);
  expect_covered(f, {{3, e}, {6, e}});
  EXPECT_EQ(f.active(), e);
}

TEST(FailureLedger, TwoCancelsInARowEachCoverTheirOwnRange) {
  FailureLedger f;
  auto c1 = error("first");
  auto c2 = error("second");
  cancel_range(f, 2, 4, c1);
  cancel_range(f, 5, 7, c2);
  f.reach_dropped(2);
  f.reach_mark(4);
  f.reach_dropped(5);
  f.reach_mark(7);
  expect_covered(f, {{3, c1}, {4, nullptr}, {5, c2}, {7, nullptr}});
}

TEST(FailureLedger, ForkChildCancelsWhatTheParentHadNotFinished) {
  FailureLedger f;
  auto c = error("forked");
  f.reset_in_fork_child(3, 8, c);
  expect_covered(f, {{3, nullptr}, {4, c}, {8, c}, {9, nullptr}});

  FailureLedger g;  // an active failure already covers the unfinished positions
  auto e = error("boom");
  g.fail(e, 2);
  g.reset_in_fork_child(3, 8, error("forked"));
  EXPECT_EQ(g.at(5), e);
  EXPECT_EQ(g.active(), e);
}

}  // namespace
