#pragma once
//! \file stream.hpp
//! Streams: in-order queues of work that run concurrently with other streams.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "streamrt/detail/work.hpp"
#include "streamrt/device.hpp"
#include "streamrt/export.hpp"

namespace streamrt {

class Event;
class Graph;
namespace impl {
class StreamImpl;
}  // namespace impl

//! What a capture forbids besides calls on the captured streams and events themselves (CUDA's
//! cudaStreamCaptureMode): Global refuses the device-wide synchronize(device) on every thread while
//! the capture lasts, ThreadLocal only on the thread that began it, Relaxed nowhere. See
//! docs/graphs.md.
enum class CaptureMode { Global, ThreadLocal, Relaxed };

//! Lower-case name of a mode ("global", "thread_local", "relaxed"). Never blocks.
STREAMRT_API std::string_view to_string(CaptureMode mode) noexcept;

//! A handle to a stream: an in-order queue of work on one device. Copies name the same stream;
//! the stream lives while any handle or any queued work refers to it. All methods are thread-safe.
//!
//! A moved-from handle names no stream: every method but impl(), operator== and assignment throws
//! Error saying "this Stream was moved from" (as do calls that take it as an argument) until a
//! stream is assigned to it.
class STREAMRT_API Stream {
 public:
  //! Creates a NEW stream on `device` with `priority` (see priority_range(); lower = more urgent).
  //! Never blocks. Throws Error for a device without a backend or a priority out of range.
  explicit Stream(Device device = {}, int priority = 0);

  //! Wraps a backend stream (for backend authors; see impl/backend.hpp).
  explicit Stream(std::shared_ptr<impl::StreamImpl> impl) noexcept;

  //! The device's default stream (id 0), shared by everyone. Never blocks.
  static Stream default_stream(Device device = {});

  //! {least urgent, most urgent} priorities the backend of `device` accepts; lower = more
  //! urgent. Never blocks. Throws Error for a device without a backend.
  static std::pair<int, int> priority_range(Device device = {});

  //! The device the stream runs on. Never blocks. Throws Error on a moved-from handle.
  Device device() const;
  //! The priority given at creation. Never blocks. Throws Error on a moved-from handle.
  int priority() const;
  //! Unique per device while the stream lives; 0 is the default stream. Never blocks. Throws
  //! Error on a moved-from handle.
  std::uint64_t id() const;

  //! Enqueues `fn()` after everything submitted so far; returns at once, never waits for
  //! running work. `fn` and what it captures are destroyed after it runs (or is skipped).
  template <class F>
  void launch(F&& fn) {
    launch_work(detail::Work(std::forward<F>(fn)), nullptr);
  }

  //! As launch(fn), with a label shown by the profiler. `label` must outlive the stream's work
  //! (a string literal, typically).
  template <class F>
  void launch(const char* label, F&& fn) {
    launch_work(detail::Work(std::forward<F>(fn)), label);
  }

  //! Type-erased launch (what the templates call). Returns at once.
  void launch_work(detail::Work work, const char* label = nullptr);

  //! True when all work submitted so far has finished (or failed, or was skipped). Never blocks.
  bool query() const;

  //! Blocks until the work submitted before this call has finished, then rethrows the first
  //! failure not yet reported (the same exception object); after that report the stream runs new
  //! work again. Throws Error when called from work running on this stream.
  void synchronize() const;

  //! As synchronize(), but gives up after `timeout` and returns false (nothing changes then).
  bool synchronize_for(std::chrono::nanoseconds timeout) const;

  //! Work submitted later waits until `e` completes, as `e` is recorded now (a later re-record of
  //! `e` does not matter). Returns at once. Throws Error when `e` was never recorded.
  void wait_event(const Event& e);

  //! Work submitted later waits until all work submitted to `other` so far has finished.
  //! Returns at once.
  void wait_stream(const Stream& other);

