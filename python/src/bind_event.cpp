// streamrt.Event and wait_all: markers recorded in streams, polled, waited for (GIL released,
// interruptibly), timed, and completion callbacks run on worker threads with the GIL.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "args.hpp"
#include "bindings.hpp"
#include "error_text.hpp"
#include "py_exception.hpp"
#include "py_runtime.hpp"
#include "streamrt/error.hpp"
#include "streamrt/event.hpp"
#include "streamrt/stream.hpp"
#include "waits.hpp"

namespace streamrt::python {

using namespace pybind11::literals;

namespace {

// wait_all(events) without a time-out: as streamrt::wait_all (every event first, then the first
// failure in argument order), interruptibly, for the records current at the call.
void wait_all_events(const std::vector<Event>& events) {
  std::vector<Event> records;  // the records current now, whatever the events record later
  bool unrecorded = false;
  for (const auto& e : events) {
    auto position = e.impl();
    unrecorded = unrecorded || !position;
    if (position) records.emplace_back(std::move(position));
  }
  if (unrecorded || !on_main_thread()) {
    py::gil_scoped_release release;
    wait_all(events);  // raises for a never-recorded event
    return;
  }
  for (const auto& r : records) wait_record(r);
  py::gil_scoped_release release;
  wait_all(records);  // all complete: reports the first failure in argument order
}

// A completion callback: fn(event) or fn(event, error), run once after the event's record
// completes. An exception it raises goes to sys.unraisablehook (never lost, never fatal).
struct DoneCallback {
  SafeObject fn;
  SafeObject event;
  bool with_error;
  PendingPythonWork pending;

