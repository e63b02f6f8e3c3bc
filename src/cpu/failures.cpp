// Failure spans, the active failure and cancel ranges of a CPU stream (failures.hpp).
#include "failures.hpp"

#include <algorithm>
#include <cstdio>
#include <limits>

#include "launch_origin.hpp"
#include "streamrt/error.hpp"

namespace streamrt::cpu {
namespace {
constexpr std::uint64_t kOpen = std::numeric_limits<std::uint64_t>::max();
}  // namespace

std::string describe(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    return ex.what();
  } catch (...) {
    return "an exception not derived from std::exception";
  }
}

bool is_cancellation(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const Cancelled&) {
    return true;
  } catch (...) {
    return false;
  }
}

void report_unrecorded(const std::exception_ptr& error) noexcept {
  // No allocation here: memory has just run out. The failure cannot reach a wait, so it is
  // printed rather than lost without a word (docs/reliability.md, "Failure model").
  std::fputs(
      "streamrt: out of memory recording a failure of stream work; the failure cannot be "
      "raised to a wait and is printed here instead: ",
      stderr);
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    std::fputs(e.what(), stderr);
  } catch (...) {
    std::fputs("an exception not derived from std::exception", stderr);
  }
  std::fputc('\n', stderr);
}

void ErrorRecord::rethrow() {
  observed.store(true, std::memory_order_relaxed);
  // Relaxed: the flag only picks the wording; the error itself is immutable.
  if (!reported.exchange(true, std::memory_order_relaxed)) std::rethrow_exception(error);
  try {
    std::rethrow_exception(error);
  } catch (const Cancelled&) {
    throw;  // a cancellation is no failure to clear
  } catch (const Error& e) {
    throw Error(e.text() + " [raised again: this failure of work on " + where +
                " was already raised by an earlier wait. The work that depended on it was "
                "skipped, so its results are not valid: submit that work again. Work submitted "
                "after the earlier wait runs normally]");
  }
}

ErrorRecord::~ErrorRecord() {
  if (!observed.load(std::memory_order_relaxed)) {
    std::string work;
    try {
      work =
          op != nullptr || origin != nullptr ? failure_site(op, origin, where) : "work on " + where;
    } catch (...) {
      // No memory for the text: the stream's name alone.
    }
    std::fprintf(stderr,
                 "streamrt: a failure in %s was never reported (no synchronize, wait or callback "
                 "saw it): %s\n",
                 work.empty() ? "stream work" : work.c_str(), describe(error).c_str());
  }
}

void FailureLedger::fail(std::shared_ptr<ErrorRecord> error, std::uint64_t seq) {
  reserve_span();
  if (cancel_mark_ != 0) {
    // A failure inside a cancelled range (a wait that inherits one) takes over from here on: it
    // must be reported, a cancellation need not be.
    close_span(seq);
    cancel_mark_ = 0;
  }
  active_ = error;
  // Release: a synchronize that sees the failing position complete (acquire on the stream's
  // completed_, stored after this) sees the flag too.
  active_flag_.store(true, std::memory_order_release);
  open_span(std::move(error), seq);
}

void FailureLedger::consume(std::uint64_t seq) {
  close_span(seq);
  active_.reset();
  // Relaxed: the flag only lets a synchronize skip its queue entry; a stale true costs one entry.
  active_flag_.store(false, std::memory_order_relaxed);
}

void FailureLedger::add_cancel(std::uint64_t first, std::shared_ptr<ErrorRecord> error) {
  cancels_.push_back(CancelRange{first, 0, std::move(error)});
}

void FailureLedger::reach_dropped(std::uint64_t seq) {
  // Events recorded from here to the cancel's mark complete with Cancelled, unless a failure
  // already covers them (that one must still be reported).
  if (!active_ && cancel_mark_ == 0) {
    reserve_span();
    open_span(cancels_.front().error, seq);
    cancel_mark_ = cancels_.front().mark;
  }
}

void FailureLedger::reach_mark(std::uint64_t seq) {
  if (cancel_mark_ == seq) {
    close_span(seq);
    cancel_mark_ = 0;
  }
  cancels_.pop_front();
}

std::shared_ptr<ErrorRecord> FailureLedger::at(std::uint64_t seq) const {
  if (!ever_failed()) return nullptr;
  std::lock_guard lock(mutex_);
  for (auto it = spans_.rbegin(); it != spans_.rend(); ++it) {
    if (it->from <= seq && seq < it->to) return it->error;
    if (it->to <= seq) break;  // spans are ordered and disjoint
  }
  return nullptr;
}

void FailureLedger::reserve_span() {
  std::lock_guard lock(mutex_);
  if (spans_.size() == spans_.capacity())
    spans_.reserve(std::max<std::size_t>(4, 2 * spans_.size()));
}

void FailureLedger::open_span(std::shared_ptr<ErrorRecord> error, std::uint64_t from) {
  std::lock_guard lock(mutex_);
  spans_.push_back(Span{from, kOpen, std::move(error)});
  // Release: at()'s acquire load then finds the span under mutex_.
  ever_failed_.store(true, std::memory_order_release);
}

void FailureLedger::close_span(std::uint64_t to) {
  std::lock_guard lock(mutex_);
  spans_.back().to = to;
}

void FailureLedger::reset_in_fork_child(std::uint64_t done, std::uint64_t end,
                                        std::shared_ptr<ErrorRecord> cancelled) {
  // Only the forking thread exists and it holds the locks: no locking here.
  if (end > done && !active_) {
    if (cancel_mark_ != 0) spans_.back().to = done + 1;
    spans_.push_back(Span{done + 1, end + 1, std::move(cancelled)});
    ever_failed_.store(true, std::memory_order_relaxed);  // single thread
  }
  cancel_mark_ = 0;
  cancels_.clear();
}

}  // namespace streamrt::cpu