  //! Drops the work queued on this stream that has not started, and returns how many items were
  //! dropped. The item running now finishes normally; waits, records and synchronize calls
  //! already queued stay (a wait_event still orders the work submitted after it). Events recorded
  //! after dropped work complete at once with Cancelled (an Error): Event::synchronize/wait_for
  //! and wait_all throw it, Event::state() is Cancelled. This stream's own synchronize() does not
  //! throw for it (the caller asked for it); a stream that waited on such an event inherits
  //! Cancelled as a failure. The stream stays usable. Returns at once; thread-safe; may be called
  //! from work on this stream. Captured state of the dropped work is destroyed on this thread.
  std::uint64_t cancel();

  //! Work items launched on this stream and not finished yet (queued or running; dropped and
  //! skipped ones excluded). A snapshot for debugging: other threads may change it at once.
  //! Never blocks; thread-safe.
  std::uint64_t pending() const;

  //! Whether a host thread that waits for this stream without a time-out (synchronize(),
  //! Event::synchronize(), wait_all()) may run the stream's ready items itself when no worker is
  //! running them (host-run items, docs/design.md). On by default, unless the environment sets
  //! STREAMRT_HOST_RUN=0. Turn it off for thread-affine work that must run on a worker thread.
  //! Items queued before the change follow the new setting too. Never blocks; thread-safe.
  void set_host_run(bool allowed);
  //! The host-run setting of this stream. Never blocks; thread-safe.
  bool host_run() const;

  //! Records a new event (no timing) at the current end of the stream and returns it.
  Event record_event();

  //! Records `e` at the current end of the stream and returns it.
  Event record_event(Event& e);

  //! Starts capturing this stream into a new graph: from now on launches, ops, event records and
  //! waits on this stream (and on the streams that join it by waiting on its events) are recorded
  //! as graph nodes and edges instead of running. Throws Error when the stream already captures
  //! (nested capture) or joined another capture. Never blocks. See graph.hpp and docs/graphs.md.
  void begin_capture(CaptureMode mode = CaptureMode::Global);
  //! As begin_capture(mode), capturing into `graph`, which must be empty (Error otherwise).
  void begin_capture(Graph& graph, CaptureMode mode = CaptureMode::Global);
  //! Ends the capture begun on this stream and returns its graph. Throws Error when the stream
  //! is not the one that began a capture, when a stream that joined the capture was not joined
  //! back (the message names it), or when the capture was invalidated (the message says by
  //! what); the capture is over in every case. Never blocks.
  Graph end_capture();
  //! True while this stream captures (it began a capture or joined one). Never blocks.
  bool is_capturing() const;

  //! The backend object (for backend authors); null for a moved-from handle. Never blocks.
  const std::shared_ptr<impl::StreamImpl>& impl() const noexcept { return impl_; }

  //! Same stream (same device and id).
  friend bool operator==(const Stream& a, const Stream& b) noexcept { return a.impl_ == b.impl_; }

  //! "cpu:0 stream 3 (priority 0)" style text for messages and reprs. Never blocks.
  std::string str() const;

 private:
  // The stream, or Error naming Stream::`member` when this handle was moved from (a null
  // impl_ would crash the caller).
  impl::StreamImpl& checked(const char* member) const;

  std::shared_ptr<impl::StreamImpl> impl_;
};

//! This thread's current stream for `device` (the device's default stream until set). Never
//! blocks; thread-local, so thread-safe. Inside work running on a stream, that stream.
STREAMRT_API Stream current_stream(Device device = {});

//! Makes `s` this thread's current stream for s.device(). Never blocks; thread-local.
STREAMRT_API void set_current_stream(const Stream& s);

//! The device's default stream; same as Stream::default_stream(device).
STREAMRT_API Stream default_stream(Device device = {});

}  // namespace streamrt

//! Hash of a stream handle, so it can key unordered containers.
template <>
struct std::hash<streamrt::Stream> {
  //! Hashes the identity of the stream. Never blocks; thread-safe.
  std::size_t operator()(const streamrt::Stream& s) const noexcept {
    return std::hash<const void*>()(s.impl().get());
  }
};
