#pragma once
//! \file backend.hpp
//! The backend interface, for backend authors (no stability promise). Modelled on c10's
//! DeviceGuardImplInterface: the device-agnostic Stream and Event handles call one Backend per
//! DeviceType. A backend owns its stream objects (StreamImpl) and its recorded positions
//! (EventImpl). See docs/design.md, "Backends".

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <utility>

#include "streamrt/detail/work.hpp"
#include "streamrt/device.hpp"
#include "streamrt/event.hpp"
#include "streamrt/export.hpp"

namespace streamrt::impl {

class Backend;
class HostRun;
class IntraOpParallel;

//! A backend's stream. Immutable identity; the backend derives its own queue state from it.
class STREAMRT_API StreamImpl {
 public:
  //! Identity of the stream; `backend` outlives it.
  StreamImpl(Backend& backend, Device device, int priority, std::uint64_t id) noexcept
      : backend_(backend), device_(device), priority_(priority), id_(id) {}
  //! Backends release their resources here. noexcept.
  virtual ~StreamImpl() = default;
  StreamImpl(const StreamImpl&) = delete;
  StreamImpl& operator=(const StreamImpl&) = delete;

  //! The backend that owns the stream.
  Backend& backend() const noexcept { return backend_; }
  //! The device.
  Device device() const noexcept { return device_; }
  //! The priority (lower = more urgent).
  int priority() const noexcept { return priority_; }
  //! Unique per device while alive; 0 = default stream.
  std::uint64_t id() const noexcept { return id_; }

  //! A reference to this stream for the runtime's own bookkeeping (the stream that allocated a
  //! tensor's memory, which the tensor and the cache keep): it keeps the stream object alive but
  //! not what a handle's reference may keep besides (a CPU partition's reserved workers). Null
  //! when the backend has none: the caller keeps the handle's reference. Never blocks.
  virtual std::shared_ptr<StreamImpl> bookkeeping_ref() noexcept { return nullptr; }

 private:
  Backend& backend_;
  Device device_;
  int priority_;
  std::uint64_t id_;
};

//! One recorded position of an event in a stream: immutable once created, so a stream that
//! waits on it keeps the version it saw (re-recording an Event makes a new EventImpl). It names
//! the backend that made it, as StreamImpl does: a later register_backend() for the same device
//! type does not redirect calls about it to a backend that does not know its type.
class STREAMRT_API EventImpl {
 public:
  //! A record made by `backend` on `device` with `options`; `backend` outlives it.
  EventImpl(Backend& backend, Device device, EventOptions options) noexcept
      : backend_(backend), device_(device), options_(options) {}
  //! noexcept (called when the last handle goes).
  virtual ~EventImpl() = default;
  EventImpl(const EventImpl&) = delete;
  EventImpl& operator=(const EventImpl&) = delete;

  //! The backend that made the record.
  Backend& backend() const noexcept { return backend_; }
  //! The device recorded on.
  Device device() const noexcept { return device_; }
  //! The options of the event at record time.
  EventOptions options() const noexcept { return options_; }
  //! True for a position recorded during a stream capture (a place in a graph, not in a
  //! backend's stream; see src/core/capture_state.hpp): backends never receive one.
  bool captured() const noexcept { return captured_; }

 protected:
  //! For positions in a capture: `backend` is the capturing stream's, which never receives one.
  EventImpl(Backend& backend, Device device, EventOptions options, bool captured) noexcept
      : backend_(backend), device_(device), options_(options), captured_(captured) {}

 private:
  Backend& backend_;
  Device device_;
  EventOptions options_;
  bool captured_ = false;
};

//! Per-device-type implementation: the device contract (streams, events, memory positions, waits)
//! and the capabilities a backend may offer. Every method must be thread-safe. Methods that are
//! not supported throw Error("<backend> backend doesn't support <what>") by default. Nothing here
//! is specific to one kind of device: the CPU backend's own settings are its own (cpu.hpp), and
//! what the runtime offers backends besides (the profiler's sink, fork handlers, the current
//! stream) is in impl/hooks.hpp.
class STREAMRT_API Backend {
 public:
  virtual ~Backend() = default;

  //! The device type served.
  virtual DeviceType type() const noexcept = 0;
  //! Number of devices; 0 when the driver fails. noexcept.
  virtual int device_count() const noexcept = 0;
  //! {least, greatest} priority accepted; lower = more urgent.
  virtual std::pair<int, int> priority_range() const noexcept { return {0, 0}; }

  //! A new stream on device `index`. Never blocks.
  virtual std::shared_ptr<StreamImpl> new_stream(int index, int priority) = 0;
  //! The default stream of device `index` (id 0). Never blocks.
  virtual std::shared_ptr<StreamImpl> default_stream(int index) = 0;

  //! Enqueues host work in stream order. Returns at once.
  virtual void enqueue(StreamImpl& stream, detail::Work work, const char* label) = 0;
  //! Records a new position at the current end of `stream`. Returns at once.
  virtual std::shared_ptr<EventImpl> record(StreamImpl& stream, EventOptions options) = 0;
  //! Work submitted to `stream` later waits for `position`. Returns at once.
  virtual void block(const std::shared_ptr<EventImpl>& position, StreamImpl& stream) = 0;

