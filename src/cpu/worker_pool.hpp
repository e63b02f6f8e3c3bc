#pragma once
// The CPU backend's worker pool: a fixed set of threads shared by every stream (and later by
// intra-op parallelism), with a ready queue per priority level. Streams are scheduled as tasks:
// a stream with runnable work is in the ready queue at most once (see cpu_stream.hpp).
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "clock.hpp"
#include "env_config.hpp"
#include "parker.hpp"
#include "worker_policy.hpp"

namespace streamrt::cpu {

// How long a stream keeps its worker while streams of the same priority wait (more urgent ones
// take over after the current item). Yielding after every item made each item pay a pool lock, a
// push and a pop with several streams ready; turns as short as a few large items made each turn
// start on caches holding another stream's data (a worker alternating between networks' layers).
// Turns of about an OS scheduler's slice let a stream's consecutive items share its worker's
// caches, as a thread's do; work that must not wait behind them takes a higher priority or a
// partition (figures: docs/performance.md, "Figures behind constants").
inline constexpr auto kTimeSlice = std::chrono::microseconds(4000);

// Number of priority levels; level 0 is the most urgent. Stream priorities (0 = least urgent,
// lower = more urgent) map to levels in CpuStream::level().
inline constexpr int kNumLevels = 4;

// Something a worker runs: a stream drain or a one-off callback. A task is in the ready queue at
// most once at a time.
class ReadyList;

class Task {
 public:
  virtual ~Task() = default;
  // Runs on a worker (or a helping waiter). Must not throw.
  virtual void run() noexcept = 0;
  // 0 = most urgent.
  virtual int level() const noexcept = 0;

 private:
  friend class ReadyList;
  // The ready queue links its tasks through these, so queueing allocates nothing: a stream that
  // has published a node must be able to schedule itself even when memory is exhausted.
  Task* ready_next_ = nullptr;         // guarded by the pool's mutex_
  std::shared_ptr<Task> ready_owner_;  // the queue's reference while queued; guarded likewise
};

// A FIFO of tasks linked through Task::ready_next_. Not thread-safe (the pool's mutex_ guards it).
class ReadyList {
 public:
  bool empty() const noexcept { return head_ == nullptr; }
  std::size_t size() const noexcept { return size_; }
  // Appends `task`, which must not be queued. Never allocates, never throws.
  void push_back(std::shared_ptr<Task> task) noexcept;
  // Removes and returns the task `skip` places from the front (0: the front); null when empty.
  std::shared_ptr<Task> take(std::size_t skip = 0) noexcept;
  // Removes and returns `task` if it is queued here, else null.
  std::shared_ptr<Task> take(const Task* task) noexcept;