  void run(const std::exception_ptr& failure) {
    PythonScope scope;
    if (!scope.ok()) {
      std::fputs(
          "streamrt: a completion callback was not run: the Python interpreter is "
          "shutting down\n",
          stderr);
      return;
    }
    try {
      py::object f = fn.object();
      if (with_error) {
        f(event.object(), exception_object(failure));
      } else {
        f(event.object());
      }
    } catch (py::error_already_set& e) {
      e.discard_as_unraisable(fn.object());
    } catch (const std::exception& e) {
      PyErr_SetString(PyExc_RuntimeError, python_message(e).c_str());
      PyErr_WriteUnraisable(fn.get().ptr());
    }
    fn.reset();
    event.reset();
  }
};

// Whether `fn` accepts (event, error): it does when its signature binds two positional arguments.
bool takes_error_argument(py::handle fn) {
  py::object signature;
  try {
    signature = py::module_::import("inspect").attr("signature")(fn);
  } catch (const py::error_already_set&) {
    return false;  // no signature (some builtins): call it with the event only
  }
  try {
    signature.attr("bind")(py::none(), py::none());
    return true;
  } catch (const py::error_already_set& e) {
    if (!e.matches(PyExc_TypeError)) throw;
  }
  try {
    signature.attr("bind")(py::none());
    return false;
  } catch (const py::error_already_set& e) {
    if (!e.matches(PyExc_TypeError)) throw;
  }
  throw py::type_error("Event.add_done_callback: fn must accept (event) or (event, error); " +
                       std::string(py::str(fn)) + " has signature " +
                       std::string(py::str(signature)));
}

std::string event_repr(const Event& e) {
  std::string out = "streamrt.Event(state='" + std::string(to_string(e.state())) + "'";
  if (auto d = e.device()) out += ", device='" + d->str() + "'";
  if (e.options().enable_timing) out += ", enable_timing=True";
  if (e.options().blocking) out += ", blocking=True";
  return out + ")";
}

Event make_event(bool enable_timing, bool blocking, bool interprocess, py::object device) {
  if (interprocess) {
    throw Error(
        "Event(interprocess=True): an interprocess event shares a CUDA event with "
        "another process through an IPC handle; streamrt's CPU events live inside one "
        "process, so there is nothing to share. Signal other processes with "
        "multiprocessing (e.g. multiprocessing.Event) once this event completes");
  }
  if (!device.is_none()) {
    const Device d = to_device(device, "Event(device=...)");
    // Raises streamrt.Error naming what exists for a device without a backend (cuda)
    // or an index that does not exist; the event then records on any stream of it.
    (void)default_stream(d);
  }
  return Event(EventOptions{enable_timing, blocking});
}

void add_done_callback(py::object self, py::object fn) {
  if (!PyCallable_Check(fn.ptr())) {
    throw py::type_error("Event.add_done_callback: fn must be callable, got " + type_name(fn));
  }
  refuse_python_work_at_exit("Event.add_done_callback");
  const bool with_error = takes_error_argument(fn);
  const Event& e = self.cast<const Event&>();
  auto cb = std::make_shared<DoneCallback>(
      DoneCallback{SafeObject(std::move(fn)), SafeObject(std::move(self)), with_error, {}});
  e.on_complete([cb](std::exception_ptr failure) { cb->run(failure); });
}

// Recording, stream-side waits and host waits.
void bind_event_waits(py::class_<Event>& cls) {
  cls.def(
         "record",
         [](Event& e, py::object stream) {
           if (stream.is_none()) {
             e.record();
             return;
           }
           if (!py::isinstance<Stream>(stream)) {
             throw py::type_error(
                 "Event.record: expected a streamrt.Stream or None, got " + type_name(stream) +
                 ". record() marks the current end of the stream: call it right after the ops "
                 "to wait for or time, with no argument (current stream) or with a stream");
           }
           e.record(stream.cast<const Stream&>());
         },
         "stream"_a = py::none(),
         "Records the event at the current end of `stream` (default: the current stream), "
         "replacing an earlier record. Returns at once.")
      .def(
          "wait",
          [](const Event& e, py::object stream) {
            if (stream.is_none()) {
              e.wait();
            } else {
              e.wait(to_stream(stream, "Event.wait"));
            }
          },
          "stream"_a = py::none(),
          "Stream-side wait (as torch): work submitted later to `stream` (default: the current "
          "stream) waits for this event. Returns at once; to block the host use synchronize().")
      .def("query", &Event::query,
           "True when recorded and the work before the record has finished. Never blocks.")
      .def_property_readonly("completed", &Event::completed, "Same as query().")
      .def(
          "synchronize",
          [](const Event& e, py::object timeout) {
            return timed_wait(
                timeout, "Event.synchronize", [&] { synchronize_event(e); },
                [&](std::chrono::nanoseconds t) { return e.wait_for(t); });
          },
          "timeout"_a = py::none(),
          "Blocks (GIL released) until complete; re-raises the failure of the work before it. "
          "With timeout (seconds): returns False if not complete by then, True when complete.")
      .def(
          "wait_for",
          [](const Event& e, py::object timeout_s) {
            const auto timeout = to_timeout(timeout_s, "Event.wait_for", "timeout_s");
            py::gil_scoped_release release;
            return e.wait_for(timeout);
          },
          "timeout_s"_a,
          "As synchronize(), but returns False after timeout_s seconds, True when complete.");
}

// Timing, state and completion callbacks.
void bind_event_state(py::class_<Event>& cls) {
  cls.def(
         "elapsed_time",
         [](const Event& start, py::object end) {
           if (py::isinstance<Stream>(end)) {
             throw py::type_error(
                 "Event.elapsed_time(end) takes the end Event, not a Stream: record a second "
                 "timing event after the work and call start.elapsed_time(end)");
           }
           if (!py::isinstance<Event>(end)) {
             throw py::type_error("Event.elapsed_time: expected a streamrt.Event, got " +
                                  type_name(end));
           }
           return start.elapsed_time(end.cast<const Event&>());
         },
         "end"_a,
         "Milliseconds from this event to `end`; both need enable_timing=True, a record and "
         "completion, else streamrt.Error. Never blocks.")
      .def("reset", &Event::reset, "Back to never-recorded. Never blocks.")
      .def_property_readonly("device", &Event::device, "The device recorded on; None before.")
      .def_property_readonly("enable_timing",
                             [](const Event& e) { return e.options().enable_timing; })
      .def_property_readonly("blocking", [](const Event& e) { return e.options().blocking; })
      .def_property_readonly(
          "state", [](const Event& e) { return std::string(to_string(e.state())); },
          "'not_recorded', 'pending', 'complete', 'failed' or 'cancelled'.")
      .def("add_done_callback", &add_done_callback, "fn"_a,
           "Calls fn(event) or fn(event, error) once the current record completes (error: the "
           "exception of the work before it, or None), on a worker thread holding the GIL, or at "
           "once if already complete. Exceptions fn raises go to sys.unraisablehook.")
      .def("__repr__", &event_repr);  // identity eq/hash: each Python Event is one event
}

}  // namespace

void bind_event(py::module_& m) {
  py::class_<Event> cls(m, "Event",
                        "A marker recorded in a stream: poll it, wait for it, time it, reset it.");
  cls.def(py::init(&make_event), "enable_timing"_a = false, "blocking"_a = false,
          "interprocess"_a = false, "device"_a = py::none(),
          "An event (torch.Event / torch.cuda.Event arguments). `device` is checked (a CPU "
          "device; the record decides where the event is); interprocess=True raises "
          "streamrt.Error: CPU events are not shared between processes.");
  bind_event_waits(cls);
  bind_event_state(cls);
  m.def(
      "wait_all",
      [](py::iterable events, py::object timeout) {
        std::vector<Event> list;
        std::size_t i = 0;
        for (py::handle item : events) {
          if (!py::isinstance<Event>(item)) {
            throw py::type_error("wait_all: item " + std::to_string(i) + " is " + type_name(item) +
                                 ", not a streamrt.Event");
          }
          list.push_back(item.cast<Event>());
          ++i;
        }
        return timed_wait(
            timeout, "wait_all", [&] { wait_all_events(list); },
            [&](std::chrono::nanoseconds t) { return wait_all_for(list, t); });
      },
      "events"_a, "timeout"_a = py::none(),
      "Blocks (GIL released) until every event has completed; re-raises the first failure in "
      "the order given. streamrt.Error, before waiting, if one was never recorded. With timeout "
      "(seconds): returns False if not all completed by then (without raising), True when they "
      "have.");
}

}  // namespace streamrt::python
