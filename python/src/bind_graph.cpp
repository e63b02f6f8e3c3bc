// streamrt.Graph (torch.cuda.CUDAGraph's shape), Stream.is_capturing and
// is_current_stream_capturing. The `graph` context manager is pure Python (streamrt/graphs.py).
#include <pybind11/pybind11.h>

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "args.hpp"
#include "bindings.hpp"
#include "streamrt/error.hpp"
#include "streamrt/graph.hpp"
#include "streamrt/stream.hpp"

namespace streamrt::python {
namespace {

using namespace pybind11::literals;

CaptureMode to_mode(const std::string& text) {
  if (text == "global") return CaptureMode::Global;
  if (text == "thread_local") return CaptureMode::ThreadLocal;
  if (text == "relaxed") return CaptureMode::Relaxed;
  throw py::value_error("capture_error_mode='" + text +
                        "': expected 'global', 'thread_local' or 'relaxed'");
}

struct PyGraph;

// Graphs capturing now, so that exit can end captures left open (a synchronize at exit would
// otherwise be refused for ever). Guarded by the GIL.
std::set<PyGraph*>& open_captures() {
  static auto* s = new std::set<PyGraph*>;  // leaked: read by the exit handler
  return *s;
}

// A graph plus its exec, captured once and replayed many times (as torch.cuda.CUDAGraph).
struct PyGraph {
  Graph graph;
  std::optional<GraphExec> exec;
  std::optional<Stream> capturing;  // the stream of a capture in progress

  PyGraph() = default;
  PyGraph(const PyGraph&) = delete;
  PyGraph& operator=(const PyGraph&) = delete;
  // A graph dropped while it captures ends the capture, discarding it: nothing else could.
  ~PyGraph() { abandon_capture(); }

  // Ends a capture in progress without instantiating it; false when there was none.
  bool abandon_capture() noexcept {
    if (!capturing) return false;
    open_captures().erase(this);
    Stream s = *capturing;
    capturing.reset();
    try {
      s.end_capture();
    } catch (const std::exception&) {
      // An invalidated or unjoined capture ends all the same; there is nothing to keep.
    }
    graph.clear();
    return true;
  }

  void capture_begin(const py::object& stream, const std::string& mode) {
    const CaptureMode m = to_mode(mode);
    if (capturing) throw Error("Graph.capture_begin: this graph is already capturing");
    if (exec || !graph.empty()) {
      throw Error("Graph.capture_begin: this graph was captured already; call reset() first");
    }
    Stream s = stream_or_current(stream, "Graph.capture_begin(stream=...)");
    open_captures().insert(this);  // first: out of memory here leaves nothing begun
    try {
      s.begin_capture(graph, m);
    } catch (...) {
      open_captures().erase(this);
      throw;
    }
    capturing = s;
  }

  void capture_end() {
    if (!capturing) throw Error("Graph.capture_end: this graph is not capturing");
    Stream s = *capturing;
    capturing.reset();
    open_captures().erase(this);
    graph = s.end_capture();
    exec = graph.instantiate();
  }

  void replay(const py::object& stream) {
    if (!exec) {
      throw Error("Graph.replay: nothing captured; capture with `with streamrt.graph(g):` first");
    }
    Stream s = stream_or_current(stream, "Graph.replay(stream=...)");
    exec->launch(s);
  }

  void reset() {
    if (capturing) throw Error("Graph.reset: the graph is capturing; end the capture first");
    exec.reset();
    graph.clear();
  }
};

}  // namespace

void bind_graph(py::module_& m) {
  py::class_<PyGraph>(m, "Graph",
                      "Work captured from streams once and replayed many times (as "
                      "torch.cuda.CUDAGraph). Capture with `with streamrt.graph(g):`.")
      .def(py::init<>())
      .def("capture_begin", &PyGraph::capture_begin, "stream"_a = py::none(),
           "capture_error_mode"_a = "global",
           "Starts capturing `stream` (the current stream when None) into this graph. Prefer "
           "`with streamrt.graph(g):`.")
      .def("capture_end", &PyGraph::capture_end,
           "Ends the capture and instantiates the graph. Raises streamrt.Error for unjoined "
           "streams or an invalidated capture (the graph is left empty).")
      .def("replay", &PyGraph::replay, "stream"_a = py::none(),
           "Enqueues one replay on `stream` (the current stream when None). Returns at once.")
      .def("reset", &PyGraph::reset, "Drops the captured work and the memory it holds.")
      .def_property_readonly(
          "num_nodes", [](const PyGraph& g) { return g.graph.num_nodes(); },
          "Number of captured nodes.")
      .def(
          "to_dot", [](const PyGraph& g) { return g.graph.to_dot(); },
          "The graph in Graphviz DOT form, for debugging.")
      .def("__repr__", [](const PyGraph& g) {
        return "streamrt.Graph(num_nodes=" + std::to_string(g.graph.num_nodes()) +
               (g.capturing ? ", capturing" : "") + ")";
      });

  auto stream = py::reinterpret_borrow<py::class_<Stream>>(m.attr("Stream"));
  stream.def("is_capturing", &Stream::is_capturing,
             "True while the stream captures (began a capture or joined one).");

  m.def(
      "_end_open_captures",
      [] {
        std::vector<PyGraph*> open(open_captures().begin(), open_captures().end());
        for (PyGraph* g : open) {
          const std::string where = g->capturing->str();
          const auto nodes = g->graph.num_nodes();
          g->abandon_capture();
          py::module_::import("sys").attr("stderr").attr("write")(
              "streamrt: at exit, a capture begun with Graph.capture_begin() on " + where +
              " was never ended (Graph.capture_end()); its " + std::to_string(nodes) +
              " captured nodes are discarded\n");
        }
        return open.size();
      },
      "Exit: ends every capture begun with Graph.capture_begin() and never ended, discarding it "
      "with a note on stderr; returns how many.");

  m.def(
      "is_current_stream_capturing", [] { return current_stream().is_capturing(); },
      "True while the current stream captures (as torch.cuda.is_current_stream_capturing).");
}

}  // namespace streamrt::python
