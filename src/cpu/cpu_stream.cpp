// CPU stream queues: submission, the drain loop, failures, continuations and waiting.
#include "cpu_stream.hpp"

#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <limits>

#include "cpu_backend.hpp"
#include "tracing.hpp"
#include "streamrt/error.hpp"
#include "streamrt/stream.hpp"

namespace streamrt::cpu {
namespace {

// Streams whose work this thread is running now (more than one when a waiting worker helps).
// A plain array: trivially destructible, so it stays usable while the thread or process exits.
constexpr int kMaxHelpDepth = 32;
thread_local const CpuStream* tls_running[2 * kMaxHelpDepth];  // helping stops at kMaxHelpDepth
thread_local int tls_depth = 0;

// How long a host waiter polls before it parks (unless the event is `blocking`). A wake-up from a
// parked state costs several us (docs/performance.md, "Figures behind constants"), so polling for
// short waits wins; beyond this it wastes a core.
constexpr auto kHostSpin = std::chrono::microseconds(20);

constexpr std::uint64_t kOpen = std::numeric_limits<std::uint64_t>::max();

struct ContinuationLater {
  template <class C>
  bool operator()(const C& a, const C& b) const noexcept {
    return a.seq > b.seq;
  }
};

// While a stream's work runs: it is held by this thread, and it is the current stream, so ops
// launched from inside work go to the same stream, after the running item.
class RunningScope {
 public:
  explicit RunningScope(CpuStream* s)
      : previous_(impl::exchange_current_stream(Stream(s->shared_from_this()))) {
    tls_running[tls_depth++] = s;
  }
  ~RunningScope() {
    --tls_depth;
    impl::exchange_current_stream(previous_);
  }
  RunningScope(const RunningScope&) = delete;
  RunningScope& operator=(const RunningScope&) = delete;

