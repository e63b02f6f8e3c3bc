// Python bindings of tensors, ops, dependency tracking and the profiler. Element-wise ops launch
// with the GIL held (a launch never waits), others with it released; host access (numpy(), the
// buffer protocol, __dlpack__, item()) waits for the pending work on the tensor with the GIL
// released. Memory is shared, never copied, with numpy
// and DLPack producers/consumers whenever the layout allows it.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bind_ops.hpp"
#include "bindings.hpp"
#include "dlpack.hpp"
#include "py_runtime.hpp"
#include "streamrt/error.hpp"
#include "streamrt/event.hpp"
#include "streamrt/ops.hpp"
#include "streamrt/profiler.hpp"
#include "streamrt/stream.hpp"
#include "streamrt/tensor.hpp"
#include "timeline_svg.hpp"

namespace streamrt::python {

using namespace pybind11::literals;

namespace {

// Set once by bind_tensor, with the GIL held and before any op can run.
const py::detail::type_info* g_tensor_info = nullptr;
// numpy and its scalar base classes, set on the first numpy() under the GIL; leaked references
// (used until exit). Looked up per call, they would cost more than a small op's launch.
PyObject* g_numpy = nullptr;
PyObject* g_numpy_generic = nullptr;
PyObject* g_numpy_floating = nullptr;

}  // namespace

py::module_ numpy() {
  if (g_numpy == nullptr) {
    // The import may release the GIL, so another thread can get here too: both store the same
    // module (one reference leaks).
    auto np = py::module_::import("numpy");
    g_numpy_generic = py::object(np.attr("generic")).release().ptr();
    g_numpy_floating = py::object(np.attr("floating")).release().ptr();
    g_numpy = np.release().ptr();
  }
  return py::reinterpret_borrow<py::module_>(g_numpy);
}

const Tensor* borrowed_tensor(py::handle obj) {
  if (PyObject_TypeCheck(obj.ptr(), g_tensor_info->type) == 0) return nullptr;
  // The caster with the type known: no lookup of Tensor's type by its C++ name.
  py::detail::type_caster_generic caster(g_tensor_info);
  if (!caster.load(obj, false)) return nullptr;
  return static_cast<const Tensor*>(caster.value);
}

py::object wrap_tensor(Tensor&& t) {
  // Made as pybind11's cast makes it (an owning holder in pybind11's instance layout), but left
  // out of pybind11's registry of live instances, which only serves to find the Python object of
  // a C++ address already wrapped: this value is new, and no binding returns a reference to a
  // wrapped Tensor. Registering and deregistering cost a hash-table insert and erase per result,
  // the most of any step of wrapping when many tensors are alive. pybind11 deregisters, when an
  // instance is deallocated, only instances marked registered.
  using Holder = py::class_<Tensor>::holder_type;
  auto self = py::reinterpret_steal<py::object>(py::detail::make_new_instance(g_tensor_info->type));
  auto value = std::make_unique<Tensor>(std::move(t));
  auto* inst = reinterpret_cast<py::detail::instance*>(self.ptr());
  auto v_h = inst->get_value_and_holder(g_tensor_info);
  v_h.value_ptr() = value.get();
  inst->owned = true;
  new (std::addressof(v_h.holder<Holder>())) Holder(std::move(value));
  v_h.set_holder_constructed();
  return self;
}

namespace {

constexpr const char* kSupportedDTypes =
    "streamrt.float32, streamrt.float64, streamrt.int32, streamrt.int64 or streamrt.bool (or the "
    "numpy equivalents)";

// ---------------------------------------------------------------------------------------------
// dtypes

std::optional<DType> dtype_from_name(const std::string& name) {
  if (name == "float32") return DType::Float32;
  if (name == "float64") return DType::Float64;
  if (name == "int32") return DType::Int32;
  if (name == "int64") return DType::Int64;
  if (name == "bool") return DType::Bool;
  return std::nullopt;
}

// streamrt dtype, numpy dtype-like (np.float32, "float64", np.dtype("i4"), float, int).
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

py::dtype numpy_dtype(DType d) {
  switch (d) {
    case DType::Float32:
      return py::dtype::of<float>();
    case DType::Float64:
      return py::dtype::of<double>();
    case DType::Int32:
      return py::dtype::of<std::int32_t>();
    case DType::Int64:
      return py::dtype::of<std::int64_t>();
    case DType::Bool:
      return py::dtype::of<bool>();
  }
  throw Error("unknown dtype");
}

// ---------------------------------------------------------------------------------------------
// Sizes: randn(2, 3), randn((2, 3)), randn([2, 3]), zeros(()) for a scalar.

std::int64_t to_size(py::handle item, const char* what) {
  if (PyIndex_Check(item.ptr()) == 0) {
    throw py::type_error(std::string(what) + ": sizes must be integers, got " + type_name(item));
  }
  return int_arg(item, what, "size", 0, std::numeric_limits<std::int64_t>::max());
}

Shape to_shape(py::handle seq, const char* what) {
  if (PyIndex_Check(seq.ptr()) != 0) return {to_size(seq, what)};
  if (!py::isinstance<py::iterable>(seq) || py::isinstance<py::str>(seq)) {
    throw py::type_error(std::string(what) +
                         ": expected sizes as integers or a sequence of integers, got " +
                         type_name(seq));
  }
  Shape shape;
  for (py::handle item : seq) shape.push_back(to_size(item, what));
  if (shape.size() > static_cast<std::size_t>(kMaxDims)) {
    throw py::value_error(std::string(what) + ": at most " + std::to_string(kMaxDims) +
                          " dimensions, got " + std::to_string(shape.size()));
  }
  return shape;
}

// A size of reshape: -1 (inferred) or >= 0; reshape itself refuses other negatives, naming them.
std::int64_t reshape_size(py::handle h) {
  return int_arg(h, "reshape", "size", std::numeric_limits<std::int64_t>::min(),
                 std::numeric_limits<std::int64_t>::max());
}

Shape sizes_from_args(const py::args& args, const char* what) {
  if (args.size() == 1 && PyIndex_Check(args[0].ptr()) == 0) return to_shape(args[0], what);
  return to_shape(args, what);
}

py::tuple shape_tuple(const Shape& shape) {
  py::tuple t(shape.size());
  for (std::size_t i = 0; i < shape.size(); ++i) t[i] = py::int_(shape[i]);
  return t;
}

std::vector<py::ssize_t> byte_strides(const Tensor& t) {
  std::vector<py::ssize_t> out;
  for (auto s : t.strides()) out.push_back(static_cast<py::ssize_t>(s * t.element_size()));
  return out;
}

// ---------------------------------------------------------------------------------------------
// Host access, with the GIL released while the pending work finishes (it may need the GIL).


void* host_pointer(const Tensor& t, bool writable) {
  wait_tensor(t, writable);
  py::gil_scoped_release release;
  if (writable) return const_cast<Tensor&>(t).data_ptr();
  return const_cast<void*>(t.data_ptr());
}

py::array as_numpy(py::object self, bool writable) {
  const Tensor& t = self.cast<const Tensor&>();
  void* p = host_pointer(t, writable);
  std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end());
  // The array's base is the Python tensor: the storage lives while the array does.
  py::array arr(numpy_dtype(t.dtype()), shape, byte_strides(t), p, self);
  if (!writable) arr.attr("setflags")("write"_a = false);
  return arr;
}

// ---------------------------------------------------------------------------------------------
// Importing memory without copying.

// Keeps a Python object alive for as long as the tensor's storage needs its memory.
std::function<void(void*)> keep_alive(py::object owner) {
  auto holder = std::make_shared<SafeObject>(std::move(owner));
  return [holder](void*) { holder->reset(); };  // any thread; see SafeObject
}

// A from_blob() Error's message for an import: the Python caller never called from_blob.
std::string without_from_blob(std::string message) {
  constexpr std::string_view kPrefix = "from_blob: ";
  if (message.rfind(kPrefix, 0) == 0) message.erase(0, kPrefix.size());
  return python_spelling(std::move(message));
}

Tensor from_numpy_impl(py::handle obj, bool allow_readonly, const char* what) {
  if (!py::isinstance<py::array>(obj)) {
    throw py::type_error(std::string(what) + ": expected a numpy.ndarray, got " + type_name(obj));
  }
  auto arr = py::reinterpret_borrow<py::array>(obj);
  const std::string name = py::str(arr.dtype().attr("name"));
  const auto dtype = dtype_from_name(name);
  if (!dtype) {
    throw py::type_error(std::string(what) + ": numpy dtype " + name +
                         " is not supported; use float32, float64, int32 or int64 (convert with "
                         "arr.astype(...) or streamrt.asarray(arr, dtype=...))");
  }
  if (arr.ndim() > kMaxDims) {
    throw py::value_error(std::string(what) + ": at most " + std::to_string(kMaxDims) +
                          " dimensions, got " + std::to_string(arr.ndim()));
  }
  const int flags = py::detail::array_proxy(arr.ptr())->flags;
  if ((flags & py::detail::npy_api::NPY_ARRAY_ALIGNED_) == 0) {
    throw py::value_error(std::string(what) +
                          ": the array is not aligned for its dtype, so its memory cannot be "
                          "shared; pass a.copy(), or use streamrt.asarray(a) (which copies)");
  }
  if (!allow_readonly && (flags & py::detail::npy_api::NPY_ARRAY_WRITEABLE_) == 0) {
    throw py::value_error(std::string(what) +
                          ": the array is read-only and a tensor sharing its memory could be "
                          "written; pass a.copy(), or use streamrt.asarray(a) (which copies)");
  }
  // Any strided view is shared as it is (transposed, stepped, reversed, broadcast), as numpy
  // and torch views share their base; byte strides become element strides.
  const auto itemsize = static_cast<py::ssize_t>(element_size(*dtype));
  Shape shape(arr.shape(), arr.shape() + arr.ndim());
  Shape strides;
  for (py::ssize_t d = 0; d < arr.ndim(); ++d) {
    const py::ssize_t bytes = arr.strides()[d];
    if (bytes % itemsize != 0) {
      throw py::value_error(std::string(what) + ": stride " + std::to_string(bytes) +
                            " bytes of dimension " + std::to_string(d) +
                            " is not a multiple of the element size (" + std::to_string(itemsize) +
                            "), so its memory cannot be shared; pass a.copy(), or use "
                            "streamrt.asarray(a) (which copies)");
    }
    strides.push_back(bytes / itemsize);
  }
  void* data = const_cast<void*>(arr.data());
  try {
    return from_blob(data, std::move(shape), std::move(strides), *dtype, keep_alive(arr));
  } catch (const Error& e) {
    // Overlapping strides (np.lib.stride_tricks.as_strided windows): not shareable.
    throw py::value_error(std::string(what) + ": " + without_from_blob(e.what()) +
                          " (streamrt.asarray(a) copies)");
  }
}

// Calls a DLPack producer's deleter with the GIL (numpy's drops a reference), from any thread.
class ManagedOwner {
 public:
  explicit ManagedOwner(dlpack::DLManagedTensor* m) noexcept : managed(m) {}
  ManagedOwner(const ManagedOwner&) = delete;
  ManagedOwner& operator=(const ManagedOwner&) = delete;
  ~ManagedOwner() {
    call_with_gil(
        [](void* p) {
          auto* m = static_cast<dlpack::DLManagedTensor*>(p);
          if (m->deleter != nullptr) m->deleter(m);
        },
        managed);
  }

