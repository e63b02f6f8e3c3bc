// The _streamrt_mpi extension (built when MPI is found): streamrt::mpi for streamrt.distributed.
// A separate extension so that the core module never loads MPI. Tensor, Stream and Event are the
// types bound by _streamrt (pybind11 shares registered types between modules).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <optional>

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
MPI_Comm comm_from_handle(std::uintptr_t h) { return (MPI_Comm)h; }  // NOLINT

std::uintptr_t handle_of(MPI_Comm c) { return (std::uintptr_t)c; }  // NOLINT

using OptStream = std::optional<Stream>;

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

  m.def("init", [] { streamrt::mpi::init(); }, py::call_guard<py::gil_scoped_release>(),
        "Initialises MPI with MPI_THREAD_MULTIPLE unless it is already initialised (then checks "
        "the level). Blocks: collective the first time.");
  m.def("initialized", &streamrt::mpi::initialized, "True while MPI is initialised.");
  m.def("in_flight", &Communicator::in_flight, "Operations in flight in MPI now.");

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
          [](Communicator& c, Tensor& t, ReduceOp op, OptStream s) { return c.all_reduce(t, op, s); },
          "tensor"_a, "op"_a = ReduceOp::Sum, "stream"_a = py::none())
      .def(
          "broadcast",
          [](Communicator& c, Tensor& t, int root, OptStream s) { return c.broadcast(t, root, s); },
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
          [](Communicator& c, const Tensor& t, int dst, int tag, OptStream s) {
            return c.send(t, dst, tag, s);
          },
          "tensor"_a, "dst"_a, "tag"_a = 0, "stream"_a = py::none())
      .def(
          "recv",
          [](Communicator& c, Tensor& t, int src, int tag, OptStream s) {
            return c.recv(t, src, tag, s);
          },
          "tensor"_a, "src"_a, "tag"_a = 0, "stream"_a = py::none())
      .def(
          "barrier", [](Communicator& c, OptStream s) { return c.barrier(s); },
          "stream"_a = py::none());
}
