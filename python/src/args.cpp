// Python arguments to C++ values (args.hpp).
#include "args.hpp"

#include <cmath>
#include <limits>
#include <string>

#include "error_text.hpp"
#include "interop.hpp"
#include "streamrt/error.hpp"

namespace streamrt::python {

std::string type_name(py::handle obj) {
  py::handle type = py::type::handle_of(obj);
  const std::string module = py::str(py::getattr(type, "__module__", py::str("")));
  const std::string name = py::str(py::getattr(type, "__qualname__", py::str("?")));
  if (module.empty() || module == "builtins") return name;
  return module + "." + name;
}

std::int64_t int_arg(py::handle obj, const char* what, const char* name, std::int64_t lo,
                     std::int64_t hi, PyObject* range_error) {
  if (PyIndex_Check(obj.ptr()) == 0 || PyBool_Check(obj.ptr()) != 0) {
    throw py::type_error(std::string(what) + ": " + name + " must be an integer, got " +
                         type_name(obj));
  }
  const auto v = py::reinterpret_steal<py::object>(PyNumber_Index(obj.ptr()));
  if (!v) throw py::error_already_set();
  int overflow = 0;
  const long long n = PyLong_AsLongLongAndOverflow(v.ptr(), &overflow);
  if (n == -1 && PyErr_Occurred() != nullptr) throw py::error_already_set();
  if (overflow != 0 || n < lo || n > hi) {
    const std::string text = py::str(v);
    PyErr_SetString(range_error, (std::string(what) + ": " + name + "=" + text +
                                  " is out of range; it must be from " + std::to_string(lo) +
                                  " to " + std::to_string(hi))
                                     .c_str());
    throw py::error_already_set();
  }
  return n;
}

double float_arg(py::handle obj, const char* what, const char* name) {
  const double v = PyFloat_AsDouble(obj.ptr());
  if (v == -1.0 && PyErr_Occurred() != nullptr) {
    if (PyErr_ExceptionMatches(PyExc_OverflowError) != 0) {
      PyErr_Clear();
      std::string text = py::str(obj);
      if (text.size() > 40) {
        text = text.substr(0, 20) + "... (" + std::to_string(text.size()) + " digits)";
      }
      PyErr_SetString(PyExc_OverflowError,
                      (std::string(what) + ": " + name + "=" + text +
                       " is too large for a float (the largest is about 1.8e308)")
                          .c_str());
    } else if (PyErr_ExceptionMatches(PyExc_TypeError) != 0) {
      PyErr_Clear();
      throw py::type_error(std::string(what) + ": " + name + " must be a number, got " +
                           type_name(obj));
    }
    throw py::error_already_set();
  }
  return v;
}

int to_dim(py::handle obj, const char* what) {
  return static_cast<int>(int_arg(obj, what, "dim", std::numeric_limits<int>::min(),
                                  std::numeric_limits<int>::max(), PyExc_IndexError));
}

std::vector<int> dims_from_args(const py::args& args, const char* what) {
  std::vector<int> dims;
  if (args.size() == 1 && PyIndex_Check(args[0].ptr()) == 0) {
    for (py::handle h : args[0]) dims.push_back(to_dim(h, what));
  } else {
    for (py::handle h : args) dims.push_back(to_dim(h, what));
  }
  return dims;
}

Device to_device(py::handle obj, const char* what) {
  if (obj.is_none()) return Device{};
  if (py::isinstance<Device>(obj)) return obj.cast<Device>();
  if (py::isinstance<py::int_>(obj) && !py::isinstance<py::bool_>(obj)) {
    // An index, as torch accepts (torch.cuda.synchronize(0)): a CPU device here.
    const auto index = int_arg(obj, what, "device index", 0, std::numeric_limits<int>::max());
    return Device{DeviceType::CPU, static_cast<int>(index)};
  }
  if (py::isinstance<py::str>(obj)) {
    try {
      return Device::parse(obj.cast<std::string>());
    } catch (const Error& e) {
      throw py::value_error(std::string(what) + ": " + python_text(e.text()));
    }
  }
  throw py::type_error(std::string(what) +
                       ": expected a device such as 'cpu', 'cpu:0' or 0 (a str, int or "
                       "streamrt.Device), "
                       "got " +
                       type_name(obj));
}

Device tensor_device(py::handle obj, const char* what) {
  const Device d = to_device(obj, what);
  if (d.type != DeviceType::CPU) {
    throw Error(std::string(what) + ": tensors on " + d.str() +
                " are not supported in this build: only CPU tensors (device=\"cpu\")");
  }
  return d;
}

Stream to_stream(py::handle obj, const char* what) {
  if (py::isinstance<Stream>(obj)) return obj.cast<Stream>();
  throw py::type_error(std::string(what) + ": expected a streamrt.Stream, got " + type_name(obj));
}

std::optional<Stream> to_optional_stream(py::handle obj, const char* what) {
  if (obj.is_none()) return std::nullopt;
  if (py::isinstance<Stream>(obj)) return obj.cast<Stream>();
  throw py::type_error(std::string(what) + ": expected a streamrt.Stream or None, got " +
                       type_name(obj));
}

Stream stream_or_current(py::handle obj, const char* what) {
  if (auto s = to_optional_stream(obj, what)) return *s;
  return current_stream();
}

std::chrono::nanoseconds to_timeout(py::handle obj, const char* what, const char* name) {
  if (py::isinstance<py::bool_>(obj) ||
      !(py::isinstance<py::int_>(obj) || py::isinstance<py::float_>(obj))) {
    throw py::type_error(std::string(what) + ": " + name + " must be a number of seconds, got " +
                         type_name(obj));
  }
  // Past what nanoseconds count (about 292 years): the longest wait there is, not an overflow.
  // An int too large even for a float is such a wait too.
  constexpr double kMaxSeconds = 9.2e9;
  if (py::isinstance<py::int_>(obj) &&
      PyObject_RichCompareBool(obj.ptr(), py::int_(static_cast<long long>(kMaxSeconds)).ptr(),
                               Py_GE) == 1) {
    return std::chrono::nanoseconds::max();
  }
  const double seconds = float_arg(obj, what, name);
  if (!(seconds >= 0) || !std::isfinite(seconds)) {
    throw py::value_error(std::string(what) + ": " + name + " must be a finite number >= 0, got " +
                          std::to_string(seconds));
  }
  if (seconds >= kMaxSeconds) return std::chrono::nanoseconds::max();
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::duration<double>(seconds));
}

