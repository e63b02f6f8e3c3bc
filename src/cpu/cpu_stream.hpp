#pragma once
// CPU streams: an in-order queue drained by at most one thread at a time, scheduled on the shared
// WorkerPool. Every queue entry gets a sequence number; completed_ is the highest finished one, so
// an event record is just (stream, sequence number) and needs no queue entry unless it is timed.
// See docs/design.md for the full model.
#include <atomic>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "clock.hpp"
#include "parker.hpp"
#include "streamrt/impl/backend.hpp"
#include "worker_pool.hpp"

namespace streamrt::cpu {

class CpuBackend;
class CpuStream;

// A failure of work on a stream, shared by every event and stream that inherits it. Reports itself
// on stderr when the last reference goes and nobody ever observed it.
struct ErrorRecord {
  ErrorRecord(std::exception_ptr e, std::string where_) : error(std::move(e)), where(std::move(where_)) {}
  ~ErrorRecord();
  ErrorRecord(const ErrorRecord&) = delete;
  ErrorRecord& operator=(const ErrorRecord&) = delete;
  // Raises the failure to a host wait (rule 10): the first time as the original exception; later
  // times a streamrt::Error says it was raised before and how to clear it (other exception types
  // cannot be re-worded and are rethrown as they are).
  [[noreturn]] void rethrow();
  std::exception_ptr error;
  std::string where;
  std::atomic<bool> observed{false};  // seen by a wait or a callback: not printed at the end
  std::atomic<bool> reported{false};  // raised by a host wait at least once
};

// True when `e` is a Cancelled (a dropped item, not a failure of work).
bool is_cancellation(const std::exception_ptr& e);

// Text of an exception for messages: what() for std::exception, a placeholder otherwise.
std::string describe(const std::exception_ptr& e);

// One recorded position: work of `stream` up to and including sequence number `seq`.
class CpuEvent final : public impl::EventImpl {
 public:
  CpuEvent(std::shared_ptr<CpuStream> s, std::uint64_t q, EventOptions o, std::int64_t ts);
  const std::shared_ptr<CpuStream> stream;
  const std::uint64_t seq;
  // Set when the stream reaches the record (timing events); -1 until then.
  std::atomic<std::int64_t> timestamp_ns;
};

// A host's Stream::synchronize() in the queue: where the stream hands over its failure.
struct SyncPoint {
  enum State : int { kWaiting, kConsumed, kAbandoned };
  std::atomic<int> state{kWaiting};
  std::shared_ptr<ErrorRecord> error;  // written before `state` becomes kConsumed
  // Non-null for the point a reporting event wait leaves (clear_reported): it clears only this
  // failure, and nobody waits on it.
  std::shared_ptr<ErrorRecord> only;
};

class CpuStream final : public impl::StreamImpl,
                        public Task,
                        public std::enable_shared_from_this<CpuStream> {
 public:
  CpuStream(CpuBackend& backend, Device device, int priority, std::uint64_t id);
  ~CpuStream() override;

  // Host-side API (any thread).
  void enqueue(detail::Work work, const char* label);
  std::shared_ptr<CpuEvent> record(EventOptions options);
  void block(const std::shared_ptr<CpuEvent>& position);
  bool query() const noexcept {
    // Acquire: a true answer must make the finished work's effects visible to the caller.
    const auto submitted = submitted_.load(std::memory_order_acquire);
    return completed_.load(std::memory_order_acquire) >= submitted;
  }
  bool synchronize(std::optional<std::chrono::nanoseconds> timeout);
  // Launched work items not finished yet (queued or running; dropped ones excluded).
  std::uint64_t pending() const noexcept {
    // Relaxed: a debugging figure; it is exact for a caller that synchronized with the stream.
    return work_pending_.load(std::memory_order_relaxed);
  }
  // Drops the queued work that has not started; returns how many items were dropped.
  std::uint64_t cancel();
  // fork() support (see cpu_backend.cpp): take (mutex_ of every stream first, then every
  // failure_mutex_, as runners nest them) / release every lock of the stream, and in the child
  // drop everything that was queued or running in the parent.
  void lock_for_fork(bool failures);
  void unlock_after_fork();
  // Returns what the child must destroy after unlock_after_fork().
  std::shared_ptr<void> reset_in_fork_child();
  std::uint64_t submitted() const noexcept { return submitted_.load(std::memory_order_acquire); }

  // Position queries.
  bool is_complete(std::uint64_t seq) const noexcept {
    return completed_.load(std::memory_order_acquire) >= seq;
  }
  // The failure covering `seq` (work before it failed, was skipped or cancelled), or null.
  std::shared_ptr<ErrorRecord> failure_at(std::uint64_t seq) const;
  // Blocks until `seq` completes (helping the pool when on a worker). False on time-out.
  bool wait_complete(std::uint64_t seq, std::optional<Clock::time_point> deadline, bool blocking);
  // One step of directed help towards `seq` (see cpu_stream.cpp). True when progress was made.
  bool help_towards(std::uint64_t seq);
  // Runs `fn` (on a pool thread) once `seq` completes; false, registering nothing, if it already
  // has.
  bool on_complete(std::uint64_t seq, std::function<void()> fn);
  // True when this thread is running work of this stream (waiting for it would self-deadlock).
  bool held_by_this_thread() const noexcept;
  // True when this thread is running work of any stream.
  static bool running_any_stream() noexcept;
  // The unreported failure, if any, without consuming it.
  bool has_active_error() const;
  // A host wait raised `error` (rule 10): if it is this stream's active failure where the stream
  // is now (its current end), work submitted from now on runs again (at once when idle, else from
  // a clearing point at the current end).
  void clear_reported(const std::shared_ptr<ErrorRecord>& error);

  // "cpu:0 stream 3" for messages.
  std::string str() const { return device().str() + " stream " + std::to_string(id()); }

  // Task: drains the queue on a worker.
  void run() noexcept override;
  // Drains the queue; when stop_at != 0, yields (stays scheduled) once stop_at has completed.
  void drain(std::uint64_t stop_at) noexcept;
  // Priorities run from 0 (least urgent) down to -(kNumLevels - 1) (most urgent); pool level 0 is
  // the most urgent, so priority p maps to level p + kNumLevels - 1.
  int level() const noexcept override { return priority() + (kNumLevels - 1); }

 private:
  enum class Sched { kIdle, kScheduled, kBlocked };
  // kDropped: work removed by cancel() (its callable is gone); kMark: the end of a cancel.
  enum class Kind : std::uint8_t { kWork, kWait, kStamp, kSync, kDropped, kMark };
  struct Entry {
    std::uint64_t seq = 0;
    Kind kind = Kind::kWork;
    const char* label = nullptr;
    std::int64_t enqueue_ns = 0;  // kWork: non-zero when traced (enqueued while tracing was on)
    detail::Work work;
    std::shared_ptr<CpuEvent> event;  // kWait: waited on; kStamp: to stamp
    std::shared_ptr<SyncPoint> sync;  // kSync
  };
  struct Continuation {
    std::uint64_t seq;
    std::shared_ptr<Parker> parker;      // unpark a waiting thread, or
    std::shared_ptr<CpuStream> resume;   // reschedule a stream blocked on us, or
    std::function<void()> callback;      // post a callback task
  };

  void push_locked(Entry e, std::unique_lock<std::mutex>& lock);
  bool add_continuation(Continuation c);
  void complete_locked(std::uint64_t seq, std::unique_lock<std::mutex>& lock);
  void fire(std::vector<Continuation>& ready);
  void resume();
  void set_failure_locked(std::shared_ptr<ErrorRecord> error, std::uint64_t from);
  void close_failure_locked(std::uint64_t to);
  void open_span_locked(std::shared_ptr<ErrorRecord> error, std::uint64_t from);
  std::shared_ptr<ErrorRecord> report_idle_locked(std::unique_lock<std::mutex>& lock);

  CpuBackend& cpu_;
  mutable std::mutex mutex_;
  std::deque<Entry> queue_;                  // guarded by mutex_
  Sched sched_ = Sched::kIdle;               // guarded by mutex_
  std::shared_ptr<ErrorRecord> active_error_;  // guarded by mutex_
  // Written under mutex_, read lock-free by query(). Release/acquire so that a reader that sees a
  // sequence number also sees the entry's effects (completed_) or at least its existence.
  std::atomic<std::uint64_t> submitted_{0};
  std::atomic<std::uint64_t> completed_{0};
  // Work items launched and not finished (dropped ones are subtracted at cancel). Written under
  // mutex_.
  std::atomic<std::uint64_t> work_pending_{0};

  // Cancellations not yet passed by the runner, oldest first (guarded by mutex_). Their ranges
  // [first, mark) are disjoint and increasing: a cancel drops only entries still queued.
  struct CancelRange {
    std::uint64_t first, mark;
    std::shared_ptr<ErrorRecord> error;  // a Cancelled exception
  };
  std::deque<CancelRange> cancels_;
  // Non-zero while a span of cancelled positions is open: its mark (guarded by mutex_). Never
  // open at the same time as active_error_: a failure closes it.
  std::uint64_t cancel_mark_ = 0;

  // Continuations: a min-heap on seq, guarded by mutex_. completed_ is only advanced under
  // mutex_ too, so a registration and a completion never miss each other.
  std::vector<Continuation> continuations_;

  // Failure spans [from, to): positions covered by a failure. A leaf lock: taken last, by
  // failure_at() from other streams' runners while they hold their own mutex_.
  struct Span {
    std::uint64_t from, to;
    std::shared_ptr<ErrorRecord> error;
  };
  mutable std::mutex failure_mutex_;
  std::vector<Span> spans_;  // guarded by failure_mutex_
  std::atomic<bool> ever_failed_{false};
};

}  // namespace streamrt::cpu
