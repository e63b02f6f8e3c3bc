// fork() handling of the CPU backend: the wait for pending work before a fork, the
// pthread_atfork handlers and what each stream does in them.
#include <cstdio>
#include <optional>
#include <string>

#include "core/deadline.hpp"
#include "cpu_backend.hpp"
#include "cpu_stream.hpp"
#include "streamrt/cpu.hpp"
#include "streamrt/error.hpp"

namespace streamrt::cpu {

// Before a fork (docs/reliability.md, "fork()"): the child gets a copy of memory but none of the
// workers, so work still queued or running at the fork never runs there and the child could not
// read what it writes (a DataLoader's workers reading a dataset tensor normalised on a stream).
// So the prepare handler first waits, holding no runtime lock, for the work queued on every stream
// when fork() was called, so that the child sees finished results as eager code would, bounded by
// the fork time-out; only what is still pending after that is dropped in the child, whose reads of
// it raise Cancelled saying why. Failures of the work waited for stay where they were: a wait
// reports none.
//
// fork(): POSIX leaves only the forking thread in the child, so the pool's workers are gone and
// any lock another thread held at that instant stays held for ever. prepare_fork() therefore takes
// every lock the child will need (backend, stream list, each stream's two locks, in the order the
// runtime itself nests them: a stream's mutex_ before any failure lock), so the child inherits
// consistent queues. The child then drops the parent's pending work (it runs in the parent) and
// starts a fresh pool on first use; the old pool is abandoned (its threads do not exist there).

namespace {

// How many times the wait looks again for work launched while it waited (by the work itself, a
// callback, another thread); a thread that never stops launching must not hold the fork for the
// whole time-out.
constexpr int kForkWaitRounds = 4;

// The outcome of a wait a layer above already did for this thread's next fork()
// (finish_work_before_fork: Python waits in an os.register_at_fork hook, without the GIL that
// stream work may need); the prepare handler then does not wait again, holding what that layer
// holds across fork().
thread_local std::optional<ForkWait> t_waited_before_fork;

// Why work of the parent was still pending in the child, and what to do about it.
std::string fork_cancel_reason(ForkWait wait, std::chrono::nanoseconds timeout) {
  switch (wait) {
    case ForkWait::kFromStreamWork:
      return "fork() was called from stream work or a callback, which cannot wait for the "
             "runtime's work: fork from a host thread";
    case ForkWait::kOff:
      return "fork() did not wait for it, its time-out being 0 (STREAMRT_FORK_TIMEOUT, "
             "streamrt::cpu::set_fork_timeout): synchronize before forking, or set a time-out";
    case ForkWait::kTimedOut: {
      char seconds[32];
      std::snprintf(seconds, sizeof seconds, "%g", std::chrono::duration<double>(timeout).count());
      return std::string("it did not finish within fork()'s time-out of ") + seconds +
             " s (STREAMRT_FORK_TIMEOUT, streamrt::cpu::set_fork_timeout); work waiting for an "
             "event nobody completes (a user event) never does: complete it or synchronize "
             "before forking, or raise the time-out";
    }
    case ForkWait::kFailed:
      return "fork() could not wait for it (out of memory): synchronize before forking";
    case ForkWait::kFinished:
      break;
  }
  return "it was launched while the process forked (by another thread, or by the work fork() "
         "waited for): synchronize before forking, and launch nothing while a fork is under way";
}

}  // namespace

void CpuBackend::set_fork_timeout(std::chrono::nanoseconds timeout) {
  if (timeout.count() < 0 || timeout > std::chrono::milliseconds(kMaxForkTimeoutMs)) {
    throw Error("set_fork_timeout(" + std::to_string(timeout.count()) +
                " ns): the time-out must be from 0 to " + std::to_string(kMaxForkTimeoutMs / 1000) +
                " seconds (0: fork() does not wait for stream work)");
  }
  // Relaxed: a setting; the next fork reads it, it publishes no data.
  fork_timeout_ns_.store(timeout.count(), std::memory_order_relaxed);
}

ForkWait CpuBackend::finish_work_for_fork() noexcept {
  // A worker (or a thread running an item) may be running the very work it would wait for.
  if (WorkerPool::on_worker_thread() || CpuStream::running_any_stream()) {
    return ForkWait::kFromStreamWork;
  }
  const auto timeout = fork_timeout();
  const auto deadline = detail::deadline_after(timeout);
  try {
    for (int round = 0; round < kForkWaitRounds; ++round) {
      // Each stream up to what it had when this round began (as synchronize_device does).
      const auto streams = live_streams();
      std::vector<std::uint64_t> targets;
      targets.reserve(streams.size());
      for (const auto& s : streams) targets.push_back(s->submitted());
      bool waited = false;
      for (std::size_t i = 0; i < streams.size(); ++i) {
        if (streams[i]->is_complete(targets[i])) continue;
        if (timeout.count() == 0) return ForkWait::kOff;
        waited = true;
        // A time-out, not a synchronize: it reports no failure, so none is lost or moved.
        if (!streams[i]->wait_complete(targets[i], deadline, false)) {
          std::fprintf(stderr,
                       "streamrt: fork() went ahead with stream work unfinished after its "
                       "time-out (STREAMRT_FORK_TIMEOUT): that work runs in the parent only and "
                       "the child's reads of it raise Cancelled\n");
          return ForkWait::kTimedOut;
        }
      }
      if (!waited) break;
    }
  } catch (...) {
    return ForkWait::kFailed;
  }
  return ForkWait::kFinished;
}

void finish_work_before_fork() noexcept {
  try {
    // Another backend registered for the CPU: its own fork handling applies, not this one.
    auto* b = dynamic_cast<CpuBackend*>(&impl::backend(DeviceType::CPU));
    if (b != nullptr) t_waited_before_fork = b->finish_work_for_fork();
  } catch (...) {
    t_waited_before_fork = ForkWait::kFailed;
  }
}

void CpuBackend::prepare_fork() noexcept {
  // The wait comes first, holding no lock of the runtime: the work waited for takes them.
  const ForkWait waited = t_waited_before_fork.value_or(ForkWait::kFinished);
  const bool waited_above = t_waited_before_fork.has_value();
  t_waited_before_fork.reset();
  const ForkWait wait = waited_above ? waited : finish_work_for_fork();
  pool_mutex_.lock();
  fork_wait_ = wait;
  // Partitions: each one's pool lock (it builds its pool under it), after pool_mutex_ as
  // everywhere; the child abandons their pools too and builds new ones on first use.
  try {
    forking_partitions_.clear();
    for (const auto& e : partitions_) {
      if (auto p = e.handle.lock()) forking_partitions_.push_back(std::move(p));
    }
  } catch (...) {
  }
  for (const auto& p : forking_partitions_) p->lock_for_fork();
  streams_mutex_.lock();
  try {
    forking_.clear();
    forking_.reserve(streams_.size() + 1);
    forking_.push_back(default_stream_);
    for (const auto& w : streams_) {
      if (auto s = w.lock()) forking_.push_back(std::move(s));
    }
  } catch (...) {
    // Out of memory: lock what we could gather; the rest are not protected in the child.
  }
  // All queue locks before any failure lock: a runner holding its queue lock takes another
  // stream's failure lock (failure_at), so the other order would deadlock with it. The default
  // stream is never in streams_, so no stream is locked twice.
  for (const auto& s : forking_) s->lock_for_fork(false);
  for (const auto& s : forking_) s->lock_for_fork(true);
}

void CpuBackend::after_fork_in_parent() noexcept {
  for (auto it = forking_.rbegin(); it != forking_.rend(); ++it) (*it)->unlock_after_fork();
  auto streams = std::move(forking_);
  forking_.clear();
  streams_mutex_.unlock();
  for (const auto& p : forking_partitions_) p->unlock_after_fork();
  // Released after pool_mutex_: a partition's last handle gives its workers back under it.
  auto partitions = std::move(forking_partitions_);
  forking_partitions_.clear();
  pool_mutex_.unlock();
  // `streams` may hold the last handle of a stream: destroyed with no backend lock held.
}

void CpuBackend::after_fork_in_child() noexcept {
  std::vector<std::shared_ptr<void>> garbage;
  // Forked from stream work or a callback: this thread is a copy of a worker in the middle of a
  // task of the old pool; resetting under it would corrupt the task. POSIX only allows such a
  // child async-signal-safe calls until exec() or _exit() (docs/reliability.md, "fork()").
  const bool from_worker = WorkerPool::on_worker_thread();
  if (!from_worker) {
    try {
      const std::string why = fork_cancel_reason(fork_wait_, fork_timeout());
      garbage.reserve(forking_.size());
      for (const auto& s : forking_) garbage.push_back(s->reset_in_fork_child(why));
    } catch (...) {
      std::fputs("streamrt: out of memory while resetting streams after fork()\n", stderr);
    }
    // The old pool's threads do not exist here: abandon it (kept reachable, never destroyed: its
    // std::thread objects name threads that are gone) and build a new one on first use.
    static auto* const abandoned = new std::vector<WorkerPool*>;
    if (auto* old = pool_.load(std::memory_order_relaxed)) {
      try {
        abandoned->push_back(old);
      } catch (...) {
      }
    }
    pool_.store(nullptr, std::memory_order_relaxed);
    for (const auto& p : forking_partitions_) p->abandon_pool_in_fork_child();
    renew_this_thread_parker();
  }
  for (auto it = forking_.rbegin(); it != forking_.rend(); ++it) (*it)->unlock_after_fork();
  auto streams = std::move(forking_);
  forking_.clear();
  streams_mutex_.unlock();
  for (const auto& p : forking_partitions_) p->unlock_after_fork();
  auto partitions = std::move(forking_partitions_);  // released after pool_mutex_, as above
  forking_partitions_.clear();
  pool_mutex_.unlock();
}

void CpuStream::lock_for_fork(bool failures) {
  if (failures) {
    failures_.lock_for_fork();
  } else {
    mutex_.lock();
  }
}

void CpuStream::unlock_after_fork() {
  failures_.unlock_after_fork();
  mutex_.unlock();
}

std::shared_ptr<void> CpuStream::reset_in_fork_child(const std::string& why) {
  // Only the forking thread exists now and it holds both locks (lock_for_fork). The queue and any
  // running item belong to the parent, which runs them; running them here too would repeat their
  // side effects. So the child starts with the stream idle: positions the parent had not finished
  // complete at once with Cancelled (unless a failure already covers them).
  // Relaxed loads and stores in this function: only this thread exists in the child.
  const auto done = completed_.load(std::memory_order_relaxed);
  const auto end = submitted_.load(std::memory_order_relaxed);
  auto cancelled = std::make_shared<ErrorRecord>(
      std::make_exception_ptr(
          Cancelled("work on " + str() +
                    " was queued or running when the process forked: it runs in the parent "
                    "only, so this process cannot read what it writes; " +
                    why + " (docs/reliability.md, \"fork()\")")),
      str());
  cancelled->observed.store(true, std::memory_order_relaxed);
  failures_.reset_in_fork_child(done, end, std::move(cancelled));
  // What was linked is destroyed after the locks are released (destructors may call streamrt).
  // Nodes a producer was linking at the fork are unreachable here and leaked: that producer
  // thread does not exist in the child.
  struct Garbage {
    std::vector<Node*> nodes;
    std::vector<Continuation> continuations;
    ~Garbage() {
      for (Node* n : nodes) NodeCache::put(n);
    }
  };
  auto garbage = std::make_shared<Garbage>();
  absorb_locked();
  for (Node* n = local_head_; n != nullptr; n = n->next.load(std::memory_order_relaxed)) {
    garbage->nodes.push_back(n);
  }
  garbage->nodes.insert(garbage->nodes.end(), early_.begin(), early_.end());
  garbage->continuations = std::move(continuations_);
  local_head_ = local_tail_ = nullptr;
  early_.clear();
  inbox_.reset_in_fork_child();
  next_seq_ = end + 1;
  continuations_.clear();
  blocked_ = false;
  pending_.store(0, std::memory_order_relaxed);
  work_finished_.store(work_launched_.load(std::memory_order_relaxed), std::memory_order_relaxed);
  completed_.store(end, std::memory_order_relaxed);
  return garbage;
}

}  // namespace streamrt::cpu
