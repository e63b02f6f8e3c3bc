#pragma once
// CPU streams: an in-order queue (lock-free for producers, stream_queue.hpp) drained by at most
// one thread at a time, scheduled on the shared WorkerPool. Every queue entry gets a sequence
// number; completed_ is the highest finished one, so an event record is just (stream, sequence
// number) and needs no queue entry unless it is timed. See docs/design.md for the full model.
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
#include "core/spin_mutex.hpp"
#include "failures.hpp"
#include "parker.hpp"
#include "stream_queue.hpp"
#include "streamrt/impl/backend.hpp"
#include "worker_pool.hpp"

namespace streamrt::cpu {

class CpuBackend;
class CpuStream;
class PartitionState;

// One recorded position: work of `stream` up to and including sequence number `seq`.
class CpuEvent final : public impl::EventImpl {
 public:
  CpuEvent(std::shared_ptr<CpuStream> s, std::uint64_t q, EventOptions o, std::int64_t ts);
  const std::shared_ptr<CpuStream> stream;
  // Set once before the event is shared (a timing record learns its position when its node is
  // pushed); read-only afterwards.
  std::uint64_t seq;
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
  // `partition`: the stream runs on that partition's pool (null: the shared pool).
  CpuStream(CpuBackend& backend, Device device, int priority, std::uint64_t id,
            std::shared_ptr<PartitionState> partition = nullptr);
  ~CpuStream() override;

  // The pool this stream, its callbacks and its resumptions are pushed to: its partition's, else
  // the backend's shared pool (started on first use; throws Error as CpuBackend::pool()).
  WorkerPool& pool() const;
  // That pool if it is running, without starting it.
  WorkerPool* pool_if_started() const noexcept;
  // True when both streams run on the same pool.
  bool same_pool(const CpuStream& other) const noexcept { return partition_ == other.partition_; }
  // The partition whose pool the stream runs on (null: the shared pool). Never blocks.
  const PartitionState* partition() const noexcept { return partition_.get(); }
  // This object's own reference (impl::StreamImpl::bookkeeping_ref): a partition stream's
  // handles hold the partition's lease as well, this does not.
  std::shared_ptr<impl::StreamImpl> bookkeeping_ref() noexcept override {
    return shared_from_this();
  }
  // The innermost stream this thread runs work of (nested parallelism splits over its pool), else
  // null.
  static const CpuStream* innermost_running() noexcept;

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
    // Finished first: it never passes launched, so the difference cannot wrap.
    const auto finished = work_finished_.load(std::memory_order_relaxed);
    return work_launched_.load(std::memory_order_relaxed) - finished;
  }
  // Drops the queued work that has not started; returns how many items were dropped.
  std::uint64_t cancel();
  // fork() support (see cpu_backend.cpp): take (mutex_ of every stream first, then every
  // failure lock, as runners nest them) / release every lock of the stream, and in the child
  // drop everything that was queued or running in the parent (fork.cpp).
  void lock_for_fork(bool failures);
  void unlock_after_fork();
  // Returns what the child must destroy after unlock_after_fork(); `why` ends the Cancelled the
  // dropped positions complete with (why the work was still pending, what to do).
  std::shared_ptr<void> reset_in_fork_child(const std::string& why);
  // Acquire: kept for callers that read completed_ next; the value alone needs only coherence.
  std::uint64_t submitted() const noexcept { return submitted_.load(std::memory_order_acquire); }

  // Whether a synchronizing host thread may run this stream's ready items itself (host-run
  // items, docs/design.md). On by default unless STREAMRT_HOST_RUN=0.
  // Relaxed: a setting read by later waits; it publishes no data.
  void set_host_run(bool on) noexcept { host_run_.store(on, std::memory_order_relaxed); }
  bool host_run() const noexcept { return host_run_.load(std::memory_order_relaxed); }

