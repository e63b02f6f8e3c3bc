// The wait and help policy of CPU streams: how a thread waits for a position (poll, then park on
// a futex), what it runs meanwhile (directed help on workers, host-run items on host threads),
// and Stream::synchronize(). See docs/design.md, "Host waits" and "Host-run items".
#include <algorithm>
#include <chrono>

#include "core/deadline.hpp"
#include "cpu_backend.hpp"
#include "cpu_stream.hpp"
#include "streamrt/error.hpp"

namespace streamrt::cpu {
namespace {

// How long a host waiter polls before it parks (unless the event is `blocking`). A wake-up from a
// parked state costs several microseconds on these VMs (docs/performance.md), so polling for short
// waits wins; beyond this it wastes a core.
constexpr auto kHostSpin = std::chrono::microseconds(20);

// How soon a host that left its ready stream to the workers looks again, and how far that nap
// grows while it keeps doing so: short enough that a lost bet costs little, long enough that a
// host waiting behind a long run of more urgent work does not poll.
constexpr auto kDeferredRecheck = std::chrono::microseconds(50);
constexpr std::chrono::microseconds kMaxDeferredRecheck = std::chrono::milliseconds(1);

}  // namespace

CpuStream::Help CpuStream::help_towards(std::uint64_t seq) {
  // Directed help: run, on this waiting thread, only the stream `seq` is waiting for (this one, or
  // the stream it is parked on, following waits), and only up to the awaited position. Running
  // any other ready work here could nest, under the waiting item, an item that itself waits for
  // the waiting item's stream: a deadlock the program does not have
  // (HelpingNeverNestsUnrelatedWorkThatWaitsForTheWaiter). A host thread (not a worker) helps
  // only streams that allow host-run items. A worker runs only streams of its own pool, so that a
  // partition's workers never run other streams' work nor the shared workers a partition's: it
  // follows the waits through other pools' streams, though, to one of its own pool it may run.
  WorkerPool* const own = WorkerPool::current();
  const bool worker = own != nullptr;
  std::shared_ptr<CpuStream> s = shared_from_this();
  std::uint64_t target = seq;
  for (int hops = 0; hops < kMaxHelpDepth; ++hops) {
    if (s->is_complete(target)) return Help::kProgress;  // the caller looks again
    WorkerPool& pool = s->pool();
    // A host runs a stream only if it allows it, and not ahead of a more urgent stream that
    // waits for a worker (rule 14) - unless this host thread is itself inside a host-run item:
    // it holds that item's stream, a worker waiting for that stream cannot help it (it is not
    // parked), so if every worker is blocked so, only this thread can make the progress it waits
    // for (a hang the fuzzer found with priorities and one worker).
    if (!worker && !s->host_run()) return Help::kNothing;
    if (!worker && running_depth() == 0 && pool.more_urgent_waiting(s->level())) {
      return Help::kDeferred;
    }
    // An idle worker that polls takes the stream within a poll; a host thread taking it instead
    // contends with it for the pool's and the stream's locks, which costs the round trip more than
    // the hand-off it saves. (Inside a host-run item the host may be the only thread that can
    // progress, see above: it helps regardless.) The poller may take another ready stream
    // instead, so a deferring host looks again soon.
    if (!worker && running_depth() == 0 && pool.worker_polling() && pool.has_ready()) {
      return Help::kDeferred;
    }
    if (!worker || &pool == own) {
      if (auto task = pool.try_take(s.get())) {
        s->drain(target);
        return Help::kProgress;
      }
    }
    std::shared_ptr<CpuEvent> blocker;
    {
      std::lock_guard lock(s->mutex_);
      // Running elsewhere (or just resumed): nothing to take; a push or completion wakes us.
      if (!s->blocked_ || s->local_head_ == nullptr) return Help::kNothing;
      blocker = s->local_head_->event;  // a parked stream's front is the wait it parks on
    }
    s = blocker->stream;
    target = blocker->seq;
  }
  return Help::kNothing;
}

bool CpuStream::wait_complete(std::uint64_t seq, std::optional<Clock::time_point> deadline,
                              bool blocking) {
  if (is_complete(seq)) return true;
  // Help while waiting (workers: directed help; host threads: host-run items), but not so deep
  // that helping could overflow the stack. A host wait with a time-out runs nothing: an item it
  // took could outlast the deadline (or wait for the very thread that would give up waiting).
  // A worker registers as a helper with its own pool (the only one whose streams it may run).
  WorkerPool* const own = WorkerPool::current();
  const bool worker = own != nullptr;
  const bool help = running_depth() < kMaxHelpDepth && (worker || !deadline);
  if (!blocking) {
    const auto spin_until = [&] {
      const auto t = Clock::now() + kHostSpin;
      return deadline && *deadline < t ? *deadline : t;
    }();
    // No sched_yield: a waiter that needs the core gives it up by parking, after kHostSpin.
    for (unsigned i = 0;; ++i) {
      if (is_complete(seq)) return true;
      if (i % 64 == 0) {
        if (help && help_towards(seq) == Help::kProgress) continue;
        if (Clock::now() >= spin_until) break;
      }
      cpu_relax();
    }
  }
  const auto parker = this_thread_parker();
  bool registered = false;
  auto recheck = kDeferredRecheck;
  for (;;) {
    if (is_complete(seq)) return true;
    const auto generation = worker ? own->push_generation() : 0;
    const Help step = help ? help_towards(seq) : Help::kNothing;
    if (step == Help::kProgress) continue;  // help while waiting
    if (!registered) {
      Continuation c;
      c.seq = seq;
      c.parker = parker;
      if (!add_continuation(std::move(c))) return true;
      registered = true;
      continue;
    }
    if (deadline && Clock::now() >= *deadline) return is_complete(seq);
    if (worker && help) {
      own->park_helper(parker, deadline, generation);
    } else if (deadline) {
      parker->park_until(*deadline);
    } else if (step == Help::kDeferred) {
      // Nothing wakes this thread when the workers take other streams and leave this one
      // queued: it looks again after a nap that grows while it keeps deferring.
      parker->park_until(Clock::now() + recheck);
      recheck = std::min(2 * recheck, kMaxDeferredRecheck);
    } else {
      parker->park();
    }
  }
}

bool CpuStream::synchronize(std::optional<std::chrono::nanoseconds> timeout) {
  if (held_by_this_thread()) {
    throw Error(api::member("Stream", "synchronize") + "() called from work running on " + str() +
                ": the stream cannot finish while its own work waits for it (deadlock). Record an "
                "event and wait on it from another thread, or let the work return first");
  }
  const auto deadline = detail::deadline_after(timeout);
  // Fast path: everything submitted has finished and no failure waits to be reported. Acquire on
  // completed_ makes the work's effects visible here, and the failure flag set before it.
  const auto end = submitted_.load(std::memory_order_acquire);
  if (completed_.load(std::memory_order_acquire) >= end && !failures_.maybe_active()) {
    return true;
  }
  // No failure to hand over: a synchronize is a wait for the current end, with no Sync entry (an
  // allocation, a queue entry and a drainer pass each). The flag is read again once the work is
  // done: acquire on completed_ in wait_complete makes a failure of work up to `end` visible, and
  // only then does a Sync entry take it over, as below. A failure that later work (another
  // thread's, submitted meanwhile) caused is reported too: this synchronize had not returned yet.
  if (!failures_.maybe_active()) {
    if (!wait_complete(end, deadline, false)) return false;
    if (!failures_.maybe_active()) return true;
  }
  auto sp = std::make_shared<SyncPoint>();
  Node* n = NodeCache::get();
  n->set_sync(sp);
  std::uint64_t seq = 0;
  std::uint64_t idle = 0;
  if (host_run() && pending_.compare_exchange_strong(idle, 1, std::memory_order_acq_rel)) {
    // The stream was idle with a failure to report: this thread owns it now, as the push that
    // finds it idle would (acq_rel as in push), and hands the failure over itself instead of
    // waking a worker for it. (A fork child's first synchronize thus starts no threads.)
    seq = submitted_.fetch_add(1, std::memory_order_relaxed) + 1;  // relaxed: as in push
    n->set_seq(seq);
    inbox_.push(n);
    drain(seq);
  } else {
    seq = push_or_recycle(n);
  }
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

void CpuStream::clear_reported(const std::shared_ptr<ErrorRecord>& error) {
  if (is_cancellation(error->error)) return;  // a cancellation is cleared by a stream sync only
  // A user event's stream runs nothing after its position: there is nothing to let run again,
  // and a point queued behind the never-queued position would never be reached.
  if (user_position_only_) return;
  // Work queued before this point was submitted before the report and is still skipped; the point
  // clears the failure when the stream reaches it, as a synchronize's point does. It is queued
  // even when the failure is not active yet: a queued wait may still inherit it.
  auto sp = std::make_shared<SyncPoint>();
  sp->only = error;
  Node* n = NodeCache::get();
  n->set_sync(std::move(sp));
  std::uint64_t idle = 0;
  if (host_run() && pending_.compare_exchange_strong(idle, 1, std::memory_order_acq_rel)) {
    // Idle: clear it here and now, as synchronize() does (acq_rel and relaxed as there), so that
    // work submitted after the wait starts at once and no worker is woken for the point.
    n->set_seq(submitted_.fetch_add(1, std::memory_order_relaxed) + 1);
    inbox_.push(n);
    drain(n->seq());
    return;
  }
  push_or_recycle(n);
}

}  // namespace streamrt::cpu
