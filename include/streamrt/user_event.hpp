#pragma once
//! \file user_event.hpp
//! User events: events completed by the host instead of by stream work (OpenCL's
//! clCreateUserEvent, CUDA's cuStreamWaitValue32 on a flag the host writes). A stream that waits
//! on one is parked, not a worker (rule 4 of docs/design.md), so work that finishes outside
//! streamrt (a network transfer, an I/O completion, another runtime's callback) can be ordered
//! with stream work without holding a thread while it is in flight.

#include <exception>
#include <memory>

#include "streamrt/device.hpp"
#include "streamrt/event.hpp"
#include "streamrt/export.hpp"

namespace streamrt {

//! A position that completes when the host calls complete(), once. event() is an ordinary Event
//! recorded at that position: streams wait_event() on it, hosts synchronize() or query() it,
//! on_complete() callbacks fire when it completes. Copies share the position. All methods are
//! thread-safe. When the last UserEvent handle goes without complete(), it completes with an
//! Error saying so, so nothing waits for ever on an event nobody can complete any more.
class STREAMRT_API UserEvent {
 public:
  //! A new, pending user event on `device`. Never blocks. Throws Error when the device's backend
  //! has no user events.
  explicit UserEvent(Device device = {}, EventOptions options = {});

  //! An Event recorded at this position (a new handle each call, same position). Never blocks.
  Event event() const;

  //! Completes the position: waiters are released, streams parked on it resume. With `failure`,
  //! the event completes failed: Event::synchronize() rethrows it, and a stream that waits on it
  //! inherits it as its failure (rule 10). Returns at once (waiters run on their own threads;
  //! callbacks are posted to workers). Throws Error when already completed.
  void complete(std::exception_ptr failure = nullptr);

  //! True once complete() was called. Never blocks.
  bool completed() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace streamrt
