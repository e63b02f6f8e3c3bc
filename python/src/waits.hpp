#pragma once
//! \file waits.hpp
//! Waiting for C++ work from Python: with the GIL released (the work may be a Python callable
//! that needs it, and other Python threads should run meanwhile) and, on the main thread, in
//! slices between which Ctrl-C raises KeyboardInterrupt. All require the GIL.

#include <pybind11/pybind11.h>

#include <chrono>
#include <functional>

#include "args.hpp"
#include "streamrt/event.hpp"
#include "streamrt/tensor.hpp"

namespace streamrt::python {

namespace py = pybind11;

//! Records which thread is Python's main thread (the only one that gets signals). At module
//! import, before any wait.
void remember_main_thread();

//! True on Python's main thread.
bool on_main_thread();

//! Waits with the GIL released, in slices, until `try_wait(slice)` returns true. Between slices,
//! with the GIL held, runs Python's signal handlers: Ctrl-C in the main thread raises
//! KeyboardInterrupt (thrown as py::error_already_set) and leaves the awaited work queued and
//! running. Off the main thread (which never gets signals) it does not slice.
void wait_interruptibly(const std::function<bool(std::chrono::nanoseconds)>& try_wait);

//! As wait_interruptibly, for at most `timeout` (any length, nanoseconds::max() included): true
//! when `try_wait` succeeded, false when the time ran out. `try_wait` must change nothing when it
//! times out, so that slices add up to one wait.
bool wait_interruptibly_for(const std::function<bool(std::chrono::nanoseconds)>& try_wait,
                            std::chrono::nanoseconds timeout);

//! A host wait with an optional time-out (seconds): None waits until done with `wait` (which
//! releases the GIL itself) and returns None; a number waits at most that long with
//! `wait_for(slice)` and returns whether it was done. The Python result is made with the GIL.
template <class Wait, class WaitFor>
py::object timed_wait(py::handle timeout, const char* what, Wait wait, WaitFor wait_for) {
  if (timeout.is_none()) {
    wait();
    return py::none();
  }
  return py::bool_(wait_interruptibly_for(wait_for, to_timeout(timeout, what)));
}

//! Waits interruptibly, as wait_interruptibly, for the record that `record` holds, without
//! reporting its failure (streamrt::wait_interruptibly); raises KeyboardInterrupt when a signal
//! handler raises it between slices.
void wait_record(const Event& record);

//! Event.synchronize() without a time-out: waits interruptibly for the event's record current at
//! the call, then reports its failure (raises as Event::synchronize does). A position recorded
//! during a capture is waited for uninterruptibly (Event::synchronize resolves it).
void synchronize_event(const Event& e);

//! Waits interruptibly for the queued work that writes `t` (and reads it, when `writable`); a
//! failure is left for the access that follows.
void wait_tensor(const Tensor& t, bool writable);

//! Waits as wait_tensor for everything queued so far on the current stream, without reporting a
//! failure: a blocking call that queues its own work there (allclose, equal) then waits only for
//! that.
void wait_current_stream();

}  // namespace streamrt::python
