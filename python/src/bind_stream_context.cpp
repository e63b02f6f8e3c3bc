// streamrt.StreamContext and streamrt.stream(): `with` contexts that make a stream current on
// this thread for a block (torch.StreamContext), and the per-thread stack that Stream's own
// __enter__/__exit__ share (stream_context.hpp).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "args.hpp"
#include "bindings.hpp"
#include "stream_context.hpp"
#include "streamrt/error.hpp"
#include "streamrt/stream.hpp"

namespace streamrt::python {

using namespace pybind11::literals;

namespace {

// Streams made current by `with stream:` / `with StreamContext(...)` on this thread, so that exits
// restore them in order. nullopt entries are StreamContext(None) scopes.
thread_local std::vector<std::optional<Stream>> tls_entered;

// A `with` context for a stream or None (torch.StreamContext). Entering makes the stream current
// on this thread; exiting restores the previous one.
struct PyStreamContext {
  std::optional<Stream> stream;
};

}  // namespace

void enter_stream(const std::optional<Stream>& s) {
  if (s) {
    tls_entered.emplace_back(current_stream(s->device()));
    set_current_stream(*s);
  } else {
    tls_entered.emplace_back(std::nullopt);
  }
}

void exit_stream(const char* what) {
  if (tls_entered.empty()) {
    throw Error(std::string(what) +
                ".__exit__: this thread did not enter it (a stream context must be entered and "
                "exited on the same thread, with `with`)");
  }
  auto previous = std::move(tls_entered.back());
  tls_entered.pop_back();
  if (previous) set_current_stream(*previous);
}

void bind_stream_context(py::module_& m) {
  py::class_<PyStreamContext>(m, "StreamContext",
                              "with StreamContext(stream): makes `stream` current on this thread "
                              "for the block (None: does nothing), then restores the previous one.")
      .def(py::init([](py::object s) {
             return PyStreamContext{to_optional_stream(s, "StreamContext")};
           }),
           "stream"_a)
      .def_property_readonly(
          "stream", [](const PyStreamContext& c) { return c.stream; },
          "The stream made current (None for a no-op context).")
      .def("__enter__",
           [](PyStreamContext& c) {
             enter_stream(c.stream);
             return c.stream;
           })
      .def("__exit__",
           [](PyStreamContext&, py::args) {
             exit_stream("StreamContext");
             return false;
           })
      .def("__repr__", [](const PyStreamContext& c) {
        const std::string stream = c.stream ? std::string(py::repr(py::cast(*c.stream))) : "None";
        return "streamrt.StreamContext(" + stream + ")";
      });
  m.def(
      "stream", [](py::object s) { return PyStreamContext{to_optional_stream(s, "stream")}; },
      "stream"_a, "StreamContext(stream): `with streamrt.stream(s):` makes `s` current.");
}

}  // namespace streamrt::python
