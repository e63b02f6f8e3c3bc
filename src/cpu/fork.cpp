// fork() handling of the CPU backend: the pthread_atfork handlers and what each stream does in
// them.
#include <cstdio>

#include "cpu_backend.hpp"
#include "cpu_stream.hpp"
#include "streamrt/error.hpp"

namespace streamrt::cpu {

// fork(): POSIX leaves only the forking thread in the child, so the pool's workers are gone and
// any lock another thread held at that instant stays held for ever. prepare_fork() therefore takes
// every lock the child will need (backend, stream list, each stream's two locks, in the order the
// runtime itself nests them: a stream's mutex_ before any failure lock), so the child inherits
// consistent queues. The child then drops the parent's pending work (it runs in the parent) and
// starts a fresh pool on first use; the old pool is abandoned (its threads do not exist there).

void CpuBackend::prepare_fork() noexcept {
  pool_mutex_.lock();
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
      garbage.reserve(forking_.size());
      for (const auto& s : forking_) garbage.push_back(s->reset_in_fork_child());
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

std::shared_ptr<void> CpuStream::reset_in_fork_child() {
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
                    " was queued or running when the process forked: it runs in the parent only")),
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
