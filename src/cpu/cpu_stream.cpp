// CPU stream queues: submission (lock-free), the drain loop, cancel and continuations. Waiting and
// helping are in stream_wait.cpp, failure bookkeeping in failures.cpp, fork in fork.cpp.
#include "cpu_stream.hpp"

#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>

#include "core/prefetch.hpp"
#include "cpu_backend.hpp"
#include "launch_origin.hpp"
#include "partition.hpp"
#include "streamrt/detail/block_cache.hpp"
#include "streamrt/error.hpp"
#include "streamrt/impl/hooks.hpp"
#include "streamrt/stream.hpp"
#include "trace_sink.hpp"

namespace streamrt::cpu {
namespace {

// Streams whose work this thread is running now (more than one when a waiting worker helps).
// A plain array: trivially destructible, so it stays usable while the thread or process exits.
thread_local const CpuStream* tls_running[2 * CpuStream::kMaxHelpDepth];  // helping stops there
thread_local int tls_depth = 0;

// A consumer that finds the next sequence number not linked yet waits for its producer, which is
// between two instructions of push(): it pauses this many times in all before it starts giving
// up its core.
constexpr int kLinkSpin = 256;
// Pauses between two looks for that link (or for more work while lingering).
constexpr int kLinkPause = 8;
// How long a worker's drain keeps a stream that ran dry before it leaves it idle (see
// drain_items): about the gap between launches of a host that launches in a loop with a little
// work in between, and well under the idle poll of a worker (worker_pool.cpp).
constexpr auto kLinger = std::chrono::microseconds(4);

struct ContinuationLater {
  template <class C>
  bool operator()(const C& a, const C& b) const noexcept {
    return a.seq > b.seq;
  }
};

// A launched item while tracing is on: runs the work and records its trace (enqueue, start and
// end), also when the work throws. The stream outlives its queued items.
struct TracedWork {
  detail::Work work;
  const CpuStream* stream;
  const char* label;
  std::int64_t enqueue_ns;

  void operator()() {
    const std::int64_t start_ns = now_ns();
    try {
      work();
    } catch (...) {
      record(start_ns);
      throw;
    }
    record(start_ns);
  }

