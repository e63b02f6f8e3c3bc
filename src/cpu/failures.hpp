#pragma once
// Failures of a CPU stream as positions: which sequence numbers a failure (or a cancel) covers,
// the failure waiting to be reported, and the cancel ranges the drainer has not passed yet. Pure
// bookkeeping, no threads: the stream calls it from its drain loop and its slow paths. See
// docs/design.md, "Failures".
#include <atomic>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace streamrt::cpu {

// A failure of work on a stream, shared by every event and stream that inherits it. Reports itself
// on stderr when the last reference goes and nobody ever observed it.
struct ErrorRecord {
  ErrorRecord(std::exception_ptr e, std::string where_, const char* op_ = nullptr,
              const char* origin_ = nullptr)
      : error(std::move(e)), where(std::move(where_)), op(op_), origin(origin_) {}
  ~ErrorRecord();
  ErrorRecord(const ErrorRecord&) = delete;
  ErrorRecord& operator=(const ErrorRecord&) = delete;
  // Raises the failure to a host wait (rule 10): the first time as the original exception; later
  // times a streamrt::Error says it was raised before and how to clear it (other exception types
  // cannot be re-worded and are rethrown as they are).
  [[noreturn]] void rethrow();
  std::exception_ptr error;
  std::string where;
  const char* op;      // the failed item's label (static storage), or null
  const char* origin;  // where it was launched from (impl::LaunchOriginScope), or null
  std::atomic<bool> observed{false};  // seen by a wait or a callback: not printed at the end
  std::atomic<bool> reported{false};  // raised by a host wait at least once
};

// True when `e` is a Cancelled (a dropped item, not a failure of work).
bool is_cancellation(const std::exception_ptr& e);

// Text of an exception for messages: what() for std::exception, a placeholder otherwise.
std::string describe(const std::exception_ptr& e);

// A failure that could not be recorded (no memory for its record), printed on stderr without
// allocating.
void report_unrecorded(const std::exception_ptr& error) noexcept;

// The failure state of one stream.
//
// Spans [from, to) say which positions a failure covers: a record at such a position completes
// with that failure. The *active* failure is the one a synchronize will report; while it is set,
// work is skipped. A cancel drops queued items and covers their positions with a Cancelled span,
// from the first dropped item to the cancel's mark, unless a failure already covers them.
//
// Methods marked "stream lock" must be called with the owning stream's mutex held (one drainer or
// slow path at a time); the spans have their own leaf lock, so at()/ever_failed() may be called
// from any thread, also while another stream's mutex is held.
class FailureLedger {
 public:
  // An item at `seq` threw, or a wait at `seq` inherited `error`: it becomes the active failure
  // and covers `seq` onwards. A cancel span open at that point ends at `seq`. Stream lock. Out
  // of memory it throws bad_alloc before changing anything.
  void fail(std::shared_ptr<ErrorRecord> error, std::uint64_t seq);
  // The failure a synchronize would report now, or null. Stream lock.
  const std::shared_ptr<ErrorRecord>& active() const noexcept { return active_; }
  // A synchronize at `seq` has taken the active failure: its span ends at `seq` and work after it
  // runs again. Stream lock; requires active().
  void consume(std::uint64_t seq);
  // True when a failure may be active; readable without the stream lock. A true seen after the
  // failing position completed (acquire on completed_) is reliable; a stale true costs a slow path.
  bool maybe_active() const noexcept { return active_flag_.load(std::memory_order_acquire); }

  // cancel(): a new range, dropping items from `first` on, covered by `error` (a Cancelled). Its
  // mark is set once the mark entry has its position. Stream lock.
  void add_cancel(std::uint64_t first, std::shared_ptr<ErrorRecord> error);
  void set_cancel_mark(std::uint64_t mark) { cancels_.back().mark = mark; }
  std::uint64_t last_cancel_mark() const { return cancels_.back().mark; }
  void drop_last_cancel() { cancels_.pop_back(); }
  // The drainer reaches a dropped item at `seq`: unless a failure or an earlier drop already covers
  // it, a Cancelled span opens here and ends at the oldest cancel's mark. Stream lock.
  void reach_dropped(std::uint64_t seq);
  // The drainer reaches the oldest cancel's mark at `seq`. Stream lock.
  void reach_mark(std::uint64_t seq);

  // The failure covering `seq`, or null. Thread-safe (leaf lock).
  std::shared_ptr<ErrorRecord> at(std::uint64_t seq) const;
  // True once any span was opened; lets at() skip the lock on streams that never failed.
  bool ever_failed() const noexcept { return ever_failed_.load(std::memory_order_acquire); }

  // fork(): the span lock is taken before fork and released in both processes (stream lock held
  // too). In the child, positions (done, end] the parent had not finished complete with
  // `cancelled` unless the active failure covers them; pending cancels are forgotten.
  void lock_for_fork() { mutex_.lock(); }
  void unlock_after_fork() { mutex_.unlock(); }
  void reset_in_fork_child(std::uint64_t done, std::uint64_t end,
                           std::shared_ptr<ErrorRecord> cancelled);

 private:
  // Room for one more span, so that open_span cannot fail. May throw bad_alloc.
  void reserve_span();
  void open_span(std::shared_ptr<ErrorRecord> error, std::uint64_t from);
  void close_span(std::uint64_t to);

  std::shared_ptr<ErrorRecord> active_;  // stream lock
  std::atomic<bool> active_flag_{false};
  struct CancelRange {
    std::uint64_t first, mark;
    std::shared_ptr<ErrorRecord> error;  // a Cancelled exception
  };
  // Cancels not yet passed by the drainer, oldest first (stream lock). Their ranges [first, mark)
  // are disjoint and increasing: a cancel drops only entries still queued.
  std::deque<CancelRange> cancels_;
  // Non-zero while a Cancelled span is open: its mark (stream lock). Never open while a failure is
  // active: a failure closes it.
  std::uint64_t cancel_mark_ = 0;

  struct Span {
    std::uint64_t from, to;
    std::shared_ptr<ErrorRecord> error;
  };
  mutable std::mutex mutex_;  // leaf lock
  std::vector<Span> spans_;   // guarded by mutex_; ordered and disjoint
  std::atomic<bool> ever_failed_{false};
};

}  // namespace streamrt::cpu
