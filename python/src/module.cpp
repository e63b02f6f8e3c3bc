// The _streamrt extension module: exceptions, then the bindings of each area.
#include <pybind11/pybind11.h>

#include "bind_ops.hpp"
#include "bindings.hpp"
#include "py_runtime.hpp"
#include "streamrt/error.hpp"
#include "streamrt/version.hpp"

namespace py = pybind11;
namespace sp = streamrt::python;

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

  m.def("_shutdown_at_exit", &sp::shutdown_at_exit,
        "Interpreter exit (registered with atexit by the package): runs pending Python work, "
        "synchronizes all streams, then stops streamrt's threads from entering Python.");
}