 private:
  Stream previous_;
};

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

void ErrorRecord::rethrow() {
  observed.store(true, std::memory_order_relaxed);
  // Relaxed: the flag only picks the wording; the error itself is immutable.
  if (!reported.exchange(true, std::memory_order_relaxed)) std::rethrow_exception(error);
  try {
    std::rethrow_exception(error);
  } catch (const Cancelled&) {
    throw;  // a cancellation is no failure to clear
  } catch (const Error& e) {
    throw Error(std::string(e.what()) + " [raised again: this failure of work on " + where +
                " was already raised by an earlier wait. The work that depended on it was "
                "skipped, so its results are not valid: submit that work again. Work submitted "
                "after the earlier wait runs normally]");
  }
}

ErrorRecord::~ErrorRecord() {
  if (!observed.load(std::memory_order_relaxed)) {
    std::fprintf(stderr,
                 "streamrt: a failure in work on %s was never reported (no synchronize, wait or "
                 "callback saw it): %s\n",
                 where.c_str(), describe(error).c_str());
  }
}

CpuEvent::CpuEvent(std::shared_ptr<CpuStream> s, std::uint64_t q, EventOptions o, std::int64_t ts)
    : impl::EventImpl(s->backend(), s->device(), o),
      stream(std::move(s)),
      seq(q),
      timestamp_ns(ts) {}

CpuStream::CpuStream(CpuBackend& backend, Device device, int priority, std::uint64_t id)
    : impl::StreamImpl(backend, device, priority, id), cpu_(backend) {}

CpuStream::~CpuStream() = default;

void CpuStream::push_locked(Entry e, std::unique_lock<std::mutex>& lock) {
  const auto seq = submitted_.load(std::memory_order_relaxed) + 1;
  e.seq = seq;
  const bool work = e.kind == Kind::kWork;
  // Queued before the sequence number is published: if push_back throws (bad_alloc), nothing was
  // submitted and the stream stays consistent.
  queue_.push_back(std::move(e));
  submitted_.store(seq, std::memory_order_release);
  if (work) work_pending_.fetch_add(1, std::memory_order_relaxed);
  if (sched_ == Sched::kIdle) {
    sched_ = Sched::kScheduled;
    lock.unlock();
    cpu_.pool().push(shared_from_this());
  }
}

void CpuStream::enqueue(detail::Work work, const char* label) {
  Entry e;
  e.kind = Kind::kWork;
  e.label = label;
  e.enqueue_ns = tracing_enabled() ? now_ns() : 0;  // the one relaxed load tracing costs when off
  e.work = std::move(work);
  std::unique_lock lock(mutex_);
  push_locked(std::move(e), lock);
}

std::shared_ptr<CpuEvent> CpuStream::record(EventOptions options) {
  auto self = shared_from_this();
  if (!options.enable_timing) {
    // No queue entry: the record is the current end of the stream, read without the mutex. Every
    // launch that happens-before this record stored its sequence number (release, in push_locked)
    // before that, so this acquire load sees it or a later one: the event covers that launch.
    const auto seq = submitted_.load(std::memory_order_acquire);
    return std::make_shared<CpuEvent>(std::move(self), seq, options, -1);
  }
  std::unique_lock lock(mutex_);
  if (sched_ == Sched::kIdle) {
    // Nothing queued or running: the stream is at the record now.
    const auto seq = submitted_.load(std::memory_order_relaxed);
    lock.unlock();
    return std::make_shared<CpuEvent>(std::move(self), seq, options, now_ns());
  }
  auto ev = std::make_shared<CpuEvent>(self, submitted_.load(std::memory_order_relaxed) + 1,
                                       options, -1);
  Entry e;
  e.kind = Kind::kStamp;
  e.event = ev;
  push_locked(std::move(e), lock);
  return ev;
}

void CpuStream::block(const std::shared_ptr<CpuEvent>& position) {
  if (position->stream.get() == this) return;  // already in stream order
  if (position->stream->is_complete(position->seq) &&
      !position->stream->ever_failed_.load(std::memory_order_acquire)) {
    return;  // nothing to wait for and no failure to inherit
  }
  Entry e;
  e.kind = Kind::kWait;
  e.event = position;
  std::unique_lock lock(mutex_);
  push_locked(std::move(e), lock);
}

std::shared_ptr<ErrorRecord> CpuStream::failure_at(std::uint64_t seq) const {
  if (!ever_failed_.load(std::memory_order_acquire)) return nullptr;
  std::lock_guard lock(failure_mutex_);
  for (auto it = spans_.rbegin(); it != spans_.rend(); ++it) {
    if (it->from <= seq && seq < it->to) return it->error;
    if (it->to <= seq) break;  // spans are ordered and disjoint
  }
  return nullptr;
}

void CpuStream::set_failure_locked(std::shared_ptr<ErrorRecord> error, std::uint64_t from) {
  if (cancel_mark_ != 0) {
    // A failure inside a cancelled range (a wait that inherits one) takes over from here on: it
    // must be reported, a cancellation need not be.
    close_failure_locked(from);
    cancel_mark_ = 0;
  }
  active_error_ = error;
  open_span_locked(std::move(error), from);
}

void CpuStream::open_span_locked(std::shared_ptr<ErrorRecord> error, std::uint64_t from) {
  std::lock_guard lock(failure_mutex_);
  spans_.push_back(Span{from, kOpen, std::move(error)});
  // Release: failure_at's acquire load then finds the span under failure_mutex_.
  ever_failed_.store(true, std::memory_order_release);
}

std::uint64_t CpuStream::cancel() {
  auto error = std::make_shared<ErrorRecord>(
      std::make_exception_ptr(
          Cancelled("work on " + str() + " was dropped by Stream::cancel() before it started")),
      str());
  // The user asked for it: not a failure to report on stderr if nobody looks at it.
  error->observed.store(true, std::memory_order_relaxed);
  std::vector<detail::Work> dropped;
  {
    std::unique_lock lock(mutex_);
    std::uint64_t first = 0;
    std::size_t n = 0;
    for (const auto& e : queue_) {
      if (e.kind != Kind::kWork) continue;
      if (first == 0) first = e.seq;
      ++n;
    }
    if (n == 0) return 0;
    dropped.reserve(n);
    // Everything that can throw comes before the first change. The queue is not empty, so the
    // stream is scheduled or blocked and push_locked keeps the lock.
    const auto mark = submitted_.load(std::memory_order_relaxed) + 1;
    cancels_.push_back(CancelRange{first, mark, std::move(error)});
    try {
      Entry e;
      e.kind = Kind::kMark;
      push_locked(std::move(e), lock);
    } catch (...) {
      cancels_.pop_back();
      throw;
    }
    for (auto& e : queue_) {
      if (e.kind != Kind::kWork) continue;
      e.kind = Kind::kDropped;
      dropped.push_back(std::move(e.work));
    }
    work_pending_.fetch_sub(n, std::memory_order_relaxed);
  }
  // Destroyed here, on the caller, outside the lock: destructors of captured state may call
  // streamrt (even this stream).
  const auto count = dropped.size();
  dropped.clear();
  return count;
}

void CpuStream::close_failure_locked(std::uint64_t to) {
  std::lock_guard lock(failure_mutex_);
  spans_.back().to = to;
}

bool CpuStream::has_active_error() const {
  std::lock_guard lock(mutex_);
  return active_error_ != nullptr;
}

void CpuStream::clear_reported(const std::shared_ptr<ErrorRecord>& error) {
  if (is_cancellation(error->error)) return;  // a cancellation is cleared by a stream sync only
  std::unique_lock lock(mutex_);
  if (sched_ == Sched::kIdle) {
    // Everything queued has run: clear now if it is still this stream's active failure.
    if (active_error_ == error) report_idle_locked(lock);
    return;
  }
  // Work queued before this point was submitted before the report and is still skipped; the
  // point clears the failure when the stream reaches it, as a synchronize's point does. It is
  // queued even when the failure is not active yet: a queued wait may still inherit it.
  auto sp = std::make_shared<SyncPoint>();
  sp->only = error;
  Entry e;
  e.kind = Kind::kSync;
  e.sync = std::move(sp);
  push_locked(std::move(e), lock);  // not idle: keeps the lock, pushes nothing to the pool
}

std::shared_ptr<ErrorRecord> CpuStream::report_idle_locked(std::unique_lock<std::mutex>& lock) {
  // Idle with an unreported failure: report it at a new position, so that events recorded after
  // the call are clean.
  const auto seq = submitted_.load(std::memory_order_relaxed) + 1;
  submitted_.store(seq, std::memory_order_release);
  close_failure_locked(seq);
  auto error = std::move(active_error_);
  active_error_.reset();
  complete_locked(seq, lock);
  return error;
}

bool CpuStream::held_by_this_thread() const noexcept {
  return std::find(tls_running, tls_running + tls_depth, this) != tls_running + tls_depth;
}

bool CpuStream::running_any_stream() noexcept { return tls_depth > 0; }

bool CpuStream::add_continuation(Continuation c) {
  std::lock_guard lock(mutex_);
  if (completed_.load(std::memory_order_relaxed) >= c.seq) return false;
  continuations_.push_back(std::move(c));
  std::push_heap(continuations_.begin(), continuations_.end(), ContinuationLater{});
  return true;
}

bool CpuStream::on_complete(std::uint64_t seq, std::function<void()> fn) {
  Continuation c;
  c.seq = seq;
  c.callback = std::move(fn);
  return add_continuation(std::move(c));
}

void CpuStream::complete_locked(std::uint64_t seq, std::unique_lock<std::mutex>& lock) {
  // Release: whoever reads seq with acquire (query, waits, other streams' runners) sees the
  // effects of the work up to seq. Stored under mutex_, so add_continuation cannot miss it.
  completed_.store(seq, std::memory_order_release);
  if (continuations_.empty() || continuations_.front().seq > seq) return;
  std::vector<Continuation> ready;
  while (!continuations_.empty() && continuations_.front().seq <= seq) {
    std::pop_heap(continuations_.begin(), continuations_.end(), ContinuationLater{});
    ready.push_back(std::move(continuations_.back()));
    continuations_.pop_back();
  }
  lock.unlock();  // continuations take other streams' locks and the pool's
  fire(ready);
  lock.lock();
}

void CpuStream::fire(std::vector<Continuation>& ready) {
  for (auto& c : ready) {
    if (c.parker) {
      c.parker->unpark();
    } else if (c.resume) {
      c.resume->resume();
    } else if (c.callback) {
      cpu_.pool().push(std::make_shared<FunctionTask>(std::move(c.callback), level()));
    }
  }
}

void CpuStream::resume() {
  {
    std::lock_guard lock(mutex_);
    sched_ = Sched::kScheduled;
  }
  cpu_.pool().push(shared_from_this());
}

void CpuStream::run() noexcept { drain(0); }

void CpuStream::drain(std::uint64_t stop_at) noexcept {
  RunningScope running(this);
  WorkerPool& pool = cpu_.pool();
  Clock::time_point equal_waiting_since{};  // the time slice (WorkerPool::should_yield)
  std::unique_lock lock(mutex_);
  for (;;) {
    if (queue_.empty()) {
      sched_ = Sched::kIdle;
      return;
    }
    Entry& front = queue_.front();
    // Waits hold even while a failure is active: a synchronize may report it before the event
    // completes, and work launched after that must still wait for the event.
    if (front.kind == Kind::kWait && !front.event->stream->is_complete(front.event->seq)) {
      // Park the stream, not the worker: the waited-on stream resumes us when it gets there.
      auto target = front.event;
      sched_ = Sched::kBlocked;
      lock.unlock();
      Continuation c;
      c.seq = target->seq;
      c.resume = shared_from_this();
      if (target->stream->add_continuation(std::move(c))) return;
      lock.lock();
      sched_ = Sched::kScheduled;
      continue;
    }
    Entry e = std::move(front);
    queue_.pop_front();
    switch (e.kind) {
      case Kind::kWork: {
        if (active_error_) {
          // Skipped: nothing runs on the results of failed work. Its state is released now.
          lock.unlock();
          e.work.reset();
          lock.lock();
          work_pending_.fetch_sub(1, std::memory_order_relaxed);
          break;
        }
        lock.unlock();
        std::exception_ptr error;
        const std::int64_t start_ns = e.enqueue_ns != 0 ? now_ns() : 0;
        try {
          e.work();
        } catch (...) {
          error = std::current_exception();
        }
        if (e.enqueue_ns != 0) {
          trace_item(RawTrace{device(), id(), priority(), e.label != nullptr ? e.label : "launch",
                              e.enqueue_ns, start_ns, now_ns(), WorkerPool::worker_index()});
        }
        e.work.reset();
        lock.lock();
        work_pending_.fetch_sub(1, std::memory_order_relaxed);
        if (error) set_failure_locked(std::make_shared<ErrorRecord>(error, str()), e.seq);
        break;
      }
      case Kind::kDropped:
        // Events recorded from here to the cancel's mark complete with Cancelled, unless a
        // failure already covers them (that one must still be reported).
        if (!active_error_ && cancel_mark_ == 0) {
          open_span_locked(cancels_.front().error, e.seq);
          cancel_mark_ = cancels_.front().mark;
        }
        break;
      case Kind::kMark:
        if (cancel_mark_ == e.seq) {
          close_failure_locked(e.seq);
          cancel_mark_ = 0;
        }
        cancels_.pop_front();
        break;
      case Kind::kWait:
        if (!active_error_) {
          if (auto f = e.event->stream->failure_at(e.event->seq)) set_failure_locked(f, e.seq);
        }
        break;
      case Kind::kStamp:
        e.event->timestamp_ns.store(now_ns(), std::memory_order_relaxed);  // published by completed_
        break;
      case Kind::kSync:
        if (active_error_ && (!e.sync->only || e.sync->only == active_error_)) {
          e.sync->error = active_error_;
          int expected = SyncPoint::kWaiting;
          // acq_rel: the host that sees kConsumed must see `error`.
          if (e.sync->state.compare_exchange_strong(expected, SyncPoint::kConsumed,
                                                    std::memory_order_acq_rel)) {
            close_failure_locked(e.seq);
            active_error_.reset();
          }
        }
        break;
    }
    complete_locked(e.seq, lock);
    // A waiting worker runs us only up to what it waits for (help_towards).
    const bool helped_enough =
        stop_at != 0 && completed_.load(std::memory_order_relaxed) >= stop_at;
    if (!queue_.empty() && (helped_enough || pool.should_yield(level(), equal_waiting_since))) {
      // Let a more urgent stream, or an equal one after our time slice, run; we stay scheduled
      // and go to the back.
      lock.unlock();
      pool.push(shared_from_this());
      return;
    }
  }
}


bool CpuStream::help_towards(std::uint64_t seq) {
  // Directed help: run, on this waiting worker, only the stream `seq` is waiting for (this one, or
  // the stream it is parked on, following waits), and only up to the awaited position. Running
  // any other ready work here could nest, under the waiting item, an item that itself waits for
  // the waiting item's stream: a deadlock the program does not have
  // (HelpingNeverNestsUnrelatedWorkThatWaitsForTheWaiter).
  WorkerPool& pool = cpu_.pool();
  std::shared_ptr<CpuStream> s = shared_from_this();
  std::uint64_t target = seq;
  for (int hops = 0; hops < kMaxHelpDepth; ++hops) {
    if (s->is_complete(target)) return true;  // progress: the caller looks again
    if (auto task = pool.try_take(s.get())) {
      s->drain(target);
      return true;
    }
    std::shared_ptr<CpuEvent> blocker;
    {
      std::lock_guard lock(s->mutex_);
      // Running elsewhere (or just resumed): nothing to take; a push or completion wakes us.
      if (s->sched_ != Sched::kBlocked || s->queue_.empty()) return false;
      blocker = s->queue_.front().event;  // a parked stream's front is the wait it parks on
    }
    s = blocker->stream;
    target = blocker->seq;
  }
  return false;
}

bool CpuStream::wait_complete(std::uint64_t seq, std::optional<Clock::time_point> deadline,
                              bool blocking) {
  if (is_complete(seq)) return true;
  // Help while waiting only on workers, and not so deep that helping could overflow the stack.
  const bool worker = WorkerPool::on_worker_thread() && tls_depth < kMaxHelpDepth;
  WorkerPool& pool = cpu_.pool();
  if (!blocking) {
    const auto start = Clock::now();
    auto spin_until = start + kHostSpin;
    if (deadline && *deadline < spin_until) spin_until = *deadline;
    // On a busy machine the thread that will complete `seq` may be queued on this core: spinning
    // for the whole kHostSpin keeps it off. On a quiet machine a yield from the start costs more
    // than it saves, so the spin yields only once it has lasted longer than a quick completion
    // (figures: docs/performance.md, "Figures behind constants").
    const auto yield_after = start + kHostSpin / 4;
    for (unsigned i = 1;; ++i) {
      if (is_complete(seq)) return true;
      if (i % 64 == 0) {
        if (worker && help_towards(seq)) continue;
        const auto now = Clock::now();
        if (now >= spin_until) break;
        if (now >= yield_after) sched_yield();
      }
      cpu_relax();
    }
  }
  const auto parker = this_thread_parker();
  bool registered = false;
  for (;;) {
    if (is_complete(seq)) return true;
    const auto generation = worker ? pool.push_generation() : 0;
    if (worker && help_towards(seq)) continue;  // help while waiting
    if (!registered) {
      Continuation c;
      c.seq = seq;
      c.parker = parker;
      if (!add_continuation(std::move(c))) return true;
      registered = true;
      continue;
    }
    if (deadline && Clock::now() >= *deadline) return is_complete(seq);
    if (worker) {
      pool.park_helper(parker, deadline, generation);
    } else if (deadline) {
      parker->park_until(*deadline);
    } else {
      parker->park();
    }
  }
}

void CpuStream::lock_for_fork(bool failures) {
  if (failures) {
    failure_mutex_.lock();
  } else {
    mutex_.lock();
  }
}

void CpuStream::unlock_after_fork() {
  failure_mutex_.unlock();
  mutex_.unlock();
}

std::shared_ptr<void> CpuStream::reset_in_fork_child() {
  // Only the forking thread exists now and it holds both locks (lock_for_fork). The queue and any
  // running item belong to the parent, which runs them; running them here too would repeat their
  // side effects. So the child starts with the stream idle: positions the parent had not finished
  // complete at once with Cancelled (unless a failure already covers them).
  const auto done = completed_.load(std::memory_order_relaxed);
  const auto end = submitted_.load(std::memory_order_relaxed);
  if (end > done && !active_error_) {
    if (cancel_mark_ != 0) spans_.back().to = done + 1;
    auto error = std::make_shared<ErrorRecord>(
        std::make_exception_ptr(Cancelled(
            "work on " + str() +
            " was queued or running when the process forked: it runs in the parent only")),
        str());
    error->observed.store(true, std::memory_order_relaxed);
    spans_.push_back(Span{done + 1, end + 1, std::move(error)});
    ever_failed_.store(true, std::memory_order_relaxed);
  }
  cancel_mark_ = 0;
  // Returned, to be destroyed after the locks are released: destructors may call streamrt.
  auto garbage = std::make_shared<std::pair<std::deque<Entry>, std::vector<Continuation>>>(
      std::move(queue_), std::move(continuations_));
  queue_.clear();
  continuations_.clear();
  cancels_.clear();
  work_pending_.store(0, std::memory_order_relaxed);
  sched_ = Sched::kIdle;
  completed_.store(end, std::memory_order_relaxed);
  return garbage;
}

bool CpuStream::synchronize(std::optional<std::chrono::nanoseconds> timeout) {
  if (held_by_this_thread()) {
    throw Error("Stream::synchronize() called from work running on " + str() +
                ": the stream cannot finish while its own work waits for it (deadlock). Record an "
                "event and wait on it from another thread, or let the work return first");
  }
  std::optional<Clock::time_point> deadline;
  if (timeout) deadline = Clock::now() + *timeout;
  std::unique_lock lock(mutex_);
  if (sched_ == Sched::kIdle) {
    if (!active_error_) return true;
    auto error = report_idle_locked(lock);
    lock.unlock();
    error->rethrow();
  }
  auto sp = std::make_shared<SyncPoint>();
  Entry e;
  e.kind = Kind::kSync;
  e.sync = sp;
  const auto seq = submitted_.load(std::memory_order_relaxed) + 1;
  push_locked(std::move(e), lock);
  if (lock.owns_lock()) lock.unlock();
  if (!wait_complete(seq, deadline, false)) {
    int expected = SyncPoint::kWaiting;
    if (sp->state.compare_exchange_strong(expected, SyncPoint::kAbandoned,
                                          std::memory_order_acq_rel)) {
      // Timed out: the failure, if any, stays for a later sync. False even if the stream got
      // there just now: the abandoned point no longer hands over a failure, so a true here could
      // hide one.
      return false;
    }
  }
  if (sp->state.load(std::memory_order_acquire) == SyncPoint::kConsumed) sp->error->rethrow();
  return true;
}

}  // namespace streamrt::cpu
