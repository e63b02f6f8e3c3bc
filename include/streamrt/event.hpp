#pragma once
//! \file event.hpp
//! Events: markers recorded in streams that can be polled, waited on, timed and reset.

#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "streamrt/device.hpp"
#include "streamrt/export.hpp"

namespace streamrt {

class Stream;
namespace impl {
class EventImpl;
}  // namespace impl

//! How an event behaves.
struct EventOptions {
  //! Take a timestamp when the stream reaches the record, for elapsed_time().
  bool enable_timing = false;
  //! Host waits sleep at once instead of spinning briefly first.
  bool blocking = false;
};

//! What an event is doing now (for debugging and reprs).
enum class EventState { NotRecorded, Pending, Complete, Failed, Cancelled };

//! Lower-case name of an EventState ("not_recorded", "pending", ...). Never blocks.
STREAMRT_API std::string_view to_string(EventState state) noexcept;

//! A handle to an event. Copies share the event. All methods are thread-safe; recording from one
//! thread while another waits is allowed (the waiter tracks the record it saw when it started).
//!
//! A moved-from handle names no event: every method but valid(), operator== and assignment throws
//! Error saying "this Event was moved from" (as do calls that take it as an argument, wait_all
//! included) until an event is assigned to it.
class STREAMRT_API Event {
 public:
  //! A new, never-recorded event. Never blocks.
  explicit Event(EventOptions options = {});
  //! An event recorded at the backend position `position` (for backend authors and user events;
  //! see impl/backend.hpp). Never blocks.
  explicit Event(std::shared_ptr<impl::EventImpl> position);

  //! Records the event on current_stream() of its device (CPU if never recorded). Returns at once.
  void record();
  //! Records the event at the current end of `s`, replacing any earlier record. Returns at once.
  //! Throws Error if the event was recorded on another device before (reset() first).
  void record(const Stream& s);

  //! True when recorded and all work before the record has finished (or failed). False when never
  //! recorded. Never blocks.
  bool query() const;
  //! Same as query() (the seed's `completed`).
  bool completed() const { return query(); }

  //! Blocks until complete, then rethrows the failure of the work before it, if any. Throws
  //! Error when never recorded, or when waiting would deadlock (work waiting on its own stream).
  void synchronize() const;

  //! As synchronize(), but returns false after `timeout` (nothing changes then), true when
  //! complete.
  bool wait_for(std::chrono::nanoseconds timeout) const;

  //! Work submitted to `s` later waits for this event (= s.wait_event(*this)). Returns at once.
  void wait(const Stream& s) const;
  //! The current stream of the event's device waits for this event. Returns at once.
  void wait() const;

  //! Milliseconds from this event to `end`, from a monotonic clock (ns resolution), timestamps
  //! taken when each stream reached its record. Both need enable_timing, a record, and completion,
  //! else Error. Never blocks.
  double elapsed_time(const Event& end) const;

  //! Back to never-recorded; pending work is not affected. Never blocks.
  void reset();

  //! The device of the record; nullopt when never recorded. Never blocks.
  std::optional<Device> device() const;

  //! The options given at creation. Never blocks. Throws Error on a moved-from handle.
  EventOptions options() const;

  //! Pending, complete, failed, ... Never blocks.
  EventState state() const;

  //! Runs `cb(failure or null)` exactly once after the record current now completes, on a runtime
  //! thread; or at once on this thread if it already has. A throwing callback is reported on
  //! stderr. Throws Error when never recorded. Returns at once.
  void on_complete(std::function<void(std::exception_ptr)> cb) const;

  //! The current record (for backend authors); null when never recorded. Never blocks. Throws
  //! Error on a moved-from handle.
  std::shared_ptr<impl::EventImpl> impl() const;

  //! False for a moved-from handle (it names no event), true otherwise. Never blocks.
  bool valid() const noexcept { return state_ != nullptr; }

  //! Same event (copies of one handle).
  friend bool operator==(const Event& a, const Event& b) noexcept { return a.state_ == b.state_; }

 private:
  struct State;
  // The state, or Error naming Event::`member` when this handle was moved from (a null state_
  // would crash the caller).
  State& checked(const char* member) const;

  std::shared_ptr<State> state_;
};

//! Blocks until every event completes, then rethrows the first failure (in the order given).
//! Throws Error, before waiting, when any event was never recorded. Thread-safe.
STREAMRT_API void wait_all(std::span<const Event> events);

//! As wait_all, but returns false after `timeout` (nothing changes then).
STREAMRT_API bool wait_all_for(std::span<const Event> events, std::chrono::nanoseconds timeout);

//! How wait_interruptibly() ended.
enum class WaitEnd {
  //! Nothing is left to wait for: the record completed (or failed), or it was made during a
  //! stream capture whose graph has nothing queued (the capture still runs, or no replay yet).
  Done,
  //! The time-out ran out first.
  TimedOut,
  //! `interrupted()` returned true first.
  Interrupted,
};

//! A host wait that its caller can interrupt (a language binding that lets Ctrl-C end a long
//! wait): waits for the record `event` holds at the call, in slices of at most `slice`, and after
//! each slice that did not end the wait calls `interrupted()` (when non-null), which ends it by
//! returning true. A record made during a capture stands for its graph's latest replay. Reports
//! no failure: synchronize() on the same record does, after Done (and refuses a capture's record
//! while the capture runs). TimedOut and Interrupted change nothing, so waits in a row add up to
//! one. Blocks; thread-safe; throws Error when `event` was never recorded or was moved from, and
//! what `interrupted()` throws.
STREAMRT_API WaitEnd wait_interruptibly(const Event& event,
                                        std::optional<std::chrono::nanoseconds> timeout,
                                        std::chrono::nanoseconds slice,
                                        const std::function<bool()>& interrupted);

}  // namespace streamrt
