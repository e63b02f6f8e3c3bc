// Automatic dependency tracking from Python: the process-wide default and the thread-local
// `with DependencyTracking(False):` scope (entered and exited on one thread).
#include <pybind11/pybind11.h>

#include <memory>
#include <vector>

#include "bindings.hpp"
#include "streamrt/error.hpp"
#include "streamrt/ops.hpp"

namespace streamrt::python {

using namespace pybind11::literals;

namespace {

thread_local std::vector<std::unique_ptr<DependencyTrackingGuard>> tls_tracking;

struct PyTrackingScope {
  bool enabled;
};

}  // namespace

void bind_tracking(py::module_& m) {
  m.def("set_dependency_tracking", &set_dependency_tracking, "enabled"_a,
        "Process-wide default of automatic dependency tracking (on at start).");
  m.def("dependency_tracking", &dependency_tracking,
        "Whether ops issued by this thread now are tracked.");
  py::class_<PyTrackingScope>(m, "DependencyTracking",
                              "with DependencyTracking(False): ops issued by this thread in the "
                              "block are not tracked (CUDA-style manual ordering).")
      .def(py::init([](bool enabled) { return PyTrackingScope{enabled}; }), "enabled"_a)
      .def("__enter__",
           [](PyTrackingScope& s) {
             tls_tracking.push_back(std::make_unique<DependencyTrackingGuard>(s.enabled));
           })
      .def("__exit__", [](PyTrackingScope&, py::args) {
        if (tls_tracking.empty()) {
          throw Error("DependencyTracking.__exit__: this thread did not enter it");
        }
        tls_tracking.pop_back();
        return false;
      });
}

}  // namespace streamrt::python