 private:
  std::shared_ptr<Task> unlink(Task* prev, Task* t) noexcept;
  Task* head_ = nullptr;
  Task* tail_ = nullptr;
  std::size_t size_ = 0;
};

class WorkerPool {
 public:
  // `spin`: how long an idle worker polls before it parks (set_spin); `batch`: the workers run
  // under SCHED_BATCH (set_batch). `cores` (a partition's pinned pool): worker i runs only on
  // core cores[i]; then num_threads must equal cores.size() and the pool is never resized. Throws
  // ResourceUnavailable (an Error) when the OS refuses a thread, Error when it refuses a pinning
  // (nothing is left running then).
  explicit WorkerPool(
      int num_threads, Schedule schedule = {},
      std::chrono::nanoseconds spin = std::chrono::microseconds(kDefaultWorkerSpinUs),
      bool batch = false, std::vector<int> cores = {});
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Makes `task` runnable. Never blocks on running work, never allocates, never throws (a stream
  // schedules itself with it after publishing work). After shutdown() runs it inline.
  // wake=false: the caller is a worker that will look for its next task right away, so no idle
  // worker is woken for this one (helpers still are).
  void push(std::shared_ptr<Task> task, bool wake = true) noexcept;

  // Removes `task` from the ready queue if it is there, for the caller to run now (directed
  // help-while-waiting). Null when it is not queued (running elsewhere, blocked or idle).
  std::shared_ptr<Task> try_take(const Task* task);

  // Counts pushes. A helper reads it before looking for work to help with and passes it to
  // park_helper, so that a push in between is never missed.
  std::uint64_t push_generation() const noexcept {
    return push_gen_.load(std::memory_order_relaxed);
  }

  // A drain's time slice against equal-priority tasks (see should_yield). `since`: when an equal
  // task was first seen waiting (unset: none yet). While items are short against the slice, the
  // clock is read only every `step` items (up to kMaxSliceStep), since reading it costs more than
  // an empty item; a long item sets the step back to one.
  struct TimeSlice {
    Clock::time_point since{};
    Clock::time_point last{};  // the last clock read
    int skip = 0;              // items left before the next read
    int step = 1;
  };
  static constexpr int kMaxSliceStep = 16;

  // True when a running stream at `level` should go to the back of the ready queue after its item:
  // a more urgent task waits, or one of the same level has waited for kTimeSlice. The caller keeps
  // one TimeSlice per drain (the slice starts when an equal task is first seen waiting, so a drain
  // with none reads no clock). Never blocks; reads hint counters only (a stale value delays a
  // yield).
  bool should_yield(int level, TimeSlice& slice) const noexcept;

  // True when a task more urgent than `level` waits in the ready queue (a hint: relaxed loads).
  bool more_urgent_waiting(int level) const noexcept;

  // True under STREAMRT_SCHEDULE=random: every scheduling choice goes through the ready queue.
  bool randomized() const noexcept { return random_; }

  // True when a task waits in the ready queue (a hint: relaxed load).
  bool has_ready() const noexcept { return ready_count_.load(std::memory_order_relaxed) > 0; }

  // True when an idle worker is polling the ready queue (a hint: relaxed load): it takes a pushed
  // task within a poll, so a host thread competing for the same task only adds lock traffic.
  bool worker_polling() const noexcept { return spinning_.load(std::memory_order_relaxed) > 0; }

  // How many workers neither run a task nor have one waiting for them: those a pushed task could
  // start on at once. A hint (relaxed loads): a worker between two tasks counts as idle.
  int idle_workers() const noexcept {
    const int idle = size() - busy_.load(std::memory_order_relaxed) -
                     ready_count_.load(std::memory_order_relaxed);
    return idle > 0 ? idle : 0;
  }

  // How long an idle worker polls before it parks; polls under way see the new value within 64
  // polls. Never blocks; thread-safe.
  void set_spin(std::chrono::nanoseconds spin) noexcept {
    // Relaxed: a setting read by each poll; publishes nothing else.
    spin_ns_.store(spin.count(), std::memory_order_relaxed);
  }

  // Runs the workers, present and future, under SCHED_BATCH (true) or the default policy: a
  // batch worker woken for a task does not preempt the thread running on its core. Throws Error
  // when the OS refuses (nothing changes then). Thread-safe.
  void set_batch(bool batch) { policy_.set_batch(batch); }
  bool batch() const { return policy_.batch(); }

  // Sleeps a helping waiter until a task is pushed (after `generation`), it is unparked, or
  // `deadline`. Helpers are not idle workers: pushes wake them all, in addition to one idle
  // worker, since only they know whether the task is what they wait for.
  void park_helper(const std::shared_ptr<Parker>& parker,
                   std::optional<std::chrono::steady_clock::time_point> deadline,
                   std::uint64_t generation);

  // Resizes; blocks until removed workers have finished their current task and exited. All or
  // nothing: when the OS refuses a thread, the workers this call started exit again and
  // ResourceUnavailable (naming the count, the limit reached and the OS's reason) is thrown with
  // the old size kept.
  void resize(int num_threads);
  int size() const noexcept { return target_.load(std::memory_order_relaxed); }

  // Stops all workers after their current task; later pushes run inline. Idempotent.
  void shutdown();
  // True once shutdown() has begun (a hint: relaxed load).
  bool stopped() const noexcept { return stopped_.load(std::memory_order_relaxed); }

  // The pool whose worker the calling thread is; null on other threads.
  static WorkerPool* current() noexcept;
  // Called by a task running on one of this pool's workers that will take no more work: counts
  // the worker idle (idle_workers()) from now, before the task returns, so that a split made
  // right after what the task reports next can ask this worker again. Once per task; no-op on
  // other threads. Never blocks.
  void leave_busy() noexcept;
  // Test switch (tests/internal): every worker pauses `delay` after each task before it counts
  // itself idle, so the tests can show what leave_busy() prevents. 0 turns it off.
  static void set_task_exit_delay_for_testing(std::chrono::nanoseconds delay) noexcept;

  // True on one of this pool's worker threads.
  static bool on_worker_thread() noexcept;
  // Index of the calling worker, -1 elsewhere.
  static int worker_index() noexcept;

 private:
  void worker_main(int index);
  // resize() upwards; on failure stops what it started (shrink_after_failure) and throws.
  void grow(int old, int num_threads);
  void shrink_after_failure(int old) noexcept;
  // Pins worker `i` (just started) to cores_[i]; throws Error when the OS refuses.
  void pin(int i);
  std::shared_ptr<Task> pop_locked();
  std::shared_ptr<Task> next_task(int index);
  // Takes one idle worker to wake for a queued task (null when one is spinning or none is idle);
  // the caller unparks it after releasing mutex_.
  std::shared_ptr<Parker> wake_one_locked();
  bool should_exit(int index) const noexcept {
    return index >= target_.load(std::memory_order_acquire);
  }

  mutable std::mutex mutex_;
  std::array<ReadyList, kNumLevels> ready_;  // guarded by mutex_
  // Mirrors of the ready queue sizes for lock-free peeking. Writers hold mutex_; readers may see a
  // stale value, which only delays a yield or a spin exit: the authoritative check is under mutex_.
  std::atomic<int> ready_count_{0};
  std::array<std::atomic<int>, kNumLevels> level_count_{};
  std::vector<std::shared_ptr<Parker>> idle_;     // guarded by mutex_
  std::vector<std::shared_ptr<Parker>> helpers_;  // guarded by mutex_
  // Written under mutex_; read without it only for the snapshot park_helper re-checks under it.
  std::atomic<std::uint64_t> push_gen_{0};
  std::atomic<int> spinning_{0};
  std::atomic<int> busy_{0};           // workers running a task (idle_workers)
  std::atomic<std::int64_t> spin_ns_;  // set_spin

  WorkerPolicy policy_;  // before the threads that join it

  std::mutex resize_mutex_;
  std::atomic<int> target_{0};
  std::vector<std::thread> threads_;  // guarded by resize_mutex_
  std::atomic<bool> stopped_{false};

  const Schedule schedule_;
  const std::vector<int> cores_;  // empty: unpinned
  const bool random_;
  std::uint64_t rng_;  // guarded by mutex_ (kRandom picks)
};

}  // namespace streamrt::cpu
