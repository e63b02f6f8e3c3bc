// The _streamrt extension module: exceptions, then the binders of each file (bindings.hpp), in
// an order that binds each class before the signatures that name it.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>

#include "bindings.hpp"
#include "error_text.hpp"
#include "launch_origin.hpp"
#include "py_exception.hpp"
#include "py_runtime.hpp"
#include "streamrt/error.hpp"
#include "streamrt/version.hpp"
#include "waits.hpp"

namespace py = pybind11;
namespace sp = streamrt::python;
using namespace pybind11::literals;

namespace {

// The exceptions of the C++ library as Python raises them: streamrt.Error, streamrt.Cancelled,
// streamrt.OutOfMemoryError, and a Python exception carried through the runtime as itself.
void register_exceptions(py::module_& m) {
  // streamrt::Error -> streamrt.Error (a RuntimeError, as torch raises RuntimeError); Cancelled is
  // registered after it so that its translator is tried first.
  // Leaked, not static objects: their destructors would touch Python after finalization.
  static auto* error = new py::exception<streamrt::Error>(m, "Error", PyExc_RuntimeError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const streamrt::Error& e) {
      (*error)(sp::python_text(e.text()).c_str());
    }
  });
  static auto* cancelled = new py::exception<streamrt::Cancelled>(m, "Cancelled", error->ptr());
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const streamrt::Cancelled& e) {
      (*cancelled)(sp::python_text(e.text()).c_str());
    }
  });
  // OutOfMemory -> streamrt.OutOfMemoryError: a streamrt.Error, and a MemoryError, which is what
  // Python code catches when memory runs out (torch's OutOfMemoryError is a RuntimeError only).
  static auto* out_of_memory = new py::exception<streamrt::OutOfMemory>(
      m, "OutOfMemoryError", py::make_tuple(*error, py::handle(PyExc_MemoryError)));
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const streamrt::OutOfMemory& e) {
      (*out_of_memory)(sp::python_text(e.text()).c_str());
    }
  });
  // Shown as streamrt.Error / streamrt.Cancelled (the package's names), not streamrt._streamrt.
  error->attr("__module__") = "streamrt";
  cancelled->attr("__module__") = "streamrt";
  out_of_memory->attr("__module__") = "streamrt";
  // A Python exception carried through the runtime is raised again as the original object.
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const sp::PythonException& e) {
      e.restore();
    }
  });
}

}  // namespace

PYBIND11_MODULE(_streamrt, m) {
  m.doc() = "streamrt: CUDA-style streams and events for CPU work (native part)";

  register_exceptions(m);
  sp::install_launch_site_hooks();
  m.def(
      "_add_origin_skip", [](const std::string& prefix) { sp::add_origin_skip(prefix); },
      "prefix"_a,
      "Failures of work launched from Python name the innermost frame outside the files under "
      "`prefix` (a directory ending in '/'): streamrt's own package, torch's.");
  m.def(
      "_launch_origin_here",
      []() -> py::object {
        const char* origin = sp::launch_origin_here();
        return origin != nullptr ? py::str(origin) : py::object(py::none());
      },
      "The user's source line of this thread's innermost frame outside the skipped packages "
      "(\"path/model.py:12\"), as failures of work launched now would name it; None when unknown.");
  m.def(
      "_set_launch_origins", [](bool on) { return sp::set_launch_origins(on); }, "on"_a,
      "Whether launches from Python read the line they come from (default True); returns the "
      "previous setting. For benchmarks that measure its cost.");

  sp::remember_main_thread();
  sp::bind_device(m);
  sp::bind_cpu(m);
  sp::bind_stream(m);
  sp::bind_stream_context(m);
  sp::bind_event(m);
  sp::bind_launch_handle(m);
  sp::bind_dtype(m);
  sp::bind_tensor(m);
  sp::bind_generator(m);
  sp::bind_factories(m);
  sp::bind_ops(m);
  sp::bind_indexing(m);
  sp::bind_tracking(m);
  sp::bind_profiler(m);

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
