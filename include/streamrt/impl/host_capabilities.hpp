#pragma once
//! \file host_capabilities.hpp
//! Capabilities a backend may offer beyond the device contract, each reached through a method of
//! impl::Backend that returns null when the backend has none: how host kernels spread over its
//! threads, and host-run items. The CPU backend offers both. For backend authors (no stability
//! promise). See docs/design.md, "Backends".

#include <cstdint>
#include <functional>

#include "streamrt/export.hpp"

namespace streamrt::impl {

class StreamImpl;

//! Intra-op parallelism: how a backend spreads one host kernel (an op's loop, a graph replay's
//! independent branches) over its threads, in the shape of ATen's Parallel.h. The runtime uses the
//! one of the backend registered for DeviceType::CPU, the host's; kernels reach it through the
//! runtime, never through a backend's own type. Every method is thread-safe.
class STREAMRT_API IntraOpParallel {
 public:
  virtual ~IntraOpParallel() = default;
  //! Calls f(b, e) for consecutive sub-ranges covering [begin, end), none smaller than `grain`
  //! items (except the last), spread over the backend's threads. Blocks until every sub-range has
  //! finished; rethrows the first exception (sub-ranges not started by then are skipped). Runs
  //! f(begin, end) inline when the range is one grain, there is one thread, or when called from
  //! inside parallel_for (no nesting). Never waits for a thread that is busy elsewhere: the
  //! caller runs what is left.
  virtual void parallel_for(std::int64_t begin, std::int64_t end, std::int64_t grain,
                            const std::function<void(std::int64_t, std::int64_t)>& f) = 0;
  //! The number of threads parallel_for spreads over. Never blocks after the first call (which
  //! may start them).
  virtual int num_threads() = 0;
  //! True on a thread that is running a parallel_for sub-range. Never blocks.
  virtual bool in_parallel_region() const noexcept = 0;
};

//! Host-run items: a host thread that waits for a stream without a time-out may run the stream's
//! ready items itself when no thread of the backend runs them (Stream::set_host_run). Every method
//! is thread-safe and never blocks.
class STREAMRT_API HostRun {
 public:
  virtual ~HostRun() = default;
  //! Allows or forbids host-run items on `stream`, a stream of the backend that returned this
  //! object; items queued before the call follow the new setting too. Never throws.
  virtual void set_allowed(StreamImpl& stream, bool allowed) noexcept = 0;
  //! Whether host-run items are allowed on `stream`. Never throws.
  virtual bool allowed(const StreamImpl& stream) const noexcept = 0;
};

}  // namespace streamrt::impl
