// streamrt.Profiler, its TraceRecord and streamrt.profile(): every work item run on any stream
// between start() and stop(), exported as Chrome trace JSON or an SVG timeline.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <string>

#include "bindings.hpp"
#include "streamrt/profiler.hpp"
#include "timeline_svg.hpp"

namespace streamrt::python {

using namespace pybind11::literals;

namespace {

// os.fspath(path) as text: str and pathlib paths.
std::string fspath(py::object path) {
  return py::str(py::module_::import("os").attr("fspath")(path)).cast<std::string>();
}

}  // namespace

void bind_profiler(py::module_& m) {
  py::class_<TraceRecord>(m, "TraceRecord", "One work item recorded by a profiler.")
      .def_readonly("device", &TraceRecord::device)
      .def_readonly("stream_id", &TraceRecord::stream_id)
      .def_readonly("stream_priority", &TraceRecord::stream_priority)
      .def_readonly("label", &TraceRecord::label)
      .def_readonly("enqueue_ns", &TraceRecord::enqueue_ns)
      .def_readonly("start_ns", &TraceRecord::start_ns)
      .def_readonly("end_ns", &TraceRecord::end_ns)
      .def_readonly("worker", &TraceRecord::worker)
      .def("__repr__", [](const TraceRecord& r) {
        return "streamrt.TraceRecord(label='" + r.label +
               "', stream_id=" + std::to_string(r.stream_id) +
               ", start_ns=" + std::to_string(r.start_ns) + ", end_ns=" + std::to_string(r.end_ns) +
               ", worker=" + std::to_string(r.worker) + ")";
      });

  py::class_<Profiler>(m, "Profiler",
                       "Records every work item run on any stream between start() and stop(); "
                       "`with streamrt.profile() as p:` does both.")
      .def(py::init<>())
      .def("start", &Profiler::start)
      .def("stop", &Profiler::stop)
      .def_property_readonly("running", &Profiler::running)
      .def("name_stream", &Profiler::name_stream, "stream"_a, "name"_a,
           "Shows `stream` as `name` in the exports (instead of 'stream <id>').")
      .def("records", &Profiler::records, "The items recorded so far, by start time.")
      .def("clear", &Profiler::clear)
      .def("chrome_trace_json", &Profiler::chrome_trace_json)
      .def(
          "export_chrome_trace",
          [](const Profiler& p, py::object path) { p.export_chrome_trace(fspath(path)); }, "path"_a,
          "Writes Chrome trace-event JSON (Perfetto, chrome://tracing).")
      .def("timeline_svg", &streamrt_timeline::timeline_svg, "title"_a = "streamrt timeline")
      .def(
          "export_timeline_svg",
          [](const Profiler& p, py::object path, const std::string& title) {
            streamrt_timeline::export_timeline_svg(p, fspath(path), title);
          },
          "path"_a, "title"_a = "streamrt timeline", "Writes an SVG Gantt chart.")
      .def("__enter__",
           [](py::object self) {
             self.cast<Profiler&>().start();
             return self;
           })
      .def("__exit__", [](Profiler& p, py::args) {
        p.stop();
        return false;
      });
  m.def(
      "profile", [] { return std::make_unique<Profiler>(); },
      "A new profiler: `with streamrt.profile() as p: ...` then p.export_chrome_trace(path).");
}

}  // namespace streamrt::python