  void record(std::int64_t start_ns) const {
    trace_item(RawTrace{stream->device(), stream->id(), stream->priority(),
                        label != nullptr ? label : "launch", enqueue_ns, start_ns, now_ns(),
                        WorkerPool::worker_index()});
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

CpuEvent::CpuEvent(std::shared_ptr<CpuStream> s, std::uint64_t q, EventOptions o, std::int64_t ts)
    : impl::EventImpl(s->backend(), s->device(), o),
      stream(std::move(s)),
      seq(q),
      timestamp_ns(ts) {}

CpuStream::CpuStream(CpuBackend& backend, Device device, int priority, std::uint64_t id,
                     std::shared_ptr<PartitionState> partition)
    : impl::StreamImpl(backend, device, priority, id),
      cpu_(backend),
      partition_(std::move(partition)),
      host_run_(backend.host_run_default()) {}

WorkerPool& CpuStream::pool() const {
  return partition_ ? partition_->pool() : cpu_.pool();
}

WorkerPool* CpuStream::pool_if_started() const noexcept {
  return partition_ ? partition_->pool_if_started() : cpu_.pool_if_started();
}

CpuStream::~CpuStream() {
  // Only reached with nothing pending (queued nodes keep the stream alive through the pool's task
  // or a continuation), but a stream abandoned by fork() may still hold nodes.
  for (Node* n = local_head_; n != nullptr;) {
    Node* next = n->next.load(std::memory_order_relaxed);  // last owner: no other thread
    NodeCache::put(n);                                     // destroys what it carries
    n = next;
  }
  for (Node* n : early_) NodeCache::put(n);
}

std::uint64_t CpuStream::push(Node* n) {
  // First, so that a configuration error (or a pool that cannot start) throws with nothing queued.
  WorkerPool& to = pool();
  // Relaxed: the number only has to be unique and increasing; the node is published by the inbox,
  // and a record that happens after this push sees this number or a later one (coherence).
  const auto seq = submitted_.fetch_add(1, std::memory_order_relaxed) + 1;
  n->set_seq(seq);
  // Counted before it is linked: a drainer must never finish a node its producer has not counted
  // yet, or its settlement could bring the count to zero under a queued node (and a second drainer
  // could start). acq_rel: the push that finds 0 takes ownership for a new drainer (acquire: it
  // follows the last drainer's release, so the next drainer sees everything the last one did).
  const bool schedule = pending_.fetch_add(1, std::memory_order_acq_rel) == 0;
  inbox_.push(n);
  if (schedule) to.push(shared_from_this());  // after linking: the drainer finds the node
  return seq;
}

void CpuStream::enqueue(detail::Work work, const char* label) {
  Node* n = NodeCache::get();
  // A launch with an origin (a binding's, impl::LaunchOriginScope) carries it in its label's
  // pointer (the node has no room for it): a thread-local load when there is none.
  label = label_with_origin(label);
  n->label = label;
  // The one relaxed load tracing costs when off; when on, the item is wrapped so that it records
  // its own trace (the node has no room for the enqueue time).
  if (tracing_enabled()) {
    n->work = NodeWork(TracedWork{std::move(work), this, label, now_ns()});
  } else {
    n->work = NodeWork(std::move(work));
  }
  // Relaxed: a count for pending(); counted before the item can finish, so finished <= launched.
  work_launched_.fetch_add(1, std::memory_order_relaxed);
  try {
    push(n);
  } catch (...) {
    work_launched_.fetch_sub(1, std::memory_order_relaxed);
    n->clear();
    NodeCache::put(n);
    throw;
  }
  // Launch-blocking mode (a debugging switch): the host waits here, so that a failure is raised
  // by the call that queued the work. Launches from inside stream work are no host's.
  if (cpu_.launch_blocking() && !running_any_stream()) [[unlikely]]
    after_blocking_launch(*this);
}

std::uint64_t CpuStream::push_or_recycle(Node* n) {
  try {
    return push(n);
  } catch (...) {
    n->clear();
    NodeCache::put(n);
    throw;
  }
}

std::shared_ptr<CpuEvent> CpuStream::record(EventOptions options) {
  auto self = shared_from_this();
  // No queue entry: the record is the current end of the stream. Every launch that happens-before
  // this record took its number before that, so this load sees it or a later one (coherence;
  // acquire is not needed for that, but keeps query() after record() simple to reason about).
  const auto seq = submitted_.load(std::memory_order_acquire);
  if (!options.enable_timing) {
    // From the block cache: ops tracking records one per op, often released on a worker.
    return std::allocate_shared<CpuEvent>(detail::CachedAllocator<CpuEvent>{}, std::move(self), seq,
                                          options, -1);
  }
  if (completed_.load(std::memory_order_acquire) >= seq) {
    // Nothing before the record is unfinished: the stream is at the record now.
    return std::make_shared<CpuEvent>(std::move(self), seq, options, now_ns());
  }
  auto ev = std::make_shared<CpuEvent>(self, 0, options, -1);
  Node* n = NodeCache::get();
  n->set_event(Kind::kStamp, ev);
  ev->seq = push_or_recycle(n);  // the drainer only stamps the event; it never reads seq
  return ev;
}

void CpuStream::block(const std::shared_ptr<CpuEvent>& position) {
  if (position->stream.get() == this) return;  // already in stream order
  if (position->stream->is_complete(position->seq) && !position->stream->failures_.ever_failed()) {
    return;  // nothing to wait for and no failure to inherit
  }
  Node* n = NodeCache::get();
  n->set_event(Kind::kWait, position);
  push_or_recycle(n);
}

void CpuStream::absorb_locked(std::size_t limit) {
  std::size_t moved = 0;
  while (moved < limit) {
    Node* n = inbox_.pop();
    if (n == nullptr) break;
    if (n->seq() != next_seq_) {
      // A producer with an earlier number has not linked yet: keep this one aside, in order.
      const auto at = std::lower_bound(early_.begin(), early_.end(), n->seq(),
                                       [](const Node* a, std::uint64_t q) { return a->seq() < q; });
      early_.insert(at, n);
      continue;
    }
    for (;;) {
      // Relaxed: the local list is guarded by mutex_.
      n->next.store(nullptr, std::memory_order_relaxed);
      if (local_tail_ != nullptr) {
        local_tail_->next.store(n, std::memory_order_relaxed);
      } else {
        local_head_ = n;
      }
      local_tail_ = n;
      ++next_seq_;
      ++moved;
      if (early_.empty() || early_.front()->seq() != next_seq_) break;
      n = early_.front();
      early_.erase(early_.begin());
    }
  }
}

Node* CpuStream::front_locked() {
  // One node at a time: nodes come from the producer's core, and walking a batch of them is a
  // chain of misses, one after the other. Taken singly, the next node is fetched while the current
  // item runs (the prefetch in drain_items).
  if (local_head_ == nullptr) absorb_locked(1);
  return local_head_;
}

void CpuStream::pop_front_locked() {
  local_head_ = local_head_->next.load(std::memory_order_relaxed);
  if (local_head_ == nullptr) local_tail_ = nullptr;
}

std::uint64_t CpuStream::cancel() {
  auto error = std::make_shared<ErrorRecord>(
      std::make_exception_ptr(Cancelled("work on " + str() + " was dropped by " +
                                        api::member("Stream", "cancel") + "() before it started")),
      str());
  // The user asked for it: not a failure to report on stderr if nobody looks at it.
  error->observed.store(true, std::memory_order_relaxed);
  std::vector<NodeWork> dropped;
  {
    std::unique_lock lock(mutex_);
    absorb_locked();
    std::uint64_t first = 0;
    std::size_t n = 0;
    const auto count = [&](Node* e) {
      if (e->kind() != Kind::kWork) return;
      if (first == 0 || e->seq() < first) first = e->seq();
      ++n;
    };
    // Relaxed (here and below): the local list is guarded by mutex_.
    for (Node* e = local_head_; e != nullptr; e = e->next.load(std::memory_order_relaxed)) count(e);
    for (Node* e : early_) count(e);
    if (n == 0) return 0;
    // Everything that can throw comes before the first change. Work is queued, so the stream is
    // owned by a drainer and push() schedules nothing.
    failures_.add_cancel(first, std::move(error));
    Node* mark_node = nullptr;
    try {
      dropped.reserve(n + 8);
      mark_node = NodeCache::get();
      mark_node->set_kind_keeping_work(Kind::kMark);
      failures_.set_cancel_mark(push(mark_node));
    } catch (...) {
      if (mark_node != nullptr) NodeCache::put(mark_node);
      failures_.drop_last_cancel();
      throw;
    }
    const auto mark = failures_.last_cancel_mark();
    // Launches that took a number before the mark but are not linked yet are finishing their
    // push (two instructions): wait for them, so that every item before the mark is dropped.
    for (int spins = 0;; ++spins) {
      absorb_locked();
      if (next_seq_ > mark) break;
      if (spins < kLinkSpin) {
        cpu_relax();
      } else {
        sched_yield();  // cold path: the producer was preempted mid-push
      }
    }
    std::uint64_t dropped_count = 0;
    for (Node* e = local_head_; e != nullptr && e->seq() < mark;
         e = e->next.load(std::memory_order_relaxed)) {
      if (e->kind() != Kind::kWork) continue;
      e->set_kind_keeping_work(Kind::kDropped);
      try {
        dropped.push_back(std::move(e->work));
      } catch (...) {
        e->work.reset();  // out of memory for the list: destroyed here, under the lock
      }
      ++dropped_count;
    }
    // Relaxed: written under mutex_ only (drainer and cancel); read as a debugging figure.
    work_finished_.store(work_finished_.load(std::memory_order_relaxed) + dropped_count,
                         std::memory_order_relaxed);
    n = dropped_count;
    lock.unlock();
    // Destroyed here, on the caller, outside the lock: destructors of captured state may call
    // streamrt (even this stream).
    dropped.clear();
    return n;
  }
}

bool CpuStream::has_active_error() const {
  std::lock_guard lock(mutex_);
  return failures_.active() != nullptr;
}

bool CpuStream::held_by_this_thread() const noexcept {
  return std::find(tls_running, tls_running + tls_depth, this) != tls_running + tls_depth;
}

bool CpuStream::running_any_stream() noexcept {
  return tls_depth > 0;
}

int CpuStream::running_depth() noexcept {
  return tls_depth;
}

const CpuStream* CpuStream::innermost_running() noexcept {
  return tls_depth > 0 ? tls_running[tls_depth - 1] : nullptr;
}

bool CpuStream::add_continuation(Continuation c) {
  std::lock_guard lock(mutex_);
  // Relaxed: completed_ is only stored under mutex_, which we hold.
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

void CpuStream::complete_locked(std::uint64_t seq, std::unique_lock<core::SpinMutex>& lock,
                                Deferred* defer) {
  // Release: whoever reads seq with acquire (query, waits, other streams' runners) sees the
  // effects of the work up to seq. Stored under mutex_, so add_continuation cannot miss it.
  completed_.store(seq, std::memory_order_release);
  // One at a time, taken out of the heap in place: firing needs no list, so a drain that runs
  // out of memory still wakes everyone waiting (the drain cannot throw).
  while (!continuations_.empty() && continuations_.front().seq <= seq) {
    {
      std::pop_heap(continuations_.begin(), continuations_.end(), ContinuationLater{});
      Continuation c = std::move(continuations_.back());
      continuations_.pop_back();
      lock.unlock();  // continuations take other streams' locks and the pool's
      fire(c, defer);
    }  // what `c` still holds goes before the lock is taken again
    lock.lock();
  }
}

namespace {

// Moves `item` to the end of `list`: the slot first, then a move that cannot throw. False, with
// `item` untouched, when there is no memory for the slot.
template <class T>
bool append_moved(std::vector<T>& list, T& item) {
  try {
    list.emplace_back() = std::move(item);
    return true;
  } catch (const std::bad_alloc&) {
    return false;
  }
}

}  // namespace

void CpuStream::fire(Continuation& c, Deferred* defer) {
  // Held back for the drainer when it asks (drain()); with no room to defer, done now, which is
  // correct, only less direct.
  if (c.parker) {
    c.parker->unpark();  // a futex wake, only if the waiter sleeps: no pool round trip
  } else if (c.resume) {
    if (defer == nullptr || !append_moved(defer->resumes, c.resume)) c.resume->resume();
  } else if (c.callback) {
    if (defer == nullptr || !append_moved(defer->callbacks, c.callback)) start_callback(c.callback);
  }
}

void CpuStream::start_callback(std::function<void()>& cb) noexcept {
  try {
    pool().push(std::make_shared<FunctionTask>(std::move(cb), level()));
  } catch (...) {
    // Out of memory for the task (cb is untouched then): late is better than lost, so the
    // callback runs here, on the thread that completed the position.
    FunctionTask(std::move(cb), level()).run();
  }
}

void CpuStream::flush(Deferred& deferred) {
  for (auto& s : deferred.resumes) s->resume();
  deferred.resumes.clear();
  for (auto& cb : deferred.callbacks) start_callback(cb);
  deferred.callbacks.clear();
}

void CpuStream::unblock() {
  std::lock_guard lock(mutex_);
  blocked_ = false;
}

void CpuStream::resume(bool wake) {
  unblock();
  pool().push(shared_from_this(), wake);
}

void CpuStream::run() noexcept {
  // A loop, not a nested call: a chain of hand-offs (A resumes B, B resumes C...) keeps one frame.
  std::shared_ptr<CpuStream> next;
  drain(0, &next);
  while (next) {
    auto s = std::move(next);
    s->drain(0, &next);
  }
}

void CpuStream::drain(std::uint64_t stop_at, std::shared_ptr<CpuStream>* next) noexcept {
  Deferred deferred;
  Exit exit;
  {
    RunningScope running(this);
    exit = drain_items(stop_at, deferred);
  }
  if (deferred.empty()) return;
  // Streams this drain resumed: when this worker goes straight back to the pool (nothing else to
  // run first), the first one is left for it, with no wake-up of another worker.
  bool take_first = exit == Exit::kIdle && deferred.callbacks.empty();
  auto first = deferred.resumes.begin();
  // A cross-stream hand-off: when nothing waits in the ready queue, the pool would hand the first
  // resumed stream straight back to this worker; run() drains it next without the round trip
  // (the pool's lock and counters are the lines an idle worker's poll keeps reading). The stream
  // is owned already (a parked stream keeps pending_ > 0). Not under the random schedule, which
  // makes every choice in the pool.
  // Only a stream of this worker's own pool: a partition's worker never runs another's stream.
  if (take_first && next != nullptr && first != deferred.resumes.end() &&
      (*first)->same_pool(*this)) {
    WorkerPool& own = pool();
    if (!own.randomized() && !own.has_ready()) {
      (*first)->unblock();
      *next = std::move(*first);
      ++first;
      take_first = false;
    }
  }
  for (; first != deferred.resumes.end(); ++first) {
    // Not woken: the first stream of this pool, which this worker takes next from the pool.
    const bool mine = take_first && (*first)->same_pool(*this);
    (*first)->resume(!mine);
    take_first = take_first && !mine;
  }
  // Completion callbacks of the last items, run by this worker now that it has left the stream
  // (so they may call anything, even synchronize this stream) instead of a pool round trip.
  for (auto& cb : deferred.callbacks) {
    try {
      cb();
    } catch (...) {
      report_callback_exception(std::current_exception());
    }
    cb = nullptr;
  }
}

// One drain_items() call's state, shared by its steps.
struct CpuStream::DrainState {
  // Null when the pool is not started: a synchronize in a fork child drains its own entry with
  // no pool (and must start no threads); with no pool, nothing else waits for a worker.
  WorkerPool* const pool;
  // Nonzero: a waiting thread runs us only up to this sequence number (help_towards).
  const std::uint64_t stop_at;
  // Callbacks wait for the end of the drain only on a worker's own drain: a helping waiter or a
  // host thread posts them (rule 9: they run on a runtime thread, never nested under other work).
  Deferred* const defer;
  // Whether this drain may keep the stream for a moment when it runs dry (linger_locked).
  const bool linger;
  WorkerPool::TimeSlice slice{};  // against equal-priority streams (WorkerPool::should_yield)
  // Entries finished since pending_ was last lowered: pending_ is settled once per batch, when
  // the linked entries run out or the drainer leaves, not once per entry.
  std::uint64_t done = 0;
  int link_polls = 0;  // pauses spent waiting for a producer's link (wait_for_link_locked)
  Clock::time_point linger_until{};
};

bool CpuStream::linger_locked(DrainState& st, std::unique_lock<core::SpinMutex>& lock) noexcept {
  // A worker's own drain keeps the stream for a moment when it runs dry and nothing else is
  // ready: the next launch of a producer working back to back then needs no pool push (a lock
  // and often a wake-up) and no pop, and a launch + synchronize loop no hand-over at all. The
  // stream stays owned (pending_ not settled) while it lingers. Not with callbacks or resumed
  // streams held back: the worker leaves at once and runs them itself (drain()).
  if (!st.linger || !st.defer->empty() || st.pool->has_ready()) return false;
  const auto now = Clock::now();
  if (st.linger_until == Clock::time_point{}) st.linger_until = now + kLinger;
  if (now >= st.linger_until) return false;
  lock.unlock();
  for (int spins = 0; spins < kLinkPause; ++spins) cpu_relax();
  lock.lock();
  return true;
}

std::optional<CpuStream::Exit> CpuStream::wait_for_link_locked(
    DrainState& st, std::unique_lock<core::SpinMutex>& lock) noexcept {
  // acq_rel: release hands this drainer's work to the push that next finds 0 (and its drainer);
  // acquire sees the nodes counted by pushes since.
  const auto left = pending_.fetch_sub(st.done, std::memory_order_acq_rel) - st.done;
  st.done = 0;
  if (left == 0) return Exit::kIdle;
  // Counted but not linked in order yet: a producer is inside push(). Callbacks held so far go
  // now rather than wait behind it. The link usually lands within a cache miss or two (a
  // producer launching back to back makes this common): look again after a short pause, and
  // give up the core only once kLinkSpin pauses have gone by without it (the producer was
  // preempted mid-push).
  lock.unlock();
  if (st.defer != nullptr && !st.defer->empty()) flush(*st.defer);
  if (st.link_polls < kLinkSpin) {
    for (int spins = 0; spins < kLinkPause; ++spins) cpu_relax();
    st.link_polls += kLinkPause;
  } else {
    sched_yield();
  }
  lock.lock();
  return std::nullopt;
}

std::optional<CpuStream::Exit> CpuStream::park_on_wait_locked(
    Node* front, DrainState& st, std::unique_lock<core::SpinMutex>& lock) noexcept {
  // Park the stream, not the worker: the waited-on stream resumes us when it gets there.
  auto target = front->event;
  blocked_ = true;
  lock.unlock();
  // Cannot reach 0: the wait itself is pending. acq_rel as in wait_for_link_locked.
  pending_.fetch_sub(st.done, std::memory_order_acq_rel);
  st.done = 0;
  Continuation c;
  c.seq = target->seq;
  c.resume = shared_from_this();
  bool parked = false;
  try {
    parked = target->stream->add_continuation(std::move(c));
  } catch (const std::bad_alloc&) {
    // No memory to park on the target: look again later from the back of the ready queue, a
    // poll that lasts only while memory is exhausted.
    unblock();
    sched_yield();
    pool().push(shared_from_this());
    return Exit::kRequeue;
  }
  if (parked) return Exit::kBlocked;
  lock.lock();
  blocked_ = false;
  return std::nullopt;
}

void CpuStream::run_work_locked(Node* e, std::unique_lock<core::SpinMutex>& lock) noexcept {
  if (failures_.active()) {
    // Skipped: nothing runs on the results of failed work. Its state is released now.
    lock.unlock();
    e->work.reset();
    lock.lock();
    work_finished_.store(work_finished_.load(std::memory_order_relaxed) + 1,
                         std::memory_order_relaxed);  // written under mutex_ only
    return;
  }
  // The next node was written on its producer's core, and this drainer will read and then write
  // it (clear, free): fetch it, to own, while this item runs.
  if (Node* next = local_head_ != nullptr ? local_head_ : inbox_.peek()) {
    core::prefetch_for_write(next);
  }
  lock.unlock();
  std::exception_ptr error;
  try {
    e->work();
  } catch (...) {
    error = std::current_exception();
  }
  e->work.reset();
  const char* origin = nullptr;
  if (error) [[unlikely]] {
    // Outside the stream lock: an annotator may take the GIL.
    origin = origin_of(e->label);
    error = locate_failure(std::move(error), e->label, origin, str());
  }
  lock.lock();
  work_finished_.store(work_finished_.load(std::memory_order_relaxed) + 1,
                       std::memory_order_relaxed);  // written under mutex_ only
  if (error) record_failure(std::move(error), nullptr, e->seq(), e->label, origin);
}

void CpuStream::run_node_locked(Node* e, std::unique_lock<core::SpinMutex>& lock) noexcept {
  switch (e->kind()) {
    case Kind::kWork:
      run_work_locked(e, lock);
      break;
    case Kind::kDropped:
      try {
        failures_.reach_dropped(e->seq());
      } catch (...) {
        report_unrecorded(std::make_exception_ptr(Cancelled("work was dropped by cancel()")));
      }
      break;
    case Kind::kMark:
      failures_.reach_mark(e->seq());
      break;
    case Kind::kWait:
      if (!failures_.active()) {
        if (auto f = e->event->stream->failure_at(e->event->seq)) {
          std::exception_ptr error = f->error;
          record_failure(std::move(error), std::move(f), e->seq());
        }
      }
      break;
    case Kind::kStamp:
      // Relaxed: published by the release store of completed_ in complete_locked.
      e->event->timestamp_ns.store(now_ns(), std::memory_order_relaxed);
      break;
    case Kind::kSync:
      if (failures_.active() && (!e->sync->only || e->sync->only == failures_.active())) {
        e->sync->error = failures_.active();
        int expected = SyncPoint::kWaiting;
        // acq_rel: the host that sees kConsumed must see `error`.
        if (e->sync->state.compare_exchange_strong(expected, SyncPoint::kConsumed,
                                                   std::memory_order_acq_rel)) {
          failures_.consume(e->seq());
        }
      }
      break;
  }
}

std::optional<CpuStream::Exit> CpuStream::leave_if_due_locked(
    std::uint64_t seq, DrainState& st, std::unique_lock<core::SpinMutex>& lock) noexcept {
  const bool helped_enough = st.stop_at != 0 && seq >= st.stop_at;
  if (!helped_enough && (st.pool == nullptr || !st.pool->should_yield(level(), st.slice))) {
    return std::nullopt;
  }
  // acq_rel as in wait_for_link_locked.
  const auto left = pending_.fetch_sub(st.done, std::memory_order_acq_rel) - st.done;
  st.done = 0;
  if (left == 0) return Exit::kIdle;
  // Let a more urgent stream, or an equal one after our time slice, run; we stay scheduled and
  // go to the back.
  lock.unlock();
  pool().push(shared_from_this());
  return Exit::kRequeue;
}

CpuStream::Exit CpuStream::drain_items(std::uint64_t stop_at, Deferred& deferred) noexcept {
  WorkerPool* const pool = pool_if_started();
  auto* const defer = WorkerPool::on_worker_thread() && tls_depth == 1 ? &deferred : nullptr;
  DrainState st{pool, stop_at, defer, defer != nullptr && stop_at == 0 && pool != nullptr};
  std::unique_lock lock(mutex_);
  for (;;) {
    Node* const front = front_locked();
    if (front == nullptr) {
      if (linger_locked(st, lock)) continue;
      if (const auto exit = wait_for_link_locked(st, lock)) return *exit;
      continue;
    }
    st.link_polls = 0;
    st.linger_until = Clock::time_point{};  // a new gap lingers afresh
    if (defer != nullptr && !defer->empty()) {
      // More work follows: callbacks and resumed streams must not wait for it.
      lock.unlock();
      flush(*defer);
      lock.lock();
      continue;
    }
    // Waits hold even while a failure is active: a synchronize may report it before the event
    // completes, and work launched after that must still wait for the event.
    if (front->kind() == Kind::kWait && !front->event->stream->is_complete(front->event->seq)) {
      if (const auto exit = park_on_wait_locked(front, st, lock)) return *exit;
      continue;
    }
    pop_front_locked();
    run_node_locked(front, lock);
    const auto seq = front->seq();
    front->clear();
    NodeCache::put(front);
    complete_locked(seq, lock, defer);
    ++st.done;
    if (const auto exit = leave_if_due_locked(seq, st, lock)) return *exit;
  }
}

void CpuStream::record_failure(std::exception_ptr error, std::shared_ptr<ErrorRecord> record,
                               std::uint64_t seq, const char* label, const char* origin) noexcept {
  try {
    if (!record) record = std::make_shared<ErrorRecord>(error, str(), label, origin);
    failures_.fail(std::move(record), seq);  // allocates before it changes anything
  } catch (...) {
    report_unrecorded(error);
  }
}

std::shared_ptr<CpuEvent> CpuStream::new_user_position(CpuBackend& backend, Device device,
                                                       std::uint64_t id, EventOptions options) {
  // A private stream whose one position is never pushed: only complete_user() completes it.
  auto s =
      std::allocate_shared<CpuStream>(detail::CachedAllocator<CpuStream>{}, backend, device, 0, id);
  s->submitted_.store(1, std::memory_order_relaxed);  // published by the make_shared below
  s->user_position_only_ = true;
  return std::make_shared<CpuEvent>(std::move(s), 1, options, -1);
}

void CpuStream::complete_user(CpuEvent& position, std::exception_ptr failure) {
  std::unique_lock lock(mutex_);
  if (failure) failures_.fail(std::make_shared<ErrorRecord>(std::move(failure), "a user event"), 1);
  if (position.options().enable_timing) {
    position.timestamp_ns.store(now_ns(), std::memory_order_relaxed);  // published by completed_
  }
  complete_locked(1, lock);
}

}  // namespace streamrt::cpu
