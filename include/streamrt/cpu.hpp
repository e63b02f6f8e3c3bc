#pragma once
//! \file cpu.hpp
//! streamrt::cpu: the CPU backend's own settings, the C++ side of Python's streamrt.cpu: the size
//! of its worker pool, how idle workers wait and are scheduled, and the stream priorities it
//! accepts, and partitions of its workers (Partition). The device-generic calls (streams, events,
//! synchronize) are in stream.hpp, event.hpp and device.hpp. Every function applies to streamrt's
//! CPU backend and throws Error when impl::register_backend() replaced it for DeviceType::CPU by
//! another one.

#include <chrono>
#include <memory>
#include <utility>
#include <vector>

#include "streamrt/export.hpp"
#include "streamrt/stream.hpp"

namespace streamrt::cpu {

//! Sets the number of CPU worker threads (1 to 4096), partitions' workers included: the shared
//! pool gets n minus the workers live partitions reserve. Blocks until the pool has been resized;
//! queued work is kept. Thread-safe; throws Error when called from a worker thread, with n out of
//! range, with n not above the workers live partitions reserve (the shared pool keeps at least
//! one); ResourceUnavailable (an Error) when the OS refuses a new thread (the pool then keeps
//! its old size).
STREAMRT_API void set_num_threads(int n);

//! The number of CPU worker threads: STREAMRT_NUM_THREADS, else the hardware concurrency, or
//! what set_num_threads() set; partitions' workers are part of it. Never blocks; thread-safe.
STREAMRT_API int num_threads();

//! True when the calling thread is one of the CPU backend's worker threads (of the shared pool or
//! of a partition); false on any other thread, also while a host thread runs queued work as it
//! waits. For libraries whose per-thread settings a worker keeps from item to item but a host
//! thread must get back (a kernel library's intra-op thread count). Never blocks; thread-safe.
STREAMRT_API bool on_worker_thread() noexcept;

//! Sets how long an idle CPU worker polls for new work before it sleeps (0 to 1,000,000 us; the
//! default is 50 us, or STREAMRT_WORKER_SPIN_US). Longer hands bursts of work over without a
//! wake-up; shorter gives the cores back sooner to other threads and processes: set it low where
//! processes share the cores (several MPI ranks per machine; streamrt::mpi does so itself when it
//! finds the cores oversubscribed), as KMP_BLOCKTIME is for OpenMP. Polls under way follow the
//! new value. Never blocks; thread-safe; throws Error for a value out of range.
STREAMRT_API void set_worker_spin(std::chrono::microseconds spin);

//! The poll time of set_worker_spin(). Never blocks; thread-safe.
STREAMRT_API std::chrono::microseconds worker_spin();

//! Runs the CPU workers, present and future, under Linux's SCHED_BATCH policy (true) or the
//! default one (false; the default unless STREAMRT_WORKER_BATCH=1). A batch worker woken for new
//! work does not preempt the thread running on its core: it waits until that thread sleeps or
//! its time slice ends. Where processes share the cores (several MPI ranks per machine), the
//! thread that launched the work usually waits for it next and then runs it itself (host-run
//! items), so a worker that preempted it would only take a core another process needs;
//! streamrt::mpi turns it on when it finds the cores oversubscribed. Leave it off otherwise: on
//! a busy machine a woken worker then starts later. Blocks only briefly (a lock); thread-safe;
//! throws Error when the OS refuses the change (nothing changes then).
STREAMRT_API void set_worker_batch(bool batch);

//! The setting of set_worker_batch(). Never blocks; thread-safe.
STREAMRT_API bool worker_batch();

//! Sets how long fork() waits for the stream work queued when it is called (default 10 s, or
//! STREAMRT_FORK_TIMEOUT in seconds; 0: no wait). streamrt's pthread_atfork handler waits, holding
//! no lock of the runtime, for the work of every stream to finish, so that the child reads the
//! results as the parent does (a DataLoader's worker processes reading tensors made on streams).
//! Work still queued or running after the time-out (blocked on a user event nobody completes,
//! launched while the process forks, or any work when fork() is called from stream work or a
//! callback, which cannot wait) runs in the parent only: the child's waits and reads of it raise
//! Cancelled saying why. A failure of the work waited for is reported in the parent as before.
//! See docs/reliability.md, "fork()". Never blocks; thread-safe; throws Error for a time-out
//! below 0 or above a day.
STREAMRT_API void set_fork_timeout(std::chrono::nanoseconds timeout);

//! The time-out of set_fork_timeout(). Never blocks; thread-safe.
STREAMRT_API std::chrono::nanoseconds fork_timeout();

//! Waits as fork()'s handler does (up to fork_timeout()) for the work queued on every stream, and
//! tells the handler of this thread's next fork() that it need not wait again. For a layer whose
//! fork() holds a lock that stream work may need: Python's os.fork() holds the GIL (streamrt's
//! Python module calls this from an os.register_at_fork hook, with the GIL released). Blocks up to
//! fork_timeout() (not at all from stream work or a callback); thread-safe; never throws.
STREAMRT_API void finish_work_before_fork() noexcept;

//! Launch-blocking mode (true), for debugging: every launch and op waits for its own completion
//! at its call, as Stream::synchronize() does, so a failure of stream work is raised by the call
//! that queued it (with CUDA_LAUNCH_BLOCKING=1's purpose). Off by default unless
//! STREAMRT_LAUNCH_BLOCKING=1. Launches made from inside stream work do not wait (they are not
//! the host's). Slow: work no longer overlaps the host. Never blocks; thread-safe; launches under
//! way follow the new value.
STREAMRT_API void set_launch_blocking(bool on);

//! The setting of set_launch_blocking(). Never blocks; thread-safe.
STREAMRT_API bool launch_blocking();

//! {least urgent, most urgent} priorities of CPU streams: {0, -(levels - 1)}, lower = more
//! urgent; what Stream::priority_range(Device{}) returns. Never blocks; thread-safe.
STREAMRT_API std::pair<int, int> priority_range();

class PartitionLease;

//! A set of CPU workers reserved for the streams created in it (new_stream()): work of other
//! streams never runs on them, and an op running on a partition's stream splits (intra-op
//! parallelism) only over that partition's idle workers. The shared pool gives up as many workers
//! while the partition lives, so num_threads() stays the total and the cores are not
//! oversubscribed. A copyable handle: copies name the same partition, whose workers stay reserved
//! while any handle of it or of its streams lives, and after that until the work queued on its
//! streams has run (no work is dropped). Events, tensors and cached memory of its streams do not
//! keep them. All members are thread-safe. See docs/design.md, "Partitions".
class STREAMRT_API Partition {
 public:
  //! Reserves `workers` unpinned workers (the OS places them). Blocks until the shared pool has
  //! shrunk (its surplus workers finish their current item). Throws Error when workers < 1, when
  //! the partitions would leave the shared pool no worker (reserved >= num_threads()), when called
  //! from stream work or a callback; ResourceUnavailable (an Error) when the OS refuses a thread.
  explicit Partition(int workers);

  //! Reserves one worker per core of `cores`, each pinned to its core (pthread_setaffinity_np).
  //! A named function rather than a constructor: Partition({3}) would otherwise mean three
  //! workers. Blocks and throws as Partition(int), and also when `cores` is empty, a core is
  //! negative, named twice, not in the process's affinity mask (sched_getaffinity), or pinned by
  //! another live partition.
  static Partition pinned(std::vector<int> cores);

  //! The number of workers reserved. Never blocks.
  int num_workers() const noexcept;

  //! The cores the workers are pinned to, in worker order; empty when unpinned. Never blocks.
  std::vector<int> cores() const;

  //! A NEW CPU stream whose work (items, completion callbacks, nested parallel splits) runs only
  //! on this partition's workers (and on a host thread that waits for it, as any stream's:
  //! Stream::set_host_run). It keeps the partition alive. Never blocks; throws Error for a
  //! priority out of range (Stream::priority_range()).
  Stream new_stream(int priority = 0) const;

  //! True when both handles name the same partition. Never blocks.
  bool operator==(const Partition& other) const noexcept = default;

 private:
  explicit Partition(std::shared_ptr<PartitionLease> state) noexcept;
  std::shared_ptr<PartitionLease> state_;
};

}  // namespace streamrt::cpu
