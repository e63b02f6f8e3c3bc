#pragma once
//! \file cpu.hpp
//! streamrt::cpu: the CPU backend's own settings, the C++ side of Python's streamrt.cpu: the size
//! of its worker pool, how idle workers wait and are scheduled, and the stream priorities it
//! accepts. The device-generic calls (streams, events, synchronize) are in stream.hpp, event.hpp
//! and device.hpp. Every function applies to streamrt's CPU backend and throws Error when
//! impl::register_backend() replaced it for DeviceType::CPU by another one.

#include <chrono>
#include <utility>

#include "streamrt/export.hpp"

namespace streamrt::cpu {

//! Sets the number of CPU worker threads (1 to 4096). Blocks until the pool has been resized;
//! queued work is kept. Thread-safe; throws Error when called from a worker thread, with n out of
//! range, or when the OS refuses a new thread (the pool then keeps its old size).
STREAMRT_API void set_num_threads(int n);

//! The number of CPU worker threads: STREAMRT_NUM_THREADS, else the hardware concurrency.
//! Never blocks; thread-safe.
STREAMRT_API int num_threads();

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

//! {least urgent, most urgent} priorities of CPU streams: {0, -(levels - 1)}, lower = more
//! urgent; what Stream::priority_range(Device{}) returns. Never blocks; thread-safe.
STREAMRT_API std::pair<int, int> priority_range();

}  // namespace streamrt::cpu
