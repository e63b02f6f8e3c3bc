// streamrt.Tensor as a Python object: its attributes, host access (numpy(), the buffer
// protocol, __dlpack__, item()) and waits. Host access waits for the pending work on the tensor
// with the GIL released; memory is shared with numpy and DLPack consumers, never copied. The ops
// on tensors (views, copies, math) are in bind_ops.cpp, indexing in bind_indexing.cpp.
#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>

#include "args.hpp"
#include "bindings.hpp"
#include "dlpack.hpp"
#include "interop.hpp"
#include "streamrt/stream.hpp"
#include "streamrt/tensor.hpp"
#include "tensor_object.hpp"
#include "waits.hpp"

namespace streamrt::python {

using namespace pybind11::literals;

namespace {

// The element of a one-element tensor as the Python number `Py`, once its writer has finished.
template <class T, class Py>
py::object item_as(const Tensor& t) {
  T v;
  {
    wait_tensor(t, false);
    py::gil_scoped_release release;
    v = t.item<T>();
  }
  return Py(v);
}

py::object item_of(const Tensor& t) {
  if (t.numel() != 1) {
    throw py::value_error(
        "Tensor.item: only a one-element tensor has an item; this one has shape " +
        to_string(t.shape()));
  }
  switch (t.dtype()) {
    case DType::Float32:
      return item_as<float, py::float_>(t);
    case DType::Float64:
      return item_as<double, py::float_>(t);
    case DType::Int32:
      return item_as<std::int32_t, py::int_>(t);
    case DType::Int64:
      return item_as<std::int64_t, py::int_>(t);
    case DType::Bool:
      return item_as<bool, py::bool_>(t);
  }
  return py::none();
}

std::string tensor_repr(const Tensor& t) {
  std::string shape = "(";
  for (std::size_t i = 0; i < t.shape().size(); ++i) {
    shape += std::to_string(t.shape()[i]);
    if (t.shape().size() == 1 || i + 1 < t.shape().size()) shape += ", ";
  }
  if (t.shape().size() == 1) shape.resize(shape.size() - 1);
  shape += ")";
  return "streamrt.Tensor(shape=" + shape + ", dtype=" + std::string(to_string(t.dtype())) +
         ", device='" + t.device().str() + "', " + (t.ready() ? "ready" : "pending") + ")";
}

// Shape, dtype, device, sizes.
void bind_attributes(py::class_<Tensor>& cls) {
  cls.def_property_readonly("shape", [](const Tensor& t) { return shape_tuple(t.shape()); })
      .def_property_readonly("dtype", &Tensor::dtype)
      .def_property_readonly("device", &Tensor::device)
      .def_property_readonly("ndim", &Tensor::dim)
      .def("dim", &Tensor::dim)
      .def("numel", &Tensor::numel)
      .def_property_readonly("nbytes", &Tensor::nbytes)
      .def_property_readonly("itemsize", &Tensor::element_size)
      .def(
          "size",
          [](const Tensor& t, py::object d) -> py::object {
            if (d.is_none()) return shape_tuple(t.shape());
            const int dim = to_dim(d, "Tensor.size");
            if (dim < -t.dim() || dim >= t.dim()) {
              throw py::index_error("Tensor.size: dimension " + std::to_string(dim) +
                                    " is out of range for a " + std::to_string(t.dim()) +
                                    "-dimensional tensor");
            }
            return py::int_(t.size(dim));
          },
          "dim"_a = py::none())
      .def("__len__", [](const Tensor& t) {
        // torch 1.13's torch.tensor()/as_tensor() of a streamrt tensor walk it as a sequence and
        // end here: say what works instead.
        if (t.dim() == 0) {
          throw py::type_error(
              "len() of a 0-d tensor (to make a torch tensor of a streamrt tensor, use "
              "torch.from_dlpack(t), or call streamrt.torch.install() first, after which "
              "torch.tensor(t) and torch.as_tensor(t) take it)");
        }
        return t.shape()[0];
      });
}

// numpy, DLPack and Python numbers from the tensor's memory, after its writers.
void bind_host_access(py::class_<Tensor>& cls) {
  cls.def("numpy", &numpy_view, "writable"_a = true,
          "The tensor's memory as a numpy array, without copying. Waits (GIL released) for the "
          "queued work that writes the tensor, and, when writable, also for the work that reads "
          "it (the host may then write).")
      .def(
          "__array__",
          [](py::object self, py::object dtype, py::object copy) -> py::object {
            py::object arr = numpy_view(self, true);
            if (!dtype.is_none()) arr = arr.attr("astype")(dtype);
            if (!copy.is_none() && copy.cast<bool>()) arr = arr.attr("copy")();
            return arr;
          },
          "dtype"_a = py::none(), "copy"_a = py::none())
      // bytes() tries __bytes__ first, then __index__ (bytes(5) is five zero bytes), and only
      // then the buffer protocol: without this, bytes() of a one-element integer tensor was
      // zeros and of a longer one a TypeError.
      .def(
          "__bytes__",
          [](py::object self) -> py::bytes {
            return numpy_view(std::move(self), false).attr("tobytes")();
          },
          "The elements in C order as numpy's tobytes() gives them (waits for the writer).")
      .def("__dlpack__", &to_dlpack_capsule, "stream"_a = py::none(),
           "A DLPack capsule sharing the memory (waits for pending work first).")
      .def("__dlpack_device__",
           [](const Tensor& t) { return py::make_tuple(dlpack::kDLCPU, t.device().index); })
      .def("item", &item_of, "The only element as a Python number (waits for the writer).")
      .def("__float__", [](const Tensor& t) { return item_of(t).cast<double>(); })
      // int() of any dtype, as Python's int() of the element (truncating a float, as torch).
      .def("__int__",
           [](const Tensor& t) {
             return py::reinterpret_steal<py::object>(PyNumber_Long(item_of(t).ptr()));
           })
      .def("__index__",
           [](const Tensor& t) -> py::object {
             if (is_floating(t.dtype()) || t.dtype() == DType::Bool) {
               throw py::type_error(
                   "only integer tensors of a single element can be converted "
                   "to an index");
             }
             return item_of(t);
           })
      .def(
          "data_ptr",
          [](const Tensor& t) { return reinterpret_cast<std::uintptr_t>(t.data_ptr_unsafe()); },
          "Address of the first element (no wait, as torch).");
}

// Waiting for the tensor's work, and what it shares.
void bind_waits(py::class_<Tensor>& cls) {
  cls.def(
         "wait",
         [](const Tensor& t) {
           wait_tensor(t, false);
           py::gil_scoped_release release;
           t.wait();
         },
         "Blocks (GIL released) until the queued work that writes the tensor has finished; "
         "re-raises its failure.")
      .def(
          "record_stream",
          [](const Tensor&, py::object stream) {
            if (!py::isinstance<Stream>(stream)) {
              throw py::type_error("Tensor.record_stream: expected a streamrt.Stream, got " +
                                   type_name(stream));
            }
          },
          "stream"_a,
          "Accepted for torch code and does nothing: queued ops keep the memory they use alive "
          "and order themselves against it (dependency tracking), so no stream needs to be "
          "recorded.")
      .def("ready", &Tensor::ready,
           "True when no queued work writes the tensor any more. Never blocks.")
      .def("shares_storage", &Tensor::shares_storage, "other"_a)
      .def("__repr__", &tensor_repr);
}

}  // namespace

void bind_tensor(py::module_& m) {
  py::class_<Tensor> cls(m, "Tensor", py::buffer_protocol(),
                         "A strided tensor whose ops run on streams. Copies and views (transpose, "
                         "slicing, expand) share storage and its dependency tracking. Reading it "
                         "on the host (numpy(), the buffer "
                         "protocol, __dlpack__, item()) first waits for the work that writes it.");
  remember_tensor_type();
  bind_attributes(cls);
  bind_host_access(cls);
  bind_waits(cls);
  // numpy must not handle `ndarray + tensor` itself (through __array__): give it to Tensor.
  cls.attr("__array_ufunc__") = py::none();
  enable_tensor_buffer(cls);
}

}  // namespace streamrt::python
