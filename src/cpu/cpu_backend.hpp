#pragma once
// The CPU backend: streams on a shared worker pool.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cpu_stream.hpp"
#include "env_config.hpp"
#include "parallel.hpp"
#include "partition.hpp"
#include "streamrt/impl/backend.hpp"
#include "streamrt/impl/host_capabilities.hpp"
#include "worker_pool.hpp"

namespace streamrt::cpu {

// Host-run items (impl::HostRun) of CPU streams: each stream keeps its own flag, which its waits
// read (stream_wait.cpp).
class CpuHostRun final : public impl::HostRun {
 public:
  void set_allowed(impl::StreamImpl& stream, bool allowed) noexcept override;
  bool allowed(const impl::StreamImpl& stream) const noexcept override;
};

// A one-off task (completion callbacks) for the pool. Exceptions are reported, never propagated.
class FunctionTask final : public Task {
 public:
  FunctionTask(std::function<void()> fn, int level) : fn_(std::move(fn)), level_(level) {}
  void run() noexcept override;
  int level() const noexcept override { return level_; }

 private:
  std::function<void()> fn_;
  int level_;
};

// How the wait for pending work before a fork() ended (fork.cpp); in the child it says why work
// was still pending (the Cancelled its reads raise names the cause and the fix).
enum class ForkWait : std::uint8_t {
  kFinished,        // all work finished: what is pending was launched while the process forked
  kFromStreamWork,  // fork() from stream work or a callback: that thread cannot wait
  kOff,             // the fork time-out is 0
  kTimedOut,        // work did not finish within the fork time-out
  kFailed,          // the wait itself failed (out of memory)
};

// Reports an exception escaping a callback on stderr (it must not kill a worker or the process).
void report_callback_exception(const std::exception_ptr& e) noexcept;

class CpuBackend final : public impl::Backend {
 public:
  CpuBackend();
  ~CpuBackend() override;

  // The shared pool, started on first use with num_threads() workers less those partitions
  // reserve.
  WorkerPool& pool();
  // The pool if it was started (null in a fork child until first use), without starting it.
  WorkerPool* pool_if_started() const noexcept { return pool_.load(std::memory_order_acquire); }
  // Whether new streams allow host-run items (STREAMRT_HOST_RUN, default on).
  bool host_run_default() const noexcept { return host_run_; }
  // Launch-blocking mode (cpu::set_launch_blocking; STREAMRT_LAUNCH_BLOCKING). Relaxed: a
  // setting read at every launch; it publishes nothing else.
  bool launch_blocking() const noexcept { return launch_blocking_.load(std::memory_order_relaxed); }
  void set_launch_blocking(bool on) noexcept {
    launch_blocking_.store(on, std::memory_order_relaxed);
  }

  DeviceType type() const noexcept override { return DeviceType::CPU; }
  int device_count() const noexcept override { return 1; }
  std::pair<int, int> priority_range() const noexcept override { return {0, -(kNumLevels - 1)}; }

  std::shared_ptr<impl::StreamImpl> new_stream(int index, int priority) override;
  std::shared_ptr<impl::StreamImpl> default_stream(int index) override;
  void enqueue(impl::StreamImpl& stream, detail::Work work, const char* label) override;
  std::shared_ptr<impl::EventImpl> record(impl::StreamImpl& stream, EventOptions options) override;
  void block(const std::shared_ptr<impl::EventImpl>& position, impl::StreamImpl& stream) override;
  bool query_stream(const impl::StreamImpl& stream) override;
  bool synchronize_stream(impl::StreamImpl& stream,
                          std::optional<std::chrono::nanoseconds> timeout) override;
  bool query_event(const impl::EventImpl& position) override;
  EventState event_state(const impl::EventImpl& position) override;
  bool wait_event(const impl::EventImpl& position,
                  std::optional<std::chrono::nanoseconds> timeout) override;
  bool synchronize_event(const impl::EventImpl& position,
                         std::optional<std::chrono::nanoseconds> timeout) override;
  double elapsed_time(const impl::EventImpl& start, const impl::EventImpl& end) override;
  void on_complete(const std::shared_ptr<impl::EventImpl>& position,
                   std::function<void(std::exception_ptr)> cb) override;
  bool synchronize_device(int index, std::optional<std::chrono::nanoseconds> timeout) override;
  std::uint64_t pending(const impl::StreamImpl& stream) override;
  std::uint64_t cancel(impl::StreamImpl& stream) override;
  // The settings of cpu.hpp (streamrt::cpu, settings.cpp).
  void set_num_threads(int n);
  int num_threads() const;
  void set_worker_spin(std::chrono::microseconds spin);
  std::chrono::microseconds worker_spin() const;
  void set_worker_batch(bool batch);
  bool worker_batch() const;
  void set_tracing(bool on) noexcept override;
  impl::IntraOpParallel* intra_op_parallel() noexcept override { return &parallel_; }
  impl::HostRun* host_run() noexcept override { return &host_run_control_; }
  std::shared_ptr<impl::EventImpl> new_user_event(int index, EventOptions options) override;
  void complete_user_event(const std::shared_ptr<impl::EventImpl>& position,
                           std::exception_ptr failure) override;

