// Tensor creation: from memory Python already holds (from_numpy, from_dlpack, asarray, tensor)
// and new tensors filled on the current stream (zeros, ones, empty, full, arange). rand and randn
// are with the generators (bind_generator.cpp).
#include <pybind11/pybind11.h>

#include <cstdint>
#include <limits>
#include <optional>

#include "args.hpp"
#include "bindings.hpp"
#include "interop.hpp"
#include "streamrt/tensor.hpp"
#include "tensor_object.hpp"

namespace streamrt::python {

using namespace pybind11::literals;

namespace {

void bind_imports(py::module_& m) {
  m.def(
      "from_numpy", [](py::object arr) { return from_numpy_array(arr, false, "from_numpy"); },
      "array"_a,
      "A tensor sharing the memory of an aligned, writable numpy array, with its strides (views "
      "included: transposed, stepped, reversed).");
  m.def(
      "from_dlpack", [](py::object obj) { return from_dlpack_object(obj); }, "obj"_a,
      "A tensor sharing the memory of a DLPack producer (numpy array, torch CPU tensor, capsule), "
      "with its strides (views included).");
  m.def(
      "asarray",
      [](py::object obj, py::object dtype, py::object copy) {
        std::optional<DType> d;
        if (!dtype.is_none()) d = to_dtype(dtype, "asarray");
        std::optional<bool> c;
        if (!copy.is_none()) c = copy.cast<bool>();
        return asarray_tensor(obj, d, c, false, "asarray");
      },
      "obj"_a, "dtype"_a = py::none(), "copy"_a = py::none(),
      "A tensor from `obj`, sharing its memory when possible (copy=None), always copying "
      "(copy=True), or never copying (copy=False: ValueError when it must).");
  m.def(
      "tensor",
      [](py::object obj, py::object dtype) {
        std::optional<DType> d;
        if (!dtype.is_none()) d = to_dtype(dtype, "tensor");
        return asarray_tensor(obj, d, true, false, "tensor");
      },
      "data"_a, "dtype"_a = py::none(), "A new tensor with a copy of `data`.");
}

void bind_filled(py::module_& m) {
  auto creation = [&m](const char* name, auto make, const char* doc) {
    m.def(
        name,
        [name, make](py::args size, py::object dtype, py::object device) {
          const Shape shape = sizes_from_args(size, name);
          const DType d = to_dtype_or(dtype, DType::Float32, name);
          const Device dev = tensor_device(device, name);
          return run_op(name, [&] { return make(shape, d, dev); });
        },
        "dtype"_a = py::none(), "device"_a = py::none(), doc);
  };
  creation(
      "zeros", [](const Shape& s, DType d, Device dev) { return zeros(s, d, dev); },
      "zeros(*size, dtype=None, device=None): zeros, filled on the current stream.");
  creation(
      "ones", [](const Shape& s, DType d, Device dev) { return ones(s, d, dev); },
      "ones(*size, dtype=None, device=None): ones, filled on the current stream.");
  creation(
      "empty", [](const Shape& s, DType d, Device dev) { return empty(s, d, dev); },
      "empty(*size, dtype=None, device=None): uninitialised memory (nothing queued).");
  m.def(
      "full",
      [](py::object size, py::object fill_value, py::object dtype, py::object device) {
        const double value = float_arg(fill_value, "full", "fill_value");
        const Shape shape = to_shape(size, "full");
        const DType d = to_dtype_or(dtype, DType::Float32, "full");
        const Device dev = tensor_device(device, "full");
        return run_op("full", [&] { return full(shape, value, d, dev); });
      },
      "size"_a, "fill_value"_a, "dtype"_a = py::none(), "device"_a = py::none());
  m.def(
      "arange",
      [](py::object end, py::object dtype, py::object device) {
        const auto n = int_arg(end, "arange", "end", 0, std::numeric_limits<std::int64_t>::max());
        const DType d = to_dtype_or(dtype, DType::Int64, "arange");
        const Device dev = tensor_device(device, "arange");
        return run_op("arange", [&] { return arange(n, d, dev); });
      },
      "end"_a, "dtype"_a = py::none(), "device"_a = py::none());
}

}  // namespace

void bind_factories(py::module_& m) {
  bind_imports(m);
  bind_filled(m);
}

}  // namespace streamrt::python