 private:
  dlpack::DLManagedTensor* managed;
};

std::optional<DType> dtype_from_dlpack(const dlpack::DLDataType& t) {
  if (t.lanes != 1) return std::nullopt;
  if (t.code == dlpack::kDLFloat && t.bits == 32) return DType::Float32;
  if (t.code == dlpack::kDLFloat && t.bits == 64) return DType::Float64;
  if (t.code == dlpack::kDLInt && t.bits == 32) return DType::Int32;
  if (t.code == dlpack::kDLInt && t.bits == 64) return DType::Int64;
  if (t.code == dlpack::kDLBool && t.bits == 8) return DType::Bool;
  return std::nullopt;
}

Tensor from_dlpack_impl(py::handle obj) {
  const char* what = "from_dlpack";
  if (py::isinstance<Tensor>(obj)) return obj.cast<Tensor>();
  py::object capsule;
  Tensor tracker;  // set when the memory is a torch storage that streamrt.torch tracks
  if (py::hasattr(obj, "__dlpack__")) {
    if (py::hasattr(obj, "__dlpack_device__")) {
      auto dev = obj.attr("__dlpack_device__")().cast<std::pair<int, int>>();
      if (dev.first != dlpack::kDLCPU) {
        // streamrt.Error, as for any tensor on a device this build has no tensors for.
        throw Error(std::string(what) + ": the tensor is on DLPack device type " +
                    std::to_string(dev.first) + (dev.first == 2 ? " (cuda)" : "") +
                    ", and tensors on devices other than the CPU are not supported in this "
                    "build; move it to the CPU first (torch: t.cpu())");
      }
    }
    capsule = dlpack_capsule(obj, tracker);
  } else if (PyCapsule_CheckExact(obj.ptr()) != 0) {
    capsule = py::reinterpret_borrow<py::object>(obj);
  } else {
    throw py::type_error(std::string(what) +
                         ": expected an object with __dlpack__ (numpy array, torch tensor, ...) "
                         "or a DLPack capsule, got " +
                         type_name(obj));
  }
  if (PyCapsule_IsValid(capsule.ptr(), dlpack::kCapsuleName) == 0) {
    throw py::value_error(std::string(what) +
                          ": the DLPack capsule was already consumed (a capsule can be imported "
                          "once; call __dlpack__() again)");
  }
  auto* m = static_cast<dlpack::DLManagedTensor*>(
      PyCapsule_GetPointer(capsule.ptr(), dlpack::kCapsuleName));
  const dlpack::DLTensor& t = m->dl_tensor;
  if (t.device.device_type != dlpack::kDLCPU) {
    throw Error(std::string(what) + ": DLPack device type " +
                std::to_string(t.device.device_type) +
                " is not the CPU (1): tensors on other devices are not supported in this build");
  }
  const auto dtype = dtype_from_dlpack(t.dtype);
  if (!dtype) {
    throw py::type_error(std::string(what) + ": DLPack dtype (code " +
                         std::to_string(t.dtype.code) + ", bits " + std::to_string(t.dtype.bits) +
                         ", lanes " + std::to_string(t.dtype.lanes) + ") is not supported; use " +
                         kSupportedDTypes);
  }
  if (t.ndim < 0 || t.ndim > kMaxDims) {
    throw py::value_error(std::string(what) + ": at most " + std::to_string(kMaxDims) +
                          " dimensions, got " + std::to_string(t.ndim));
  }
  Shape shape(t.shape, t.shape + t.ndim);
  // No strides (DLPack's null): compact row-major. Otherwise any strided layout is shared as it
  // is (element strides, possibly negative or 0), as numpy's and torch's views share their base.
  Shape strides =
      t.strides != nullptr ? Shape(t.strides, t.strides + t.ndim) : contiguous_strides(shape);
  void* data = static_cast<char*>(t.data) + t.byte_offset;
  // Checked before the capsule is taken: a refused capsule stays the producer's to free.
  Tensor probe;
  try {
    probe = from_blob(data, shape, strides, *dtype);
  } catch (const Error& e) {
    throw py::value_error(std::string(what) + ": " + without_from_blob(e.what()) +
                          " (streamrt.asarray copies)");
  }
  // Ours from here: the producer's capsule must no longer free it.
  PyCapsule_SetName(capsule.ptr(), dlpack::kUsedCapsuleName);
  auto owner = std::make_shared<ManagedOwner>(m);
  Tensor out = from_blob(data, std::move(shape), std::move(strides), *dtype, [owner](void*) {});
  if (tracker.defined()) share_tracking(out, tracker);  // one tracking with torch's ops
  return out;
}

// Exporting: the capsule owns a handle to the tensor (so its storage), shape and strides.
struct DLPackExport {
  Tensor tensor;
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;
  dlpack::DLManagedTensor managed{};
};

void delete_export(dlpack::DLManagedTensor* m) {
  delete static_cast<DLPackExport*>(m->manager_ctx);
}

void capsule_destructor(PyObject* capsule) {
  // Still named "dltensor": nobody consumed it, so it is ours to free.
  if (PyCapsule_IsValid(capsule, dlpack::kCapsuleName) == 0) return;
  auto* m =
      static_cast<dlpack::DLManagedTensor*>(PyCapsule_GetPointer(capsule, dlpack::kCapsuleName));
  if (m != nullptr) m->deleter(m);
}

py::object to_dlpack(const Tensor& t, py::object stream) {
  if (!stream.is_none()) {
    throw py::value_error(
        "Tensor.__dlpack__: stream must be None for CPU tensors (there is nothing to order: "
        "the export waits for the tensor's pending work)");
  }
  void* data = host_pointer(t, /*writable=*/true);  // the consumer may write
  auto ctx = std::make_unique<DLPackExport>();
  ctx->tensor = t;
  ctx->shape = t.shape();
  ctx->strides = t.strides();
  auto& dl = ctx->managed.dl_tensor;
  dl.data = data;
  dl.device = {dlpack::kDLCPU, t.device().index};
  dl.ndim = t.dim();
  const bool floating = is_floating(t.dtype());
  dl.dtype = {t.dtype() == DType::Bool ? dlpack::kDLBool
              : floating               ? dlpack::kDLFloat
                                       : dlpack::kDLInt,
              static_cast<std::uint8_t>(t.element_size() * 8), 1};
  dl.shape = ctx->shape.data();
  dl.strides = ctx->strides.data();
  dl.byte_offset = 0;
  ctx->managed.manager_ctx = ctx.get();
  ctx->managed.deleter = &delete_export;
  PyObject* cap = PyCapsule_New(&ctx->managed, dlpack::kCapsuleName, &capsule_destructor);
  if (cap == nullptr) throw py::error_already_set();
  ctx.release();  // owned by the capsule (or its consumer) now
  return py::reinterpret_steal<py::object>(cap);
}

// ---------------------------------------------------------------------------------------------
// Any tensor-like argument: a Tensor, a numpy array, a DLPack or buffer object, nested lists.

bool is_scalar(py::handle obj) {
  PyObject* o = obj.ptr();
  if (PyFloat_Check(o)) return true;
  if (PyLong_Check(o)) return !PyBool_Check(o);
  // Tensors first: they are the common operand, and need no numpy.
  if (PyObject_TypeCheck(o, g_tensor_info->type) != 0) return false;
  numpy();
  const int r = PyObject_IsInstance(o, g_numpy_generic);
  if (r < 0) throw py::error_already_set();
  return r == 1;
}

// Python data (lists, scalars): floats become float32 (torch's default dtype), ints int64.
py::array array_from_python(py::handle obj, std::optional<DType> dtype, const char* what) {
  py::object arr;
  if (dtype) {
    arr = numpy().attr("array")(obj, "dtype"_a = numpy_dtype(*dtype), "order"_a = "C");
  } else {
    arr = numpy().attr("array")(obj, "order"_a = "C");
    const std::string kind = py::str(arr.attr("dtype").attr("kind"));
    if (kind == "f") arr = arr.attr("astype")(numpy_dtype(DType::Float32));
    if (kind == "i" || kind == "u") {
      const std::string name = py::str(arr.attr("dtype").attr("name"));
      if (!dtype_from_name(name)) arr = arr.attr("astype")(numpy_dtype(DType::Int64));
    }
    if (kind == "c" || kind == "O" || kind == "U" || kind == "S") {
      throw py::type_error(std::string(what) + ": cannot make a tensor of " +
                           std::string(py::str(arr.attr("dtype"))) + " values from " +
                           type_name(obj) + "; supported dtypes are " + kSupportedDTypes);
    }
  }
  return py::reinterpret_steal<py::array>(arr.release());
}

// asarray semantics. copy: None = share when possible, True = always copy, False = never copy.
Tensor asarray_impl(py::handle obj, std::optional<DType> dtype, std::optional<bool> copy,
                    bool allow_readonly, const char* what) {
  if (py::isinstance<Tensor>(obj)) {
    Tensor t = obj.cast<Tensor>();
    if (dtype && *dtype != t.dtype()) {
      if (copy == false) {
        throw py::value_error(std::string(what) + ": converting " +
                              std::string(to_string(t.dtype())) + " to " +
                              std::string(to_string(*dtype)) + " needs a copy, but copy=False");
      }
      py::gil_scoped_release release;
      return t.to(*dtype);
    }
    if (copy == true) {
      py::gil_scoped_release release;
      return t.clone();
    }
    return t;
  }
  const bool is_array = py::isinstance<py::array>(obj);
  const bool python_data =
      !is_array && !py::hasattr(obj, "__dlpack__") && PyObject_CheckBuffer(obj.ptr()) == 0;
  if (copy != true && !python_data) {
    // Share memory when the layout and dtype allow it.
    py::object source = py::reinterpret_borrow<py::object>(obj);
    if (!is_array && py::hasattr(obj, "__dlpack__")) {
      try {
        Tensor t = from_dlpack_impl(obj);
        if (!dtype || *dtype == t.dtype()) return t;
        source = as_numpy(py::cast(t), true);  // wrong dtype: convert below
      } catch (const py::error_already_set&) {
        if (copy == false) throw;
      } catch (const py::builtin_exception&) {
        if (copy == false) throw;
      }
    } else if (!is_array) {
      source = numpy().attr("asarray")(obj);  // the buffer protocol, no copy
    }
    if (py::isinstance<py::array>(source)) {
      auto arr = py::reinterpret_borrow<py::array>(source);
      const std::string name = py::str(arr.dtype().attr("name"));
      const auto have = dtype_from_name(name);
      const int flags = py::detail::array_proxy(arr.ptr())->flags;
      const bool shareable =
          have && (!dtype || *dtype == *have) && arr.ndim() <= kMaxDims &&
          (flags & py::detail::npy_api::NPY_ARRAY_ALIGNED_) != 0 &&
          (allow_readonly || (flags & py::detail::npy_api::NPY_ARRAY_WRITEABLE_) != 0);
      // Strided views are shared too; from_numpy refuses only layouts whose elements overlap
      // (or strides that are not whole elements), and those are copied.
      std::string refused;
      if (shareable) {
        try {
          return from_numpy_impl(arr, allow_readonly, what);
        } catch (const py::value_error& e) {
          refused = std::string(" (") + e.what() + ")";
        }
      }
      if (copy == false) {
        throw py::value_error(std::string(what) + ": the memory cannot be shared (dtype " + name +
                              (dtype ? " requested " + std::string(to_string(*dtype)) : "") +
                              ", or not aligned/writable, or overlapping elements) and "
                              "copy=False" +
                              refused);
      }
      if (!have && !dtype) {
        throw py::type_error(std::string(what) + ": dtype " + name + " is not supported; use " +
                             kSupportedDTypes + " (pass dtype= to convert)");
      }
      py::object copied = numpy().attr("array")(
          arr, "dtype"_a = numpy_dtype(dtype ? *dtype : *have), "order"_a = "C", "copy"_a = true);
      return from_numpy_impl(copied, false, what);
    }
  }
  if (copy == false) {
    throw py::value_error(std::string(what) + ": a " + type_name(obj) +
                          " has no memory to share, and copy=False");
  }
  if (is_array || !python_data) {
    py::object arr = numpy().attr("asarray")(obj);
    const std::string name = py::str(arr.attr("dtype").attr("name"));
    auto have = dtype_from_name(name);
    if (!have && !dtype) {
      throw py::type_error(std::string(what) + ": dtype " + name + " is not supported; use " +
                           kSupportedDTypes + " (pass dtype= to convert)");
    }
    py::object copied = numpy().attr("array")(arr, "dtype"_a = numpy_dtype(dtype ? *dtype : *have),
                                              "order"_a = "C", "copy"_a = true);
    return from_numpy_impl(copied, false, what);
  }
  return from_numpy_impl(array_from_python(obj, dtype, what), false, what);
}

// An op's operand: tensors as they are, anything else shared (or converted) into a tensor the
// op only reads, so read-only memory is fine.
Tensor operand(py::handle obj, const char* what) {
  if (const Tensor* t = borrowed_tensor(obj)) return *t;
  if (py::isinstance<Tensor>(obj)) return obj.cast<Tensor>();  // not initialized: cast raises
  if (py::isinstance<py::array>(obj) || py::hasattr(obj, "__dlpack__") ||
      PyObject_CheckBuffer(obj.ptr()) != 0 || py::isinstance<py::list>(obj) ||
      py::isinstance<py::tuple>(obj)) {
    return asarray_impl(obj, std::nullopt, std::nullopt, /*allow_readonly=*/true, what);
  }
  throw py::type_error(std::string(what) +
                       ": expected a streamrt.Tensor, a numpy array, or an object with "
                       "__dlpack__ or the buffer protocol, got " +
                       type_name(obj));
}

// The device of a new tensor: streamrt.Error (not the ValueError of an argument error) for a
// device this build has no tensors for, as for any such device.
Device tensor_device(py::handle obj, const char* what) {
  const Device d = to_device(obj, what);
  if (d.type != DeviceType::CPU) {
    throw Error(std::string(what) + ": tensors on " + d.str() +
                " are not supported in this build: only CPU tensors (device=\"cpu\")");
  }
  return d;
}

// Runs an enqueueing op with the GIL released (ops that may wait, or not known not to). Its
// Errors are argument errors, so they become ValueError.
template <class F>
Tensor enqueue(const char* what, F&& f) {
  return launch_op(what, [&] {
    py::gil_scoped_release release;
    return f();
  });
}

// An arithmetic operator: its names, the op on two tensors, on a tensor and a number, on a number
// and a tensor.
struct Arithmetic {
  const char* name;
  const char* dunder;
  const char* reflected;
  Tensor (*tensors)(const Tensor&, const Tensor&);
  Tensor (*tensor_scalar)(const Tensor&, double);
  Tensor (*scalar_tensor)(double, const Tensor&);
};

// The operator `Op` (std::plus<> ...) on tensors and numbers, as streamrt's C++ operators.
template <class Op>
constexpr Arithmetic arithmetic(const char* name, const char* dunder, const char* reflected) {
  return {name,
          dunder,
          reflected,
          [](const Tensor& x, const Tensor& y) { return Op()(x, y); },
          [](const Tensor& x, double s) { return Op()(x, s); },
          [](double s, const Tensor& y) { return Op()(s, y); }};
}

constexpr Arithmetic kAdd = arithmetic<std::plus<>>("add", "__add__", "__radd__");
constexpr Arithmetic kSub = arithmetic<std::minus<>>("sub", "__sub__", "__rsub__");
constexpr Arithmetic kMul = arithmetic<std::multiplies<>>("mul", "__mul__", "__rmul__");
constexpr Arithmetic kDiv = arithmetic<std::divides<>>("div", "__truediv__", "__rtruediv__");

// a op b, where at most one is a Python number (torch's promotion against it).
Tensor binary(const Arithmetic& op, py::handle a, py::handle b) {
  const char* what = op.name;
  const bool a_scalar = is_scalar(a);
  const bool b_scalar = is_scalar(b);
  if (a_scalar && b_scalar) {
    throw py::type_error(std::string(what) + ": at least one operand must be a tensor");
  }
  if (a_scalar || b_scalar) {
    py::handle scalar = a_scalar ? a : b;
    Operand t(a_scalar ? b : a, what);
    t.promote_for(scalar);
    const double s = float_arg(scalar, what, "scalar");
    return launch_op(what,
                     [&] { return a_scalar ? op.scalar_tensor(s, *t) : op.tensor_scalar(*t, s); });
  }
  Operand x(a, what);
  Operand y(b, what);
  return launch_op(what, [&] { return op.tensors(*x, *y); });
}

// For operators: NotImplemented when the other operand is not tensor-like, so Python can try the
// other side's reflected method.
py::object binary_operator(const Arithmetic& op, py::handle a, py::handle b) {
  try {
    return wrap_tensor(binary(op, a, b));
  } catch (const py::type_error&) {
    return py::reinterpret_borrow<py::object>(Py_NotImplemented);
  }
}

template <const Arithmetic* Op, bool Reflected>
py::object arithmetic_method(py::handle self, py::handle other) {
  return Reflected ? binary_operator(*Op, other, self) : binary_operator(*Op, self, other);
}

template <const Arithmetic* Op>
void def_arithmetic(py::handle cls) {
  constexpr const char* doc =
      "Element-wise, on the current stream (the other side may be a number or tensor-like); "
      "NotImplemented for anything else.";
  def_direct<arithmetic_method<Op, false>>(cls, Op->dunder, doc);
  def_direct<arithmetic_method<Op, true>>(cls, Op->reflected, doc);
}

py::object matmul_operator(py::handle a, py::handle b) {
  Tensor x, y;
  try {
    x = operand(a, "matmul");
    y = operand(b, "matmul");
  } catch (const py::type_error&) {
    return py::reinterpret_borrow<py::object>(Py_NotImplemented);
  }
  return py::cast(enqueue("matmul", [&] { return matmul(x, y); }));
}

void check_same_dtype(const Tensor& a, const Tensor& b, const char* what) {
  if (a.dtype() != b.dtype()) {
    throw py::value_error(std::string(what) + ": the tensors differ: " + to_string(a.shape()) +
                          " " + std::string(to_string(a.dtype())) + " vs " + to_string(b.shape()) +
                          " " + std::string(to_string(b.dtype())) + " (same dtype needed)");
  }
}

py::object item_of(const Tensor& t) {
  if (t.numel() != 1) {
    throw py::value_error(
        "Tensor.item: only a one-element tensor has an item; this one has shape " +
        to_string(t.shape()));
  }
  switch (t.dtype()) {
    case DType::Float32: {
      float v;
      {
        wait_tensor(t, false);
        py::gil_scoped_release release;
        v = t.item<float>();
      }
      return py::float_(v);
    }
    case DType::Float64: {
      double v;
      {
        wait_tensor(t, false);
        py::gil_scoped_release release;
        v = t.item<double>();
      }
      return py::float_(v);
    }
    case DType::Int32: {
      std::int32_t v;
      {
        wait_tensor(t, false);
        py::gil_scoped_release release;
        v = t.item<std::int32_t>();
      }
      return py::int_(v);
    }
    case DType::Int64: {
      std::int64_t v;
      {
        wait_tensor(t, false);
        py::gil_scoped_release release;
        v = t.item<std::int64_t>();
      }
      return py::int_(v);
    }
    case DType::Bool: {
      bool v;
      {
        wait_tensor(t, false);
        py::gil_scoped_release release;
        v = t.item<bool>();
      }
      return py::bool_(v);
    }
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

// ---------------------------------------------------------------------------------------------
// Random numbers: seed=, generator=, else the default generator (as torch's).

// A seed: an integer from 0 to 2**64 - 1 (TypeError or ValueError naming `what` otherwise).
std::uint64_t to_seed(py::handle seed, const char* what) {
  if (PyIndex_Check(seed.ptr()) == 0 || PyBool_Check(seed.ptr()) != 0) {
    throw py::type_error(std::string(what) + ": seed must be an integer, got " + type_name(seed));
  }
  const auto s = py::reinterpret_steal<py::object>(PyNumber_Index(seed.ptr()));
  if (!s) throw py::error_already_set();
  const unsigned long long v = PyLong_AsUnsignedLongLong(s.ptr());
  if (v == static_cast<unsigned long long>(-1) && PyErr_Occurred() != nullptr) {
    PyErr_Clear();
    throw py::value_error(std::string(what) + ": seed=" + std::string(py::str(s)) +
                          " is out of range; it must be from 0 to 18446744073709551615 (2**64 - 1)");
  }
  return v;
}

Generator& default_generator() {
  static auto* g = new Generator(0);  // leaked: shared with Python, used until exit
  return *g;
}

Tensor random_tensor(bool normal, const py::args& size, py::object dtype, py::object seed,
                     py::object generator, py::object device) {
  const char* what = normal ? "randn" : "rand";
  const Shape shape = sizes_from_args(size, what);
  const DType d = to_dtype_or(dtype, DType::Float32, what);
  const Device dev = tensor_device(device, what);
  if (!seed.is_none() && !generator.is_none()) {
    throw py::value_error(std::string(what) + ": pass seed= or generator=, not both");
  }
  if (!seed.is_none()) {
    const std::uint64_t v = to_seed(seed, what);
    return enqueue(what, [&] { return normal ? randn(shape, v, d, dev) : rand(shape, v, d, dev); });
  }
  if (!generator.is_none() && !py::isinstance<Generator>(generator)) {
    throw py::type_error(std::string(what) + ": generator must be a streamrt.Generator, got " +
                         type_name(generator));
  }
  Generator g = generator.is_none() ? default_generator() : generator.cast<Generator>();
  return enqueue(what, [&] { return normal ? randn(shape, g, d, dev) : rand(shape, g, d, dev); });
}

// ---------------------------------------------------------------------------------------------
// Context managers for the dependency-tracking guard (thread-local, entered and exited on one
// thread).

thread_local std::vector<std::unique_ptr<DependencyTrackingGuard>> tls_tracking;

struct PyTrackingScope {
  bool enabled;
};

}  // namespace

void wait_tensor(const Tensor& t, bool writable) {
  if (t.ready() && !writable) return;
  wait_interruptibly([&](std::chrono::nanoseconds slice) { return t.wait_for(slice, writable); });
}

void wait_current_stream() {
  Stream s = current_stream();
  if (s.query()) return;
  const Event end = s.record_event();
  wait_interruptibly([&](std::chrono::nanoseconds slice) { return end.wait_for(slice); });
}

Tensor tensor_operand(py::handle obj, const char* what) {
  return operand(obj, what);
}
bool is_python_scalar(py::handle obj) {
  return is_scalar(obj);
}
DType scalar_promoted_dtype(DType d, py::handle scalar) {
  PyObject* o = scalar.ptr();
  bool float_scalar = PyFloat_Check(o);
  if (!float_scalar && !PyLong_Check(o)) {
    numpy();
    const int r = PyObject_IsInstance(o, g_numpy_floating);
    if (r < 0) throw py::error_already_set();
    float_scalar = r == 1;
  }
  if (float_scalar && !is_floating(d)) return DType::Float32;
  if (!float_scalar && d == DType::Bool) return DType::Int64;
  return d;
}

Operand::Operand(py::handle obj, const char* what) : tensor_(borrowed_tensor(obj)) {
  if (tensor_ == nullptr) tensor_ = &owned_.emplace(operand(obj, what));
}

void Operand::promote_for(py::handle scalar) {
  const DType want = scalar_promoted_dtype(tensor_->dtype(), scalar);
  if (want == tensor_->dtype()) return;
  Tensor converted = tensor_->to(want);
  tensor_ = &owned_.emplace(std::move(converted));
}

PyObject* raise_current_exception() noexcept {
  if (py::detail::apply_exception_translators(
          py::detail::get_local_internals().registered_exception_translators)) {
    return nullptr;
  }
  if (py::detail::apply_exception_translators(
          py::detail::get_internals().registered_exception_translators)) {
    return nullptr;
  }
  PyErr_SetString(PyExc_SystemError, "an exception escaped pybind11's exception translators");
  return nullptr;
}

void add_direct_method(py::handle cls, const char* name, PyCFunction entry, int flags,
                       const char* doc) {
  // Leaked: the method descriptor points at it for as long as the class lives.
  auto* def = new PyMethodDef{name, entry, flags, doc};
  auto method = py::reinterpret_steal<py::object>(
      PyDescr_NewMethod(reinterpret_cast<PyTypeObject*>(cls.ptr()), def));
  if (!method) throw py::error_already_set();
  cls.attr(name) = method;
}

py::value_error op_error(const char* what, const Error& e) {
  std::string message = python_spelling(e.what());
  if (message.rfind(what, 0) != 0) message = std::string(what) + ": " + message;
  return py::value_error(message);
}
DType dtype_arg(py::handle obj, const char* what) {
  return to_dtype(obj, what);
}
py::tuple shape_to_tuple(const Shape& shape) {
  return shape_tuple(shape);
}
Tensor run_op(const char* what, const std::function<Tensor()>& f) {
  return enqueue(what, f);
}

void bind_tensor(py::module_& m) {
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

  py::class_<Generator>(m, "Generator",
                        "Random numbers for rand/randn: a seed and an offset into a counter-based "
                        "sequence; copies share the offset.")
      .def(py::init([](py::object seed) { return Generator(to_seed(seed, "Generator")); }),
           "seed"_a = 0)
      .def_property_readonly("seed", &Generator::seed)
      .def_property_readonly("offset", &Generator::offset)
      .def(
          "manual_seed",
          [](py::object self, py::object seed) {
            self.cast<Generator&>().manual_seed(to_seed(seed, "Generator.manual_seed"));
            return self;
          },
          "seed"_a, "Restarts the sequence of `seed`; returns the generator.")
      .def("__repr__", [](const Generator& g) {
        return "streamrt.Generator(seed=" + std::to_string(g.seed()) +
               ", offset=" + std::to_string(g.offset()) + ")";
      });
  m.attr("default_generator") = py::cast(default_generator());
  m.def(
      "manual_seed",
      [](py::object seed) { default_generator().manual_seed(to_seed(seed, "manual_seed")); },
      "seed"_a,
      "Seeds the default generator used by rand/randn without seed= or generator=.");

  py::class_<Tensor>(m, "Tensor", py::buffer_protocol(),
                     "A strided tensor whose ops run on streams. Copies and views (transpose, "
                     "slicing, expand) share storage and its dependency tracking. Reading it on "
                     "the host (numpy(), the buffer "
                     "protocol, __dlpack__, item()) first waits for the work that writes it.")
      .def_property_readonly("shape", [](const Tensor& t) { return shape_tuple(t.shape()); })
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
            const auto dim = int_arg(d, "Tensor.size", "dim", std::numeric_limits<int>::min(),
                                     std::numeric_limits<int>::max(), PyExc_IndexError);
            if (dim < -t.dim() || dim >= t.dim()) {
              throw py::index_error("Tensor.size: dimension " + std::to_string(dim) +
                                    " is out of range for a " + std::to_string(t.dim()) +
                                    "-dimensional tensor");
            }
            return py::int_(t.size(dim));
          },
          "dim"_a = py::none())
      .def("__len__",
           [](const Tensor& t) {
             if (t.dim() == 0) throw py::type_error("len() of a 0-d tensor");
             return t.shape()[0];
           })
      .def("numpy", &as_numpy, "writable"_a = true,
           "The tensor's memory as a numpy array, without copying. Waits (GIL released) for the "
           "queued work that writes the tensor, and, when writable, also for the work that reads "
           "it (the host may then write).")
      .def(
          "__array__",
          [](py::object self, py::object dtype, py::object copy) -> py::object {
            py::object arr = as_numpy(self, true);
            if (!dtype.is_none()) arr = arr.attr("astype")(dtype);
            if (!copy.is_none() && copy.cast<bool>()) arr = arr.attr("copy")();
            return arr;
          },
          "dtype"_a = py::none(), "copy"_a = py::none())
      .def("__dlpack__", &to_dlpack, "stream"_a = py::none(),
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
               throw py::type_error("only integer tensors of a single element can be converted "
                                    "to an index");
             }
             return item_of(t);
           })
      .def(
          "data_ptr",
          [](const Tensor& t) { return reinterpret_cast<std::uintptr_t>(t.data_ptr_unsafe()); },
          "Address of the first element (no wait, as torch).")
      .def(
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
      .def(
          "reshape",
          [](const Tensor& t, py::args shape) {
            Shape s;
            if (shape.size() == 1 && PyIndex_Check(shape[0].ptr()) == 0) {
              for (py::handle h : shape[0]) s.push_back(reshape_size(h));
            } else {
              for (py::handle h : shape) s.push_back(reshape_size(h));
            }
            return enqueue("reshape", [&] { return t.reshape(std::move(s)); });
          },
          "A view with another shape (one size may be -1).")
      .def("clone", [](const Tensor& t) { return enqueue("clone", [&] { return t.clone(); }); })
      .def(
          "to",
          [](const Tensor& t, py::object dtype) {
            const DType d = to_dtype(dtype, "Tensor.to");
            return enqueue("to", [&] { return t.to(d); });
          },
          "dtype"_a)
      .def(
          "copy_",
          [](py::object self, py::object src) {
            Tensor& t = self.cast<Tensor&>();
            Tensor s = operand(src, "copy_");
            enqueue("copy_", [&] { return t.copy_(s); });
            return self;
          },
          "src"_a, "Copies `src` into this tensor on the current stream; returns self.")
      .def(
          "fill_",
          [](py::object self, py::object value_arg) {
            Tensor& t = self.cast<Tensor&>();
            const double value = float_arg(value_arg, "fill_", "value");
            enqueue("fill_", [&] { return t.fill_(value); });
            return self;
          },
          "value"_a, "Sets every element on the current stream; returns self.")
      .def("shares_storage", &Tensor::shares_storage, "other"_a)
      .def("__matmul__", [](py::object a, py::object b) { return matmul_operator(a, b); })
      .def("__rmatmul__", [](py::object a, py::object b) { return matmul_operator(b, a); })
      .def("__repr__", &tensor_repr);
  // numpy must not handle `ndarray + tensor` itself (through __array__): give it to Tensor.
  m.attr("Tensor").attr("__array_ufunc__") = py::none();
  enable_tensor_buffer(m.attr("Tensor"));
  g_tensor_info = py::detail::get_type_info(typeid(Tensor));
  for (auto def : {def_arithmetic<&kAdd>, def_arithmetic<&kSub>, def_arithmetic<&kMul>,
                   def_arithmetic<&kDiv>}) {
    def(m.attr("Tensor"));
  }

  m.def(
      "from_numpy", [](py::object arr) { return from_numpy_impl(arr, false, "from_numpy"); },
      "array"_a,
      "A tensor sharing the memory of an aligned, writable numpy array, with its strides (views "
      "included: transposed, stepped, reversed).");
  m.def(
      "from_dlpack", [](py::object obj) { return from_dlpack_impl(obj); }, "obj"_a,
      "A tensor sharing the memory of a DLPack producer (numpy array, torch CPU tensor, capsule), "
      "with its strides (views included).");
  m.def(
      "asarray",
      [](py::object obj, py::object dtype, py::object copy) {
        std::optional<DType> d;
        if (!dtype.is_none()) d = to_dtype(dtype, "asarray");
        std::optional<bool> c;
        if (!copy.is_none()) c = copy.cast<bool>();
        return asarray_impl(obj, d, c, false, "asarray");
      },
      "obj"_a, "dtype"_a = py::none(), "copy"_a = py::none(),
      "A tensor from `obj`, sharing its memory when possible (copy=None), always copying "
      "(copy=True), or never copying (copy=False: ValueError when it must).");
  m.def(
      "tensor",
      [](py::object obj, py::object dtype) {
        std::optional<DType> d;
        if (!dtype.is_none()) d = to_dtype(dtype, "tensor");
        return asarray_impl(obj, d, true, false, "tensor");
      },
      "data"_a, "dtype"_a = py::none(), "A new tensor with a copy of `data`.");

  auto creation = [&m](const char* name, auto make, const char* doc) {
    m.def(
        name,
        [name, make](py::args size, py::object dtype, py::object device) {
          const Shape shape = sizes_from_args(size, name);
          const DType d = to_dtype_or(dtype, DType::Float32, name);
          const Device dev = tensor_device(device, name);
          return enqueue(name, [&] { return make(shape, d, dev); });
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
        return enqueue("full", [&] { return full(shape, value, d, dev); });
      },
      "size"_a, "fill_value"_a, "dtype"_a = py::none(), "device"_a = py::none());
  m.def(
      "arange",
      [](py::object end, py::object dtype, py::object device) {
        const auto n = int_arg(end, "arange", "end", 0, std::numeric_limits<std::int64_t>::max());
        const DType d = to_dtype_or(dtype, DType::Int64, "arange");
        const Device dev = tensor_device(device, "arange");
        return enqueue("arange", [&] { return arange(n, d, dev); });
      },
      "end"_a, "dtype"_a = py::none(), "device"_a = py::none());
  m.def(
      "randn",
      [](py::args size, py::object dtype, py::object seed, py::object generator,
         py::object device) { return random_tensor(true, size, dtype, seed, generator, device); },
      "dtype"_a = py::none(), "seed"_a = py::none(), "generator"_a = py::none(),
      "device"_a = py::none(),
      "randn(*size, dtype=None, seed=None, generator=None, device=None): standard normal numbers "
      "on the current stream; the same seed gives the same numbers on any stream.");
  m.def(
      "rand",
      [](py::args size, py::object dtype, py::object seed, py::object generator,
         py::object device) { return random_tensor(false, size, dtype, seed, generator, device); },
      "dtype"_a = py::none(), "seed"_a = py::none(), "generator"_a = py::none(),
      "device"_a = py::none(), "As randn, uniform in [0, 1).");

  m.def(
      "matmul",
      [](py::object a, py::object b) {
        Tensor x = operand(a, "matmul");
        Tensor y = operand(b, "matmul");
        return enqueue("matmul", [&] { return matmul(x, y); });
      },
      "a"_a, "b"_a, "Matrix product on the current stream; returns at once.");
  for (const Arithmetic* op : {&kAdd, &kSub, &kMul, &kDiv}) {
    m.def(
        op->name, [op](py::object a, py::object b) { return binary(*op, a, b); }, "a"_a, "b"_a,
        "Element-wise, on the current stream (either side may be a number).");
  }
  m.def(
      "allclose",
      [](py::object a, py::object b, py::object rtol_arg, py::object atol_arg) {
        const double rtol = float_arg(rtol_arg, "allclose", "rtol");
        const double atol = float_arg(atol_arg, "allclose", "atol");
        // As numpy: either side may be a number (a 0-d operand broadcasts like any other).
        Tensor x = operand(is_scalar(a) ? numpy().attr("asarray")(a) : a, "allclose");
        Tensor y = operand(is_scalar(b) ? numpy().attr("asarray")(b) : b, "allclose");
        // Argument errors are ValueErrors; a Error from the wait below is a failure of the work
        // that produced an operand, and stays streamrt.Error.
        try {
          broadcast_shapes(x.shape(), y.shape());
        } catch (const Error& e) {
          throw py::value_error("allclose: " + python_spelling(e.what()));
        }
        if (!(rtol >= 0) || !(atol >= 0)) {
          throw py::value_error("allclose: rtol and atol must be >= 0 (got rtol=" +
                                std::to_string(rtol) + ", atol=" + std::to_string(atol) + ")");
        }
        if (x.device() != y.device()) {
          throw py::value_error("allclose: tensors are on different devices (" +
                                x.device().str() + " and " + y.device().str() + ")");
        }
        // Interruptibly first: the call below then waits only for its own small reduction.
        wait_tensor(x, false);
        wait_tensor(y, false);
        wait_current_stream();
        py::gil_scoped_release release;
        return allclose(x, y, rtol, atol);
      },
      "a"_a, "b"_a, "rtol"_a = 1e-5, "atol"_a = 1e-8,
      "True when |a - b| <= atol + rtol * |b| everywhere (numpy's allclose: the operands "
      "broadcast, dtypes may differ, NaN is never close). Waits (GIL released) for the answer.");
  m.def(
      "equal",
      [](py::object a, py::object b) {
        Tensor x = operand(a, "equal");
        Tensor y = operand(b, "equal");
        check_same_dtype(x, y, "equal");
        wait_tensor(x, false);
        wait_tensor(y, false);
        wait_current_stream();
        py::gil_scoped_release release;
        return equal(x, y);
      },
      "a"_a, "b"_a,
      "True when shapes and all elements are equal (numpy's array_equal: different shapes are "
      "not equal, no broadcasting). Waits (GIL released).");

  m.def("set_dependency_tracking", &set_dependency_tracking, "enabled"_a,
        "Process-wide default of automatic dependency tracking (on at start).");
  m.def("dependency_tracking", &dependency_tracking,
        "Whether ops issued by this thread now are tracked.");
  py::class_<PyTrackingScope>(m, "DependencyTracking",
                              "with DependencyTracking(False): ops issued by this thread in the "
                              "block are not tracked (CUDA-style manual ordering).")
      .def(py::init([](bool enabled) { return PyTrackingScope{enabled}; }), "enabled"_a)
      .def("__enter__",
           [](PyTrackingScope& s) {
             tls_tracking.push_back(std::make_unique<DependencyTrackingGuard>(s.enabled));
           })
      .def("__exit__", [](PyTrackingScope&, py::args) {
        if (tls_tracking.empty()) {
          throw Error("DependencyTracking.__exit__: this thread did not enter it");
        }
        tls_tracking.pop_back();
        return false;
      });

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

  auto fspath = [](py::object path) {
    return py::str(py::module_::import("os").attr("fspath")(path)).cast<std::string>();
  };
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
          [fspath](const Profiler& p, py::object path) { p.export_chrome_trace(fspath(path)); },
          "path"_a, "Writes Chrome trace-event JSON (Perfetto, chrome://tracing).")
      .def("timeline_svg", &streamrt_timeline::timeline_svg, "title"_a = "streamrt timeline")
      .def(
          "export_timeline_svg",
          [fspath](const Profiler& p, py::object path, const std::string& title) {
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
