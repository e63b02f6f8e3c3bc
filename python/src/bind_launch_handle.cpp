// streamrt.LaunchHandle: what Stream.launch returns, with concurrent.futures.Future's calls
// (result, exception, done) over the event recorded right after the launched callable.
#include <pybind11/pybind11.h>

#include <chrono>
#include <string>

#include "bindings.hpp"
#include "launch_handle.hpp"
#include "streamrt/error.hpp"
#include "waits.hpp"

namespace streamrt::python {

using namespace pybind11::literals;

namespace {

// LaunchHandle.result: waits for the callable (raising its failure), then returns its value.
py::object launch_result(const LaunchHandle& h, py::object timeout) {
  if (timeout.is_none()) {
    synchronize_event(h.done);  // raises fn's exception, or the failure that skipped it
  } else if (!timed_wait(
                  timeout, "LaunchHandle.result", [] {},
                  [&](std::chrono::nanoseconds t) { return h.done.wait_for(t); })
                  .cast<bool>()) {
    PyErr_SetString(PyExc_TimeoutError,
                    "LaunchHandle.result: the launched callable has not run yet");
    throw py::error_already_set();
  } else {
    synchronize_event(h.done);  // complete: raises its failure, if any
  }
  if (!h.result->ran) throw Error("LaunchHandle.result: the launched callable did not run");
  return h.result->value.object();
}

}  // namespace

void bind_launch_handle(py::module_& m) {
  py::class_<LaunchHandle>(m, "LaunchHandle",
                           "What Stream.launch(fn, ...) returns: fn's result once it ran "
                           "(concurrent.futures.Future's calls).")
      .def("result", &launch_result, "timeout"_a = py::none(),
           "Blocks (GIL released) until the callable has run and returns what it returned; "
           "raises its exception (or the failure of earlier work that made the stream skip it). "
           "With timeout (seconds): TimeoutError if it has not run by then.")
      .def(
          "exception",
          [](py::object self, py::object timeout) -> py::object {
            try {
              self.attr("result")(timeout);
            } catch (py::error_already_set& e) {
              if (e.matches(PyExc_TimeoutError)) throw;
              return e.value();
            }
            return py::none();
          },
          "timeout"_a = py::none(),
          "As result(), but returns the exception (None when the callable returned).")
      .def(
          "done", [](const LaunchHandle& h) { return h.done.query(); },
          "True when the callable has run (or was skipped). Never blocks.")
      .def_property_readonly(
          "event", [](const LaunchHandle& h) { return h.done; },
          "The streamrt.Event recorded right after the callable: other streams can wait on it.")
      .def("__repr__", [](const LaunchHandle& h) {
        return std::string("streamrt.LaunchHandle(") + (h.done.query() ? "done" : "pending") + ")";
      });
}

}  // namespace streamrt::python