  // Waits for all pending work and stops the workers (process exit). Later work runs inline.
  void shutdown() noexcept;

  // Partitions (partition.cpp). new_partition checks the request (Error naming the problem),
  // starts the partition's workers, shrinks the shared pool by as many and returns the lease that
  // keeps them; release_partition (PartitionState::retire, once its workers have exited) grows it
  // back. new_partition_stream's result holds the lease, the stream object only the pool.
  std::shared_ptr<PartitionLease> new_partition(int workers, std::vector<int> cores);
  void release_partition(const PartitionState* state) noexcept;
  std::shared_ptr<impl::StreamImpl> new_partition_stream(std::shared_ptr<PartitionLease> lease,
                                                         int priority);
  std::vector<std::shared_ptr<PartitionState>> live_partitions();
  // Blocks until no live stream of `partition` has unfinished work (PartitionState::retire).
  void wait_until_idle(const PartitionState& partition);

  // fork() (fork.cpp): how long the handler waits for pending work (cpu::set_fork_timeout);
  // the wait itself (no lock held, up to the time-out; also called by layers that must wait before
  // their own fork locks, cpu::finish_work_before_fork).
  void set_fork_timeout(std::chrono::nanoseconds timeout);
  std::chrono::nanoseconds fork_timeout() const noexcept {
    // Relaxed: a setting; it publishes no data.
    return std::chrono::nanoseconds(fork_timeout_ns_.load(std::memory_order_relaxed));
  }
  ForkWait finish_work_for_fork() noexcept;
  // pthread_atfork handlers (see cpu_backend.cpp, "fork").
  void prepare_fork() noexcept;
  void after_fork_in_parent() noexcept;
  void after_fork_in_child() noexcept;

 private:
  std::vector<std::shared_ptr<CpuStream>> live_streams();
  std::shared_ptr<impl::StreamImpl> add_stream(int index, int priority,
                                               std::shared_ptr<PartitionState> partition);
  // The shared pool's size: num_threads() less the reserved workers (pool_mutex_ held).
  int shared_workers_locked() const;
  // Workers reserved by partitions (pool_mutex_ held).
  int reserved_locked() const noexcept;
  // Waits (pool_mutex_ held by `lock`) until `fits()`, for partitions on their way out: the
  // worker that ran a partition's last item drops its last reference after the waiting host saw
  // the item finish, and a helper thread then gives the workers back (partition.cpp).
  void wait_for_releases(std::unique_lock<std::mutex>& lock, const std::function<bool()>& fits);
  // Throws Error when called from stream work or a callback (also work a waiting host thread
  // runs): `call` resizes the shared pool, which waits for the workers' current work.
  static void refuse_from_stream_work(const std::string& call);
  // Throws the Error of a bad environment setting (env_config.hpp). Called before a stream is
  // handed out or the pool is built, so nothing is queued under a bad setting.
  void check_config() const {
    if (!config_ok_) config();
  }

  std::mutex pool_mutex_;
  std::atomic<WorkerPool*> pool_{nullptr};
  std::atomic<int> threads_{1};
  // Microseconds an idle worker polls before it parks (set_worker_spin); the pool follows it.
  // Relaxed: a setting, written under pool_mutex_ so that a pool being built gets the latest.
  std::atomic<std::int64_t> worker_spin_us_{kDefaultWorkerSpinUs};
  // Workers under SCHED_BATCH (set_worker_batch). Written under pool_mutex_ (with the pool's own
  // setting); relaxed reads: a setting, it publishes nothing else.
  std::atomic<bool> worker_batch_{false};
  std::atomic<bool> launch_blocking_{false};
  std::atomic<std::uint64_t> next_id_{1};
  std::atomic<std::int64_t> fork_timeout_ns_{kDefaultForkTimeoutMs * 1'000'000};
  ForkWait fork_wait_ = ForkWait::kFinished;  // this fork's wait; guarded by pool_mutex_
  std::mutex streams_mutex_;
  std::vector<std::weak_ptr<CpuStream>> streams_;  // guarded by streams_mutex_
  std::size_t prune_at_ = 64;                      // guarded by streams_mutex_
  std::shared_ptr<CpuStream> default_stream_;
  bool config_ok_ = false;                           // set once, in the constructor
  Schedule schedule_;                                // from STREAMRT_SCHEDULE, set once
  bool host_run_ = true;                             // from STREAMRT_HOST_RUN, set once
  std::vector<std::shared_ptr<CpuStream>> forking_;  // streams locked across a fork()
  std::vector<PartitionEntry> partitions_;           // guarded by pool_mutex_
  std::condition_variable released_;  // notified under pool_mutex_ by release_partition
  std::vector<std::shared_ptr<PartitionState>> forking_partitions_;  // locked across a fork()
  CpuParallel parallel_{*this};  // intra-op parallelism on pool()
  CpuHostRun host_run_control_;  // host-run items: the flag each CpuStream keeps
};

// The backend registered for DeviceType::CPU when it is streamrt's own (settings.cpp); else
// throws Error saying that `what` applies to it only (impl::register_backend() replaced it).
CpuBackend& registered_cpu_backend(const char* what);

}  // namespace streamrt::cpu
