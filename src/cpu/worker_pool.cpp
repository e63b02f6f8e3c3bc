// Worker pool. See docs/design.md, "The worker pool", for why workers spin briefly then park.
#include "worker_pool.hpp"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "clock.hpp"
#include "streamrt/error.hpp"

namespace streamrt::cpu {
namespace {

thread_local int tls_worker_index = -1;
thread_local WorkerPool* tls_pool = nullptr;
// Set when the task this worker runs has counted it idle already (WorkerPool::leave_busy).
thread_local bool tls_left_busy = false;
// Test switch (set_task_exit_delay_for_testing): how long a worker pauses after each task before
// its own idle count; 0 (always, outside tests) skips it.
std::atomic<std::int64_t> g_task_exit_delay_ns{0};

// splitmix64: a tiny, well-mixed generator; one step per random pick.
std::uint64_t next_random(std::uint64_t& state) noexcept {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// kRandom: before a task, a worker sometimes gives up its core or dawdles, so that the relative
// timing of streams varies from run to run (the seed fixes the picks, not the OS scheduler).
void random_pause(std::uint64_t& state) {
  const auto r = next_random(state);
  if ((r & 7) == 0) {
    std::this_thread::yield();
  } else if ((r & 7) == 1) {
    for (auto i = (r >> 8) & 1023; i > 0; --i) cpu_relax();
  } else if ((r & 255) == 2) {
    std::this_thread::sleep_for(std::chrono::microseconds((r >> 16) & 255));
  }
}

}  // namespace

void ReadyList::push_back(std::shared_ptr<Task> task) noexcept {
  Task* t = task.get();
  t->ready_next_ = nullptr;
  t->ready_owner_ = std::move(task);
  if (tail_ != nullptr) {
    tail_->ready_next_ = t;
  } else {
    head_ = t;
  }
  tail_ = t;
  ++size_;
}

std::shared_ptr<Task> ReadyList::unlink(Task* prev, Task* t) noexcept {
  (prev != nullptr ? prev->ready_next_ : head_) = t->ready_next_;
  if (tail_ == t) tail_ = prev;
  t->ready_next_ = nullptr;
  --size_;
  return std::move(t->ready_owner_);
}

std::shared_ptr<Task> ReadyList::take(std::size_t skip) noexcept {
  Task* prev = nullptr;
  Task* t = head_;
  for (; t != nullptr && skip > 0; --skip) {
    prev = t;
    t = t->ready_next_;
  }
  return t != nullptr ? unlink(prev, t) : nullptr;
}

std::shared_ptr<Task> ReadyList::take(const Task* task) noexcept {
  Task* prev = nullptr;
  for (Task* t = head_; t != nullptr; prev = t, t = t->ready_next_) {
    if (t == task) return unlink(prev, t);
  }
  return nullptr;
}

WorkerPool::WorkerPool(int num_threads, Schedule schedule, std::chrono::nanoseconds spin,
                       bool batch, std::vector<int> cores)
    : spin_ns_(spin.count()),
      policy_(batch),
      schedule_(schedule),
      cores_(std::move(cores)),
      random_(schedule.mode == Schedule::Mode::kRandom),
      rng_(schedule.seed) {
  resize(num_threads);
}

WorkerPool::~WorkerPool() {
  shutdown();
}

bool WorkerPool::on_worker_thread() noexcept {
  return tls_worker_index >= 0;
}
int WorkerPool::worker_index() noexcept {
  return tls_worker_index;
}
WorkerPool* WorkerPool::current() noexcept {
  return tls_pool;
}

void WorkerPool::set_task_exit_delay_for_testing(std::chrono::nanoseconds delay) noexcept {
  g_task_exit_delay_ns.store(delay.count(), std::memory_order_relaxed);
}

void WorkerPool::leave_busy() noexcept {
  if (tls_pool != this || tls_worker_index < 0 || tls_left_busy) return;
  tls_left_busy = true;
  // Relaxed, as in worker_main: the caller's acquire of what the task publishes next (a chunk
  // reported done) is what makes the new count seen in time.
  busy_.fetch_sub(1, std::memory_order_relaxed);
}

std::shared_ptr<Task> WorkerPool::pop_locked() {
  for (int level = 0; level < kNumLevels; ++level) {
    auto& q = ready_[level];
    if (!q.empty()) {
      // kRandom: any ready task of the most urgent level may go first (priorities still hold).
      const std::size_t skip = random_ && q.size() > 1 ? next_random(rng_) % q.size() : 0;
      auto t = q.take(skip);
      // Relaxed: the counters are hints; the queues themselves are read under mutex_.
      level_count_[level].fetch_sub(1, std::memory_order_relaxed);
      ready_count_.fetch_sub(1, std::memory_order_relaxed);
      return t;
    }
  }
  return nullptr;
}

std::shared_ptr<Parker> WorkerPool::wake_one_locked() {
  // A spinning worker will find the task by itself; waking a parked one costs a syscall.
  std::shared_ptr<Parker> p;
  if (ready_count_.load(std::memory_order_relaxed) > 0 &&
      spinning_.load(std::memory_order_relaxed) == 0 && !idle_.empty()) {
    p = std::move(idle_.back());
    idle_.pop_back();
  }
  return p;
}

void WorkerPool::push(std::shared_ptr<Task> task, bool wake) noexcept {
  const int level = std::clamp(task->level(), 0, kNumLevels - 1);
  std::shared_ptr<Parker> idle;
  {
    std::unique_lock lock(mutex_);
    // Checked under mutex_: shutdown() sets it under mutex_ before its last drain, so a task is
    // either queued before that drain or run here.
    if (stopped_.load(std::memory_order_relaxed)) {
      lock.unlock();
      task->run();  // after shutdown (process exit): run in the caller, nothing is dropped
      return;
    }
    ready_[level].push_back(std::move(task));
    level_count_[level].fetch_add(1, std::memory_order_relaxed);
    ready_count_.fetch_add(1, std::memory_order_relaxed);
    push_gen_.fetch_add(1, std::memory_order_relaxed);
    if (wake) idle = wake_one_locked();
    // Waiting workers look for what they wait for; they stay registered until they wake. Woken
    // under the lock (rare: only while helpers wait), so that a push copies no list.
    for (auto& p : helpers_) p->unpark();
  }
  if (idle) idle->unpark();
}

bool WorkerPool::should_yield(int level, TimeSlice& slice) const noexcept {
  if (random_) return true;  // kRandom: every item is a scheduling point
  level = std::clamp(level, 0, kNumLevels - 1);
  for (int l = 0; l < level; ++l) {
    if (level_count_[l].load(std::memory_order_relaxed) > 0) return true;
  }
  // The clock is read only while an equal stream waits: the common cases cost no clock read.
  if (level_count_[level].load(std::memory_order_relaxed) == 0) return false;
  if (slice.skip > 0) {
    --slice.skip;
    return false;
  }
  const auto now = Clock::now();
  if (slice.since == Clock::time_point{}) {
    slice.since = now;
    slice.last = now;
    return false;
  }
  // Items this short (against the slice) may go several to a read; one long one, and every item
  // is timed again. A yield comes at most kMaxSliceStep short items late.
  slice.step = now - slice.last < kTimeSlice / 64 ? std::min(2 * slice.step, kMaxSliceStep) : 1;
  slice.skip = slice.step - 1;
  slice.last = now;
  return now - slice.since >= kTimeSlice;
}

bool WorkerPool::more_urgent_waiting(int level) const noexcept {
  level = std::clamp(level, 0, kNumLevels - 1);
  for (int l = 0; l < level; ++l) {
    // Relaxed: a hint; a stale value only lets a host run its own stream a little early or late.
    if (level_count_[l].load(std::memory_order_relaxed) > 0) return true;
  }
  return false;
}

std::shared_ptr<Task> WorkerPool::try_take(const Task* task) {
  if (ready_count_.load(std::memory_order_relaxed) == 0) return nullptr;
  const int level = std::clamp(task->level(), 0, kNumLevels - 1);
  std::lock_guard lock(mutex_);
  auto t = ready_[level].take(task);
  if (!t) return nullptr;
  level_count_[level].fetch_sub(1, std::memory_order_relaxed);
  ready_count_.fetch_sub(1, std::memory_order_relaxed);
  return t;
}

void WorkerPool::park_helper(const std::shared_ptr<Parker>& parker,
                             std::optional<std::chrono::steady_clock::time_point> deadline,
                             std::uint64_t generation) {
  {
    std::lock_guard lock(mutex_);
    // A push since the caller last looked may be what it waits for: look again first.
    if (push_gen_.load(std::memory_order_relaxed) != generation) return;
    helpers_.push_back(parker);
  }
  if (deadline) {
    parker->park_until(*deadline);
  } else {
    parker->park();
  }
  std::lock_guard lock(mutex_);
  auto it = std::find(helpers_.begin(), helpers_.end(), parker);
  if (it != helpers_.end()) helpers_.erase(it);
}

std::shared_ptr<Task> WorkerPool::next_task(int index) {
  // Spin phase: poll the hint counter without taking the lock.
  spinning_.fetch_add(1, std::memory_order_relaxed);
  // The poll's length is read again at every clock check, so set_spin() reaches polls under way.
  const auto spin_start = Clock::now();
  for (unsigned i = 1;; ++i) {
    if (should_exit(index)) break;
    if (ready_count_.load(std::memory_order_relaxed) > 0) {
      std::shared_ptr<Parker> to_wake;
      std::shared_ptr<Task> t;
      {
        std::lock_guard lock(mutex_);
        t = pop_locked();
        if (t) {
          spinning_.fetch_sub(1, std::memory_order_relaxed);
          to_wake = wake_one_locked();
        }
      }
      if (to_wake) to_wake->unpark();
      if (t) return t;
    }
    // No sched_yield here: a poller that needs to give up its core does so by parking after
    // its spin (a futex sleep), and a hand-off to a polling worker then costs no system call.
    if (i % 64 == 0 && Clock::now() - spin_start >=
                           std::chrono::nanoseconds(spin_ns_.load(std::memory_order_relaxed))) {
      break;
    }
    cpu_relax();
  }
  // Park phase. spinning_ is decremented under mutex_, and the queues are re-checked under it,
  // so a push that saw spinning_ > 0 (and woke nobody) is seen here.
  const auto parker = this_thread_parker();
  std::unique_lock lock(mutex_);
  spinning_.fetch_sub(1, std::memory_order_relaxed);
  for (;;) {
    if (should_exit(index)) {
      // A worker removed by resize() may be the one a push counted on (it was spinning, so the
      // push woke nobody, or it was the idle worker the push woke): pass the wake-up on, or the
      // task would wait behind a parked survivor. spinning_ no longer counts this worker.
      const auto to_wake = wake_one_locked();
      lock.unlock();
      if (to_wake) to_wake->unpark();
      return nullptr;
    }
    if (auto t = pop_locked()) {
      const auto to_wake = wake_one_locked();
      lock.unlock();
      if (to_wake) to_wake->unpark();
      return t;
    }
    idle_.push_back(parker);
    lock.unlock();
    parker->park();
    lock.lock();
    auto it = std::find(idle_.begin(), idle_.end(), parker);
    if (it != idle_.end()) idle_.erase(it);
  }
}

void WorkerPool::worker_main(int index) {
  tls_worker_index = index;
  tls_pool = this;
  policy_.join();
  std::uint64_t pause_state = schedule_.seed ^ (0x5851f42d4c957f2dULL * (index + 1));
  while (auto t = next_task(index)) {
    if (random_) random_pause(pause_state);
    // Relaxed: idle_workers() is a hint for splitting work; it orders nothing.
    busy_.fetch_add(1, std::memory_order_relaxed);
    tls_left_busy = false;
    t->run();
    // Relaxed: a test switch, read once per task.
    if (const auto d = g_task_exit_delay_ns.load(std::memory_order_relaxed); d > 0) {
      std::this_thread::sleep_for(std::chrono::nanoseconds(d));
    }
    if (!tls_left_busy) busy_.fetch_sub(1, std::memory_order_relaxed);
  }
  policy_.leave();
}

void WorkerPool::resize(int num_threads) {
  std::lock_guard resize_lock(resize_mutex_);
  const int old = static_cast<int>(threads_.size());
  if (num_threads > old) {
    grow(old, num_threads);
    return;
  }
  target_.store(num_threads, std::memory_order_release);
  std::vector<std::shared_ptr<Parker>> to_wake;
  {
    std::lock_guard lock(mutex_);
    to_wake.swap(idle_);
  }
  for (auto& p : to_wake) p->unpark();
  for (int i = num_threads; i < old; ++i) threads_[i].join();
  threads_.resize(num_threads);
  // Surviving workers may have been parked by the wake-all above (helpers re-register); tasks that
  // are queued now are still found by them, as the removed workers only exit between tasks.
}

void WorkerPool::grow(int old, int num_threads) {
  // Release: a new worker that reads its index below target_ sees the pool built.
  target_.store(num_threads, std::memory_order_release);
  try {
    threads_.reserve(static_cast<std::size_t>(num_threads));
    for (int i = old; i < num_threads; ++i) {
      threads_.emplace_back([this, i] { worker_main(i); });
      if (!cores_.empty()) pin(i);
    }
  } catch (const Error&) {
    shrink_after_failure(old);
    throw;
  } catch (const std::exception& e) {
    const int started = static_cast<int>(threads_.size());
    shrink_after_failure(old);
    // ResourceUnavailable, not a plain Error: the caller's arguments were fine, the OS said no
    // (Python raises it as a RuntimeError, never the ValueError of a bad argument).
    throw ResourceUnavailable("cannot start " + std::to_string(num_threads) +
                              " CPU workers: the OS refused worker " + std::to_string(started + 1) +
                              " (" + e.what() + "); the pool keeps " + std::to_string(old) +
                              ". Ask for fewer (set_num_threads / STREAMRT_NUM_THREADS) or " +
                              "raise the process's thread and memory limits");
  }
}

void WorkerPool::pin(int i) {
  // From the starting thread, not the worker itself, so that a refusal is an Error here. The
  // worker may run its first instructions unpinned; a partition's pool gets no task before its
  // constructor has returned.
  const int core = cores_.at(static_cast<std::size_t>(i));
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(static_cast<std::size_t>(core), &set);
  const int rc = pthread_setaffinity_np(threads_[static_cast<std::size_t>(i)].native_handle(),
                                        sizeof(set), &set);
  if (rc != 0) {
    throw Error("cannot pin a CPU worker to core " + std::to_string(core) + ": " +
                std::strerror(rc) + "; name cores this process may run on (sched_getaffinity, " +
                "taskset)");
  }
}

void WorkerPool::shrink_after_failure(int old) noexcept {
  target_.store(old, std::memory_order_release);
  {
    std::lock_guard lock(mutex_);
    for (auto& p : idle_) p->unpark();  // the new workers may have parked already: let them see
  }
  for (std::size_t i = static_cast<std::size_t>(old); i < threads_.size(); ++i) threads_[i].join();
  threads_.resize(static_cast<std::size_t>(old));
}

void WorkerPool::shutdown() {
  {
    std::lock_guard lock(mutex_);
    if (stopped_.exchange(true, std::memory_order_relaxed)) return;
  }
  resize(0);
  // Anything pushed between the last worker's exit and stopped_ being seen: run it here.
  for (;;) {
    std::shared_ptr<Task> t;
    {
      std::lock_guard lock(mutex_);
      t = pop_locked();
    }
    if (!t) break;
    t->run();
  }
}

}  // namespace streamrt::cpu
