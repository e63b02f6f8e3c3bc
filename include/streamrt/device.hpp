#pragma once
//! \file device.hpp
//! Devices, and the device-wide calls: synchronize and worker count.

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "streamrt/export.hpp"

namespace streamrt {

//! The kinds of device streamrt knows about. Only CPU has a backend in this build.
enum class DeviceType : std::uint8_t { CPU = 0, CUDA = 1 };

//! Number of DeviceType values (for backend tables).
inline constexpr int kNumDeviceTypes = 2;

//! Lower-case name of a device type ("cpu", "cuda"). Never blocks; thread-safe.
STREAMRT_API std::string_view to_string(DeviceType type) noexcept;

//! A device: a type and an index. A plain value; thread-safe to copy.
struct STREAMRT_API Device {
  //! The device type; CPU by default.
  DeviceType type = DeviceType::CPU;
  //! The device index; 0 by default.
  int index = 0;

  //! Parses "cpu", "cpu:0", "cuda", "cuda:1". Throws Error naming the text on anything else.
  //! Never blocks; thread-safe. Does not check that a backend exists for the device.
  static Device parse(std::string_view text);

  //! "cpu:0" style text. Never blocks; thread-safe.
  std::string str() const;

  //! Same type and index.
  bool operator==(const Device&) const = default;
};

//! Blocks until all work submitted, before this call, to every stream of `device` has finished,
//! then rethrows the first failure found among those streams (that failure counts as reported).
//! Thread-safe. Throws Error when called from work running on a stream of the device.
STREAMRT_API void synchronize(Device device = {});

//! As synchronize(device), but gives up after `timeout` and returns false (nothing changes then:
//! no failure is reported). Any time-out is valid: one past what the clock counts
//! (nanoseconds::max()) waits as long as it can, a negative one polls. Thread-safe; the same
//! errors as synchronize().
STREAMRT_API bool synchronize_for(std::chrono::nanoseconds timeout, Device device = {});

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

}  // namespace streamrt

//! Hash of a device, so it can key unordered containers.
template <>
struct std::hash<streamrt::Device> {
  //! Combines type and index. Never blocks; thread-safe.
  std::size_t operator()(const streamrt::Device& d) const noexcept {
    return (static_cast<std::size_t>(d.type) << 16) ^ static_cast<std::size_t>(d.index);
  }
};