  // Position queries.
  bool is_complete(std::uint64_t seq) const noexcept {
    // Acquire: a true answer makes the work up to seq visible (pairs with complete_locked).
    return completed_.load(std::memory_order_acquire) >= seq;
  }
  // The failure covering `seq` (work before it failed, was skipped or cancelled), or null.
  std::shared_ptr<ErrorRecord> failure_at(std::uint64_t seq) const { return failures_.at(seq); }
  // Blocks until `seq` completes (helping the pool when on a worker, running this stream's ready
  // items when on a host thread). False on time-out.
  bool wait_complete(std::uint64_t seq, std::optional<Clock::time_point> deadline, bool blocking);
  // What one step of directed help towards a position did (see stream_wait.cpp).
  enum class Help {
    kProgress,  // ran something or found the position complete: look again
    kNothing,   // nothing this thread may run: wait for a push or a completion
    kDeferred,  // a host left a ready stream to the workers (a polling one, or a more urgent
                // stream first): they may take something else, so look again soon
  };
  // One step of directed help towards `seq`.
  Help help_towards(std::uint64_t seq);
  // Runs `fn` (on a pool thread) once `seq` completes; false, registering nothing, if it already
  // has.
  bool on_complete(std::uint64_t seq, std::function<void()> fn);
  // True when this thread is running work of this stream (waiting for it would self-deadlock).
  bool held_by_this_thread() const noexcept;
  // True when this thread is running work of any stream.
  static bool running_any_stream() noexcept;
  // How many drains this thread has nested (helping waiters nest them); at most kMaxHelpDepth.
  static int running_depth() noexcept;
  static constexpr int kMaxHelpDepth = 32;
  // The unreported failure, if any, without consuming it.
  bool has_active_error() const;
  // A host wait raised `error` (rule 10): if it is this stream's active failure when the stream
  // reaches its current end, work submitted from now on runs again (a clearing point queued at
  // the current end).
  void clear_reported(const std::shared_ptr<ErrorRecord>& error);

  // "cpu:0 stream 3" for messages.
  std::string str() const { return device().str() + " stream " + std::to_string(id()); }

  // User events (docs/design.md, "User events"): a stream that never gets work, whose only
  // position (1) the host completes. Not in the backend's stream list, so device-wide syncs and
  // exit do not wait for it; streams that wait on it park on it like on any other stream.
  static std::shared_ptr<CpuEvent> new_user_position(CpuBackend& backend, Device device,
                                                     std::uint64_t id, EventOptions options);
  void complete_user(CpuEvent& position, std::exception_ptr failure);

  // Task: drains the queue on a worker.
  void run() noexcept override;
  // Drains the queue; when stop_at != 0, yields (stays scheduled) once stop_at has completed.
  // With `next` (a worker's own drain, from run()), a stream the drain resumed may be handed back
  // there instead of going through the pool: the caller then drains it, owning it already.
  void drain(std::uint64_t stop_at, std::shared_ptr<CpuStream>* next = nullptr) noexcept;
  // Priorities run from 0 (least urgent) down to -(kNumLevels - 1) (most urgent); pool level 0 is
  // the most urgent, so priority p maps to level p + kNumLevels - 1.
  int level() const noexcept override { return priority() + (kNumLevels - 1); }

 private:
  using Kind = Node::Kind;
  struct Continuation {
    std::uint64_t seq;
    std::shared_ptr<Parker> parker;     // unpark a waiting thread, or
    std::shared_ptr<CpuStream> resume;  // reschedule a stream blocked on us, or
    std::function<void()> callback;     // post a callback task
  };
  // What a worker's own drain holds back until it leaves the stream (or more work follows):
  // completion callbacks, which it then runs itself, and streams it resumed, which it then takes
  // from the pool itself, with no wake-up of another worker (a hand-off without a round trip).
  struct Deferred {
    std::vector<std::function<void()>> callbacks;
    std::vector<std::shared_ptr<CpuStream>> resumes;
    bool empty() const noexcept { return callbacks.empty() && resumes.empty(); }
  };
  // Why drain_items() returned.
  enum class Exit { kIdle, kRequeue, kBlocked };

