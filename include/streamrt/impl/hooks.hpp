#pragma once
//! \file hooks.hpp
//! What the runtime offers backends and the layers above it beyond the device contract
//! (impl/backend.hpp): the profiler's sink for finished work items, this thread's current stream,
//! and fork handlers run inside the backend's own. For backend authors and language bindings (no
//! stability promise). See docs/design.md, "Backends".

#include <cstdint>

#include "streamrt/device.hpp"
#include "streamrt/export.hpp"

namespace streamrt {
class Stream;
}  // namespace streamrt

namespace streamrt::impl {

//! One finished work item, as a backend reports it to the runtime's profiler (trace_item(), below).
//! Times are nanoseconds of std::chrono::steady_clock.
struct TraceItem {
  //! Where the item ran.
  Device device;
  //! The stream's id and priority.
  std::uint64_t stream_id = 0;
  int priority = 0;
  //! The launch label; static storage (Stream::launch requires labels to outlive the work).
  const char* label = nullptr;
  //! When the item was enqueued, started and finished.
  std::int64_t enqueue_ns = 0;
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  //! The backend's index of the thread that ran it; -1 for a thread outside its pool.
  int worker = -1;
};

//! The trace hook's sink: hands one finished item to the profiler. Thread-safe; never throws (an
//! item that cannot be stored for lack of memory is lost); takes an uncontended per-thread lock.
STREAMRT_API void trace_item(const TraceItem& item) noexcept;

//! Fork handlers of a layer above the runtime (the Python module's interpreter gate), run inside
//! the runtime's own: `prepare` after the runtime has taken its locks, `parent` and `child` before
//! it releases them, and in the child before it drops the parent's work. A layer whose lock the
//! runtime's clean-up may take (a reference drop under a stream lock) is thus locked across fork()
//! in an order that cannot deadlock, and usable again in the child before that clean-up runs.
//! Handlers must not throw or block on anything but their own lock. At most 8; call at load.
//! Throws Error past the limit. Not to be called concurrently with fork().
STREAMRT_API void add_fork_handlers(void (*prepare)(), void (*parent)(), void (*child)());

//! For backends' own fork handlers: run the layers' handlers added by add_fork_handlers (prepare
//! in reverse order of addition, parent and child in order). Never throw.
STREAMRT_API void run_fork_prepare() noexcept;
STREAMRT_API void run_fork_parent() noexcept;
STREAMRT_API void run_fork_child() noexcept;

//! Makes `s` this thread's current stream for its device and returns the previous one
//! (c10's exchangeStream). For backends that run work on their own threads. Never blocks.
STREAMRT_API Stream exchange_current_stream(const Stream& s);

}  // namespace streamrt::impl
