// The _streamrt extension module: exceptions, then the bindings of each area.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>

#include "bind_ops.hpp"
#include "bindings.hpp"
#include "py_runtime.hpp"
#include "streamrt/error.hpp"
#include "streamrt/version.hpp"

namespace py = pybind11;
namespace sp = streamrt::python;
using namespace pybind11::literals;

PYBIND11_MODULE(_streamrt, m) {
  m.doc() = "streamrt: CUDA-style streams and events for CPU work (native part)";

  // streamrt::Error -> streamrt.Error (a RuntimeError, as torch raises RuntimeError); Cancelled is
  // registered after it so that its translator is tried first.
  // Leaked, not static objects: their destructors would touch Python after finalization.
  static auto* error = new py::exception<streamrt::Error>(m, "Error", PyExc_RuntimeError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const streamrt::Error& e) {
      (*error)(sp::python_spelling(e.what()).c_str());
    }
  });
  static auto* cancelled = new py::exception<streamrt::Cancelled>(m, "Cancelled", error->ptr());
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const streamrt::Cancelled& e) {
      (*cancelled)(sp::python_spelling(e.what()).c_str());
    }
  });
  // Shown as streamrt.Error / streamrt.Cancelled (the package's names), not streamrt._streamrt.
  error->attr("__module__") = "streamrt";
  cancelled->attr("__module__") = "streamrt";
  // A Python exception carried through the runtime is raised again as the original object.
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const sp::PythonException& e) {
      e.restore();
    }
  });

  sp::bind_core(m);
  sp::bind_tensor(m);
  sp::bind_ops(m);

  // streamrt.__version__ and `python3 -m streamrt` (the same text as `streamrt --version`).
  m.attr("__version__") = streamrt::version_info().version;
  m.def("_version_text", &streamrt::version_text,
        "The library's version, build type, compiler, backends and worker count, as text.");
  sp::bind_memory(m);
  sp::bind_graph(m);
  sp::bind_torch(m);

  m.def(
      "_shutdown_at_exit",
      [](std::optional<double> timeout) {
        std::optional<std::chrono::nanoseconds> t;
        if (timeout) {
          // Past what nanoseconds count (about 292 years): no bound, not an overflow.
          constexpr double kMaxSeconds = 9.2e9;
          if (*timeout < kMaxSeconds) {
            t = std::chrono::duration_cast<std::chrono::nanoseconds>(
                std::chrono::duration<double>(std::max(*timeout, 0.0)));
          }
        }
        return std::string(sp::shutdown_at_exit(t));
      },
      "timeout"_a = py::none(),
      "Interpreter exit (the package's atexit handler): refuses new Python work, waits until "
      "pending Python work has run and every stream is idle, then stops streamrt's threads from "
      "entering Python. Returns 'done', or 'interrupted' (Ctrl-C) / 'timed out' (timeout, in "
      "seconds) when it gave up waiting; the caller then ends the process.");
  sp::install_fork_handlers();
}
