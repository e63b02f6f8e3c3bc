// The _streamrt_mpi extension (built when MPI is found): streamrt::mpi for streamrt.distributed.
// A separate extension so that the core module never loads MPI. Tensor, Stream and Event are the
// types bound by _streamrt (pybind11 shares registered types between modules).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <climits>
#include <cstdint>
#include <optional>
#include <string>

#include "streamrt/mpi.hpp"

namespace py = pybind11;
using namespace pybind11::literals;
using streamrt::Event;
using streamrt::Stream;
using streamrt::Tensor;
using streamrt::mpi::Communicator;
using streamrt::mpi::ReduceOp;

namespace {

// An MPI_Comm from mpi4py's MPI._handleof(comm): a pointer in Open MPI, an int in MPICH.
// A C-style cast: it is a reinterpret_cast for a pointer handle and a conversion for an int one.
MPI_Comm comm_from_handle(std::uintptr_t h) {
  return (MPI_Comm)h;
}  // NOLINT

std::uintptr_t handle_of(MPI_Comm c) {
  return (std::uintptr_t)c;
}  // NOLINT

using OptStream = std::optional<Stream>;

// An int argument that C++ takes as int: any Python int is accepted here, and one that does not
// fit an int becomes one that the communicator refuses by range, naming the limits, instead of
// pybind11's "incompatible function arguments".
int to_int(py::handle obj, const char* what, const char* name) {
  if (PyIndex_Check(obj.ptr()) == 0 || PyBool_Check(obj.ptr()) != 0) {
    throw py::type_error(std::string(what) + ": " + name + " must be an integer, got " +
                         std::string(py::str(py::type::handle_of(obj).attr("__name__"))));
  }
  int overflow = 0;
  const auto v = py::reinterpret_steal<py::object>(PyNumber_Index(obj.ptr()));
  if (!v) throw py::error_already_set();
  const long long n = PyLong_AsLongLongAndOverflow(v.ptr(), &overflow);
  if (overflow != 0 || n < INT_MIN || n > INT_MAX) {
    throw py::value_error(std::string(what) + ": " + name + "=" + std::string(py::str(v)) +
                          " is out of range (an MPI rank or tag is an int from 0 to " +
                          std::to_string(INT_MAX) + ")");
  }
  return static_cast<int>(n);
}

}  // namespace

PYBIND11_MODULE(_streamrt_mpi, m) {
  m.doc() = "streamrt.distributed's native part: MPI operations as stream work";
  py::module_::import("streamrt._streamrt");  // Tensor, Stream, Event and the exceptions

  py::enum_<ReduceOp>(m, "ReduceOp", "Reduction operators (torch.distributed.ReduceOp).")
      .value("SUM", ReduceOp::Sum)
      .value("PRODUCT", ReduceOp::Prod)
      .value("MIN", ReduceOp::Min)
      .value("MAX", ReduceOp::Max)
      .value("AVG", ReduceOp::Avg);

  m.def(
      "init", [] { streamrt::mpi::init(); }, py::call_guard<py::gil_scoped_release>(),
      "Initialises MPI with MPI_THREAD_MULTIPLE unless it is already initialised (then checks "
      "the level). Blocks: collective the first time.");
  m.def("initialized", &streamrt::mpi::initialized, "True while MPI is initialised.");
  m.def("in_flight", &Communicator::in_flight, "Operations in flight in MPI now.");
  m.def(
      "abort",
      [](int code) {
        if (streamrt::mpi::initialized()) MPI_Abort(MPI_COMM_WORLD, code);
      },
      "code"_a,
      "Ends every rank of the job with `code` (MPI_Abort), when MPI is initialised: what exit "
      "does when it gives up waiting for queued communication.");

  py::class_<Communicator>(m, "Communicator",
                           "A duplicate of an MPI communicator whose operations run on streams.")
      .def(py::init<>(), py::call_guard<py::gil_scoped_release>(),
           "A duplicate of MPI_COMM_WORLD. Blocks: collective.")
      .def_static(
          "from_handle",
          [](std::uintptr_t h) {
            py::gil_scoped_release release;
            return Communicator(comm_from_handle(h));
          },
          "handle"_a,
          "A duplicate of the MPI communicator with this handle (mpi4py: MPI._handleof(comm)). "
          "Blocks: collective.")
      .def_property_readonly("rank", &Communicator::rank)
      .def_property_readonly("size", &Communicator::size)
      .def_property_readonly("handle", [](const Communicator& c) { return handle_of(c.native()); })
      .def(
          "all_reduce",
          [](Communicator& c, Tensor& t, ReduceOp op, OptStream s) {
            return c.all_reduce(t, op, s);
          },
          "tensor"_a, "op"_a = ReduceOp::Sum, "stream"_a = py::none())
      .def(
          "broadcast",
          [](Communicator& c, Tensor& t, py::object root, OptStream s) {
            return c.broadcast(t, to_int(root, "broadcast", "src"), s);
          },
          "tensor"_a, "root"_a, "stream"_a = py::none())
      .def(
          "all_gather",
          [](Communicator& c, Tensor& out, const Tensor& in, OptStream s) {
            return c.all_gather(in, out, s);
          },
          "output"_a, "input"_a, "stream"_a = py::none())
      .def(
          "reduce_scatter",
          [](Communicator& c, Tensor& out, const Tensor& in, ReduceOp op, OptStream s) {
            return c.reduce_scatter(in, out, op, s);
          },
          "output"_a, "input"_a, "op"_a = ReduceOp::Sum, "stream"_a = py::none())
      .def(
          "all_to_all",
          [](Communicator& c, Tensor& out, const Tensor& in, OptStream s) {
            return c.all_to_all(in, out, s);
          },
          "output"_a, "input"_a, "stream"_a = py::none())
      .def(
          "send",
          [](Communicator& c, const Tensor& t, py::object dst, py::object tag, OptStream s) {
            return c.send(t, to_int(dst, "send", "dst"), to_int(tag, "send", "tag"), s);
          },
          "tensor"_a, "dst"_a, "tag"_a = 0, "stream"_a = py::none())
      .def(
          "recv",
          [](Communicator& c, Tensor& t, py::object src, py::object tag, OptStream s) {
            return c.recv(t, to_int(src, "recv", "src"), to_int(tag, "recv", "tag"), s);
          },
          "tensor"_a, "src"_a, "tag"_a = 0, "stream"_a = py::none())
      .def(
          "barrier", [](Communicator& c, OptStream s) { return c.barrier(s); },
          "stream"_a = py::none());
}