std::optional<DType> dtype_from_name(const std::string& name) {
  if (name == "float32") return DType::Float32;
  if (name == "float64") return DType::Float64;
  if (name == "int32") return DType::Int32;
  if (name == "int64") return DType::Int64;
  if (name == "bool") return DType::Bool;
  return std::nullopt;
}

DType to_dtype(py::handle obj, const char* what) {
  if (py::isinstance<DType>(obj)) return obj.cast<DType>();
  py::object np_dtype;
  try {
    np_dtype = numpy().attr("dtype")(obj);
  } catch (const py::error_already_set& e) {
    if (!e.matches(PyExc_TypeError)) throw;
    throw py::type_error(std::string(what) + ": expected a dtype such as " + kSupportedDTypes +
                         ", got " + std::string(py::repr(obj)));
  }
  const std::string name = py::str(np_dtype.attr("name"));
  if (auto d = dtype_from_name(name)) return *d;
  throw py::type_error(std::string(what) + ": dtype " + name + " is not supported; use " +
                       kSupportedDTypes);
}

DType to_dtype_or(py::handle obj, DType fallback, const char* what) {
  return obj.is_none() ? fallback : to_dtype(obj, what);
}

namespace {

std::int64_t to_size(py::handle item, const char* what) {
  if (PyIndex_Check(item.ptr()) == 0) {
    throw py::type_error(std::string(what) + ": sizes must be integers, got " + type_name(item));
  }
  return int_arg(item, what, "size", 0, std::numeric_limits<std::int64_t>::max());
}

}  // namespace

Shape to_shape(py::handle sizes, const char* what) {
  if (PyIndex_Check(sizes.ptr()) != 0) return {to_size(sizes, what)};
  if (!py::isinstance<py::iterable>(sizes) || py::isinstance<py::str>(sizes)) {
    throw py::type_error(std::string(what) +
                         ": expected sizes as integers or a sequence of integers, got " +
                         type_name(sizes));
  }
  Shape shape;
  for (py::handle item : sizes) shape.push_back(to_size(item, what));
  if (shape.size() > static_cast<std::size_t>(kMaxDims)) {
    throw py::value_error(std::string(what) + ": at most " + std::to_string(kMaxDims) +
                          " dimensions, got " + std::to_string(shape.size()));
  }
  return shape;
}

Shape sizes_from_args(const py::args& args, const char* what) {
  if (args.size() == 1 && PyIndex_Check(args[0].ptr()) == 0) return to_shape(args[0], what);
  return to_shape(args, what);
}

Shape signed_sizes_from_args(const py::args& args, const char* what) {
  const auto size_of = [what](py::handle h) {
    return int_arg(h, what, "size", std::numeric_limits<std::int64_t>::min(),
                   std::numeric_limits<std::int64_t>::max());
  };
  Shape s;
  if (args.size() == 1 && PyIndex_Check(args[0].ptr()) == 0) {
    for (py::handle h : args[0]) s.push_back(size_of(h));
  } else {
    for (py::handle h : args) s.push_back(size_of(h));
  }
  return s;
}

py::tuple shape_tuple(const Shape& shape) {
  py::tuple t(shape.size());
  for (std::size_t i = 0; i < shape.size(); ++i) t[i] = py::int_(shape[i]);
  return t;
}

std::uint64_t to_seed(py::handle seed, const char* what) {
  if (PyIndex_Check(seed.ptr()) == 0 || PyBool_Check(seed.ptr()) != 0) {
    throw py::type_error(std::string(what) + ": seed must be an integer, got " + type_name(seed));
  }
  const auto s = py::reinterpret_steal<py::object>(PyNumber_Index(seed.ptr()));
  if (!s) throw py::error_already_set();
  const unsigned long long v = PyLong_AsUnsignedLongLong(s.ptr());
  if (v == static_cast<unsigned long long>(-1) && PyErr_Occurred() != nullptr) {
    PyErr_Clear();
    throw py::value_error(
        std::string(what) + ": seed=" + std::string(py::str(s)) +
        " is out of range; it must be from 0 to 18446744073709551615 (2**64 - 1)");
  }
  return v;
}

}  // namespace streamrt::python
