// streamrt.dtype and the module's streamrt.float32 ... values: repr as torch's, equal to the
// numpy dtypes and dtype names they stand for.
#include <pybind11/pybind11.h>

#include <string>

#include "args.hpp"
#include "bindings.hpp"
#include "interop.hpp"
#include "streamrt/tensor.hpp"

namespace streamrt::python {

void bind_dtype(py::module_& m) {
  py::enum_<DType>(m, "dtype", "Tensor element type: streamrt.float32, float64, int32, int64.")
      .value("float32", DType::Float32)
      .value("float64", DType::Float64)
      .value("int32", DType::Int32)
      .value("int64", DType::Int64)
      .value("bool", DType::Bool)
      .def_property_readonly(
          "itemsize", [](DType d) { return element_size(d); }, "Bytes per element.")
      .def_property_readonly("is_floating_point", [](DType d) { return is_floating(d); })
      .def_property_readonly(
          "numpy", [](DType d) { return numpy_dtype(d); }, "The numpy dtype.");
  // Replace (not overload) the enum's own dunders: repr like torch's, and equality with numpy
  // dtypes and dtype names.
  py::object dtype_cls = m.attr("dtype");
  auto dtype_name = [](DType d) { return "streamrt." + std::string(to_string(d)); };
  dtype_cls.attr("__repr__") = py::cpp_function(dtype_name, py::is_method(dtype_cls));
  dtype_cls.attr("__str__") = py::cpp_function(dtype_name, py::is_method(dtype_cls));
  dtype_cls.attr("__eq__") = py::cpp_function(
      [](DType d, py::object other) {
        if (py::isinstance<DType>(other)) return d == other.cast<DType>();
        try {
          return d == to_dtype(other, "dtype");
        } catch (const py::error_already_set&) {
          return false;
        } catch (const py::builtin_exception&) {
          return false;
        }
      },
      py::is_method(dtype_cls));
  dtype_cls.attr("__ne__") = py::cpp_function(
      [](py::object self, py::object other) { return !self.attr("__eq__")(other).cast<bool>(); },
      py::is_method(dtype_cls));
  dtype_cls.attr("__hash__") =
      py::cpp_function([](DType d) { return static_cast<int>(d); }, py::is_method(dtype_cls));
  for (DType d : {DType::Float32, DType::Float64, DType::Int32, DType::Int64, DType::Bool}) {
    m.attr(std::string(to_string(d)).c_str()) = py::cast(d);
  }
}

}  // namespace streamrt::python