  //! True when all work submitted to `stream` so far finished. Never blocks.
  virtual bool query_stream(const StreamImpl& stream) = 0;
  //! Waits for the work submitted before the call (up to `timeout`; nullopt = forever), then
  //! rethrows the first unreported failure. Returns false on time-out.
  virtual bool synchronize_stream(StreamImpl& stream,
                                  std::optional<std::chrono::nanoseconds> timeout) = 0;

  //! True when the work before `position` finished. Never blocks, takes no lock that may wait (the
  //! Event handle calls it under its own spin lock).
  virtual bool query_event(const EventImpl& position) = 0;
  //! Pending / complete / failed / cancelled. Never blocks.
  virtual EventState event_state(const EventImpl& position) = 0;
  //! Waits for `position` (up to `timeout`), then rethrows its failure, which reports it (rule
  //! 10: the stream that carries it runs work submitted after this call). False on time-out.
  virtual bool synchronize_event(const EventImpl& position,
                                 std::optional<std::chrono::nanoseconds> timeout) = 0;
  //! Waits for `position` (up to `timeout`) without reporting a failure. False on time-out.
  //! Blocks; thread-safe. The default waits through synchronize_event.
  virtual bool wait_event(const EventImpl& position,
                          std::optional<std::chrono::nanoseconds> timeout) {
    try {
      return synchronize_event(position, timeout);
    } catch (...) {
      return true;  // complete, with a failure that synchronize_event reports later
    }
  }
  //! Milliseconds between two completed timing positions of this backend.
  virtual double elapsed_time(const EventImpl& start, const EventImpl& end) = 0;
  //! Runs `cb` once after `position` completes (on a runtime thread), or now if it has.
  virtual void on_complete(const std::shared_ptr<EventImpl>& position,
                           std::function<void(std::exception_ptr)> cb) = 0;

  //! Waits for all work submitted to every stream of device `index`, then rethrows the first
  //! failure found. With a `timeout`, gives up after it and returns false, changing nothing.
  virtual bool synchronize_device(int index, std::optional<std::chrono::nanoseconds> timeout) = 0;

  //! Items queued and not finished on `stream`.
  virtual std::uint64_t pending(const StreamImpl& stream);
  //! Drops queued work that has not started; returns how many items were dropped. Returns at once.
  virtual std::uint64_t cancel(StreamImpl& stream);

  //! Capabilities (impl/host_capabilities.hpp): each is an object the backend returns, or null
  //! when it has none. The object lives as long as the backend. Never block.
  //!
  //! Intra-op parallelism, or null: host kernels then run on the calling thread. The runtime asks
  //! the backend registered for DeviceType::CPU (the host's) once, when it is registered.
  virtual IntraOpParallel* intra_op_parallel() noexcept { return nullptr; }
  //! Host-run items (a waiting host thread running its stream's items), or null: then
  //! Stream::set_host_run throws Error and Stream::host_run() is false.
  virtual HostRun* host_run() noexcept { return nullptr; }

  //! The trace hook: the runtime's profiler turns the timing of work items on and off (also on a
  //! backend registered while a profiler runs). While on, the backend reports every work item
  //! enqueued from then on, once it finishes, through trace_item(). Never blocks; thread-safe.
  //! By default a backend traces nothing.
  virtual void set_tracing(bool on) noexcept;
  //! A pending position that only complete_user_event() completes (see <streamrt/user_event.hpp>).
  //! Never blocks.
  virtual std::shared_ptr<EventImpl> new_user_event(int index, EventOptions options);
  //! Completes a position made by new_user_event(), with `failure` when non-null. Returns at once;
  //! called at most once per position.
  virtual void complete_user_event(const std::shared_ptr<EventImpl>& position,
                                   std::exception_ptr failure);
};

//! Installs the backend for its device type, replacing any earlier one (which is kept alive, as
//! streams may still refer to it). Thread-safe. Used by built-in backends and by tests (a fake
//! backend for DeviceType::CUDA).
STREAMRT_API void register_backend(std::unique_ptr<Backend> backend);

//! Registers a backend when the program or library that holds it is loaded, as c10's
//! C10_REGISTER_GUARD_IMPL does: a namespace-scope object of this type calls
//! register_backend(make()) during static initialisation. An object that nothing else in its
//! program names is dropped by a static link from an archive: link its object file directly, or
//! make the linker keep it (--undefined of a symbol it defines). Throws what make() and
//! register_backend throw (at static initialisation: the program ends).
class STREAMRT_API BackendRegisterer {
 public:
  //! Registers make()'s backend. Thread-safe, as register_backend.
  explicit BackendRegisterer(std::unique_ptr<Backend> (*make)()) { register_backend(make()); }
};

//! The backend for `type`. Throws Error naming the type when none is registered (for the
//! built-in CPU backend: only before the library's static initialisation). Thread-safe.
STREAMRT_API Backend& backend(DeviceType type);

//! The backend for `device`, checking the index. Throws Error on a bad index or missing backend.
STREAMRT_API Backend& backend_for(const Device& device);

//! Throws Error when `priority` is outside `backend.priority_range()`, naming `device` and the
//! range: the check of Stream(device, priority), for a backend that makes streams by another route
//! (a CPU partition's). Never blocks; thread-safe.
STREAMRT_API void check_priority(Backend& backend, const Device& device, int priority);

}  // namespace streamrt::impl