  // Producer side: pushes a node (lock-free) and schedules the stream on its empty -> non-empty
  // transition. Returns the node's sequence number.
  std::uint64_t push(Node* n);
  // push(n); when it throws, `n` is cleared and back in the cache before the exception goes on.
  std::uint64_t push_or_recycle(Node* n);
  // Consumer side (mutex_ held): moves linked nodes from the inbox to local_, in sequence order.
  // At most `limit` in-order nodes are moved (the drainer takes one at a time); the default moves
  // all.
  void absorb_locked(std::size_t limit = static_cast<std::size_t>(-1));
  // The next entry in sequence order, or null when it is not linked yet.
  Node* front_locked();
  void pop_front_locked();
  // Runs the stream's linked entries in order until it runs dry, parks on a wait, reaches
  // `stop_at` (nonzero) or yields to another stream; the steps below are its parts, inlined into
  // it (mutex_ held on entry and on a nullopt return).
  Exit drain_items(std::uint64_t stop_at, Deferred& deferred) noexcept;
  struct DrainState;
  // Ran dry: keeps the stream for a moment when nothing else is ready (true: look again).
  [[gnu::always_inline]] inline bool linger_locked(
      DrainState& st, std::unique_lock<core::SpinMutex>& lock) noexcept;
  // Ran dry: settles pending_ (kIdle when nothing is left), else waits briefly for the link.
  [[gnu::always_inline]] inline std::optional<Exit> wait_for_link_locked(
      DrainState& st, std::unique_lock<core::SpinMutex>& lock) noexcept;
  // The front is a wait on an incomplete event: parks the stream on it (kBlocked, kRequeue), or
  // nullopt when the event completed meanwhile.
  [[gnu::always_inline]] inline std::optional<Exit> park_on_wait_locked(
      Node* front, DrainState& st, std::unique_lock<core::SpinMutex>& lock) noexcept;
  // Runs (or, after a failure, skips) one popped entry.
  [[gnu::always_inline]] inline void run_node_locked(
      Node* e, std::unique_lock<core::SpinMutex>& lock) noexcept;
  [[gnu::always_inline]] inline void run_work_locked(
      Node* e, std::unique_lock<core::SpinMutex>& lock) noexcept;
  // After entry `seq`: kIdle or kRequeue when the drainer should leave (helped far enough, or
  // the pool wants the worker for another stream).
  [[gnu::always_inline]] inline std::optional<Exit> leave_if_due_locked(
      std::uint64_t seq, DrainState& st, std::unique_lock<core::SpinMutex>& lock) noexcept;
  bool add_continuation(Continuation c);
  // Advances completed_ to `seq` and fires the continuations it satisfies. Callbacks and resumed
  // streams go to `defer` when given, else to the pool.
  void complete_locked(std::uint64_t seq, std::unique_lock<core::SpinMutex>& lock,
                       Deferred* defer = nullptr);
  void fire(Continuation& c, Deferred* defer);
  // Posts what was held back, waking workers as usual.
  void flush(Deferred& deferred);
  // Runs completion callback `cb` as its own pool task (here, when there is no memory for one).
  void start_callback(std::function<void()>& cb) noexcept;
  // Makes `error` (with `record` when it is inherited from another stream) the active failure
  // from `seq` on (stream lock); a new record names the failed item's `label` and `origin`. Out
  // of memory for its record, it is reported on stderr instead.
  void record_failure(std::exception_ptr error, std::shared_ptr<ErrorRecord> record,
                      std::uint64_t seq, const char* label = nullptr,
                      const char* origin = nullptr) noexcept;
  // Makes a stream that was parked on a wait runnable again. wake=false: the caller, a worker
  // about to look for its next task, will take it itself.
  void resume(bool wake = true);
  // The first half of resume(): the stream is runnable again (its caller then drains it).
  void unblock();

  CpuBackend& cpu_;
  // Set at creation; keeps the partition's pool object while the stream lives (not its workers:
  // the handles' lease keeps those, see partition.hpp).
  const std::shared_ptr<PartitionState> partition_;
  std::atomic<bool> host_run_;
  // A user event's private stream (new_user_position): its one position is never queued, so
  // nothing may be pushed behind it. Written before the stream is shared.
  bool user_position_only_ = false;

  // --- Producer side (any thread, lock-free), on its own cache lines.
  // The last sequence number handed out. Producers take numbers with fetch_add, so numbers can be
  // linked into the inbox slightly out of order; absorb_locked() puts them back in order.
  alignas(kCacheLine) std::atomic<std::uint64_t> submitted_{0};
  // Nodes pushed and not yet finished. The stream is owned by one drainer (queued in the pool,
  // running, or blocked on a wait) exactly while this is non-zero: the push that raises it from 0
  // schedules the stream, the drainer that brings it back to 0 leaves it idle.
  std::atomic<std::uint64_t> pending_{0};
  std::atomic<std::uint64_t> work_launched_{0};
  MpscQueue inbox_;

  // --- Consumer side.
  alignas(kCacheLine) std::atomic<std::uint64_t> completed_{0};
  std::atomic<std::uint64_t> work_finished_{0};  // includes dropped items
  // Taken by the drainer twice per item (around it, never while user work runs) and by the slow
  // paths: cancel, continuations (a synchronize or event wait registers one when the work is not
  // done yet), a helping waiter's look at the front, user events, device synchronize's error
  // check, fork. Never by launch, record or query (they use the atomics above). An inlined lock
  // (core/spin_mutex.hpp) rather than two calls into libpthread per item.
  mutable core::SpinMutex mutex_;
  Node* local_head_ = nullptr;  // guarded by mutex_: absorbed nodes in order, linked by `next`
  Node* local_tail_ = nullptr;  // guarded by mutex_
  std::uint64_t next_seq_ = 1;  // guarded by mutex_: the sequence number local_ expects next
  std::vector<Node*> early_;    // guarded by mutex_: absorbed ahead of a gap, sorted by seq
  bool blocked_ = false;        // guarded by mutex_: parked on the wait at local_'s front
  // Failure spans, the active failure and cancel ranges (failures.hpp): the parts marked "stream
  // lock" are guarded by mutex_.
  FailureLedger failures_;

  // Continuations: a min-heap on seq, guarded by mutex_. completed_ is only advanced under
  // mutex_ too, so a registration and a completion never miss each other.
  std::vector<Continuation> continuations_;
};

}  // namespace streamrt::cpu
