// Tensors to and from numpy arrays, DLPack, buffer objects, lists and numbers (interop.hpp).
#include "interop.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "args.hpp"
#include "dlpack.hpp"
#include "error_text.hpp"
#include "py_runtime.hpp"
#include "streamrt/error.hpp"
#include "streamrt/ops.hpp"
#include "tensor_object.hpp"
#include "waits.hpp"

namespace streamrt::python {

using namespace pybind11::literals;

namespace {

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
// Python numbers as operands.

bool is_numpy_scalar(py::handle obj) {
  numpy();
  const int r = PyObject_IsInstance(obj.ptr(), g_numpy_generic);
  if (r < 0) throw py::error_already_set();
  return r == 1;
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

// ---------------------------------------------------------------------------------------------
// numpy: exporting and importing without copying.

namespace {

std::vector<py::ssize_t> byte_strides(const Tensor& t) {
  std::vector<py::ssize_t> out;
  for (auto s : t.strides()) out.push_back(static_cast<py::ssize_t>(s * t.element_size()));
  return out;
}

// Host access for an export (numpy, DLPack), with the GIL released while the pending work
// finishes (it may need the GIL). The memory is exposed: tensors wrapped over it later (a torch
// tensor made from the numpy array) join its tracking.
void* host_pointer(const Tensor& t, bool writable) {
  wait_tensor(t, writable);
  expose_memory(t);
  py::gil_scoped_release release;
  if (writable) return const_cast<Tensor&>(t).data_ptr();
  return const_cast<void*>(t.data_ptr());
}

// Keeps a Python object alive for as long as the tensor's storage needs its memory.
std::function<void(void*)> keep_alive(py::object owner) {
  auto holder = std::make_shared<SafeObject>(std::move(owner));
  return [holder](void*) { holder->reset(); };  // any thread; see SafeObject
}

// The message of from_blob's Error `e` for an import, naming the Python call `what` the user
// made (never from_blob, which Python has not).
std::string import_message(const Error& e, const char* what) {
  return python_text_for(e.text(), api::function("from_blob"), what);
}

// Element strides of a numpy array (ValueError when a byte stride is not whole elements).
Shape element_strides(const py::array& arr, py::ssize_t itemsize, const char* what) {
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
  return strides;
}

// The array's layout flags that decide whether its memory can be shared: ValueError naming `what`
// when it cannot.
void check_shareable(const py::array& arr, bool allow_readonly, const char* what) {
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
}

}  // namespace

py::array numpy_view(py::object self, bool writable) {
  const Tensor& t = self.cast<const Tensor&>();
  void* p = host_pointer(t, writable);
  std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end());
  // The array's base is the Python tensor: the storage lives while the array does.
  py::array arr(numpy_dtype(t.dtype()), shape, byte_strides(t), p, self);
  if (!writable) arr.attr("setflags")("write"_a = false);
  return arr;
}

Tensor from_numpy_array(py::handle obj, bool allow_readonly, const char* what) {
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
  check_shareable(arr, allow_readonly, what);
  // Any strided view is shared as it is (transposed, stepped, reversed, broadcast), as numpy
  // and torch views share their base; byte strides become element strides.
  const auto itemsize = static_cast<py::ssize_t>(element_size(*dtype));
  Shape shape(arr.shape(), arr.shape() + arr.ndim());
  Shape strides = element_strides(arr, itemsize, what);
  void* data = const_cast<void*>(arr.data());
  try {
    return from_blob(data, std::move(shape), std::move(strides), *dtype, keep_alive(arr));
  } catch (const Error& e) {
    // Overlapping strides (np.lib.stride_tricks.as_strided windows): not shareable.
    throw py::value_error(import_message(e, what) + " (streamrt.asarray(a) copies)");
  }
}

// ---------------------------------------------------------------------------------------------
// DLPack.

namespace {

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

// Set by streamrt.torch.install(), cleared by uninstall(); a leaked reference (never dropped
// after finalization). Read and written with the GIL held.
PyObject* g_dlpack_hook = nullptr;

// obj.__dlpack__(), or, when the hook is set and shares `obj` (a torch tensor that
// streamrt.torch tracks), its capsule taken without waiting, with `tracker` set to the tensor
// standing for the torch storage's tracking.
py::object producer_capsule(py::handle obj, Tensor& tracker) {
  if (g_dlpack_hook != nullptr && borrowed_tensor(obj) == nullptr) {
    py::object shared = py::reinterpret_borrow<py::object>(g_dlpack_hook)(obj);
    if (!shared.is_none()) {
      auto pair = shared.cast<py::tuple>();
      const Tensor* t = pair.size() == 2 ? borrowed_tensor(pair[0]) : nullptr;
      if (t == nullptr) {
        throw py::type_error("streamrt.torch's DLPack hook must return (tracker, capsule) or None");
      }
      tracker = *t;
      return pair[1];
    }
  }
  return obj.attr("__dlpack__")();
}

// The producer's capsule: from __dlpack__() (refusing producers on other devices first) or the
// capsule itself. Unconsumed and valid. `tracker` as producer_capsule.
py::object dlpack_capsule(py::handle obj, const char* what, Tensor& tracker) {
  py::object capsule;
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
    capsule = producer_capsule(obj, tracker);
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
  return capsule;
}

// The dtype of a DLPack tensor on the CPU, or the error naming what is not supported.
DType dlpack_tensor_dtype(const dlpack::DLTensor& t, const char* what) {
  if (t.device.device_type != dlpack::kDLCPU) {
    throw Error(std::string(what) + ": DLPack device type " + std::to_string(t.device.device_type) +
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
  return *dtype;
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

}  // namespace

Tensor from_dlpack_object(py::handle obj) {
  const char* what = "from_dlpack";
  if (py::isinstance<Tensor>(obj)) return obj.cast<Tensor>();
  Tensor tracker;  // set when the memory is a torch storage that streamrt.torch tracks
  py::object capsule = dlpack_capsule(obj, what, tracker);
  auto* m = static_cast<dlpack::DLManagedTensor*>(
      PyCapsule_GetPointer(capsule.ptr(), dlpack::kCapsuleName));
  const dlpack::DLTensor& t = m->dl_tensor;
  const DType dtype = dlpack_tensor_dtype(t, what);
  Shape shape(t.shape, t.shape + t.ndim);
  // No strides (DLPack's null): compact row-major. Otherwise any strided layout is shared as it
  // is (element strides, possibly negative or 0), as numpy's and torch's views share their base.
  Shape strides =
      t.strides != nullptr ? Shape(t.strides, t.strides + t.ndim) : contiguous_strides(shape);
  void* data = static_cast<char*>(t.data) + t.byte_offset;
  // Checked before the capsule is taken: a refused capsule stays the producer's to free.
  Tensor probe;
  try {
    probe = from_blob(data, shape, strides, dtype);
  } catch (const Error& e) {
    throw py::value_error(import_message(e, what) + " (streamrt.asarray copies)");
  }
  // Ours from here: the producer's capsule must no longer free it.
  PyCapsule_SetName(capsule.ptr(), dlpack::kUsedCapsuleName);
  auto owner = std::make_shared<ManagedOwner>(m);
  Tensor out = from_blob(data, std::move(shape), std::move(strides), dtype, [owner](void*) {});
  if (tracker.defined()) share_tracking(out, tracker);  // one tracking with torch's ops
  return out;
}

void set_dlpack_hook(py::object hook) {
  PyObject* old = g_dlpack_hook;
  g_dlpack_hook = hook.is_none() ? nullptr : hook.release().ptr();
  Py_XDECREF(old);
}

py::object to_dlpack_capsule(const Tensor& t, py::object stream) {
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
// asarray: any tensor-like argument.

namespace {

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

// asarray of a streamrt.Tensor: itself, converted to `dtype`, or a clone.
Tensor asarray_of_tensor(const Tensor& t, std::optional<DType> dtype, std::optional<bool> copy,
                         const char* what) {
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

// An array-like (numpy.asarray of it) copied in C order into `dtype`, or into its own dtype when
// none is asked; TypeError when that is not supported.
Tensor copy_of_array(py::handle obj, std::optional<DType> dtype, const char* what) {
  py::object arr = numpy().attr("asarray")(obj);
  const std::string name = py::str(arr.attr("dtype").attr("name"));
  const auto have = dtype_from_name(name);
  if (!have && !dtype) {
    throw py::type_error(std::string(what) + ": dtype " + name + " is not supported; use " +
                         kSupportedDTypes + " (pass dtype= to convert)");
  }
  py::object copied = numpy().attr("array")(arr, "dtype"_a = numpy_dtype(dtype ? *dtype : *have),
                                            "order"_a = "C", "copy"_a = true);
  return from_numpy_array(copied, false, what);
}

// asarray of a numpy array, copy=None or False: its memory shared when the layout and dtype
// allow it (strided views too; layouts whose elements overlap, or strides that are not whole
// elements, are refused by from_numpy_array), else a copy (ValueError for copy=False).
Tensor shared_or_copied(const py::array& arr, std::optional<DType> dtype, std::optional<bool> copy,
                        bool allow_readonly, const char* what) {
  const std::string name = py::str(arr.dtype().attr("name"));
  const auto have = dtype_from_name(name);
  const int flags = py::detail::array_proxy(arr.ptr())->flags;
  const bool shareable =
      have && (!dtype || *dtype == *have) && arr.ndim() <= kMaxDims &&
      (flags & py::detail::npy_api::NPY_ARRAY_ALIGNED_) != 0 &&
      (allow_readonly || (flags & py::detail::npy_api::NPY_ARRAY_WRITEABLE_) != 0);
  std::string refused;
  if (shareable) {
    try {
      return from_numpy_array(arr, allow_readonly, what);
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
  return copy_of_array(arr, dtype, what);
}

}  // namespace

Tensor asarray_tensor(py::handle obj, std::optional<DType> dtype, std::optional<bool> copy,
                      bool allow_readonly, const char* what) {
  if (py::isinstance<Tensor>(obj)) return asarray_of_tensor(obj.cast<Tensor>(), dtype, copy, what);
  const bool is_array = py::isinstance<py::array>(obj);
  const bool has_dlpack = !is_array && py::hasattr(obj, "__dlpack__");
  const bool python_data = !is_array && !has_dlpack && PyObject_CheckBuffer(obj.ptr()) == 0;
  if (copy != true && !python_data) {
    // Share memory when the layout and dtype allow it.
    py::object source = py::reinterpret_borrow<py::object>(obj);
    if (has_dlpack) {
      try {
        Tensor t = from_dlpack_object(obj);
        if (!dtype || *dtype == t.dtype()) return t;
        source = numpy_view(py::cast(t), true);  // wrong dtype: convert below
      } catch (const py::error_already_set&) {
        if (copy == false) throw;
      } catch (const py::builtin_exception&) {
        if (copy == false) throw;
      }
    } else if (!is_array) {
      source = numpy().attr("asarray")(obj);  // the buffer protocol, no copy
    }
    if (py::isinstance<py::array>(source)) {
      return shared_or_copied(py::reinterpret_borrow<py::array>(source), dtype, copy,
                              allow_readonly, what);
    }
  }
  if (copy == false) {
    throw py::value_error(std::string(what) + ": a " + type_name(obj) +
                          " has no memory to share, and copy=False");
  }
  if (!python_data) return copy_of_array(obj, dtype, what);
  return from_numpy_array(array_from_python(obj, dtype, what), false, what);
}

Tensor tensor_operand(py::handle obj, const char* what) {
  if (const Tensor* t = borrowed_tensor(obj)) return *t;
  if (py::isinstance<Tensor>(obj)) return obj.cast<Tensor>();  // not initialized: cast raises
  if (py::isinstance<py::array>(obj) || py::hasattr(obj, "__dlpack__") ||
      PyObject_CheckBuffer(obj.ptr()) != 0 || py::isinstance<py::list>(obj) ||
      py::isinstance<py::tuple>(obj)) {
    return asarray_tensor(obj, std::nullopt, std::nullopt, /*allow_readonly=*/true, what);
  }
  throw py::type_error(std::string(what) +
                       ": expected a streamrt.Tensor, a numpy array, or an object with "
                       "__dlpack__ or the buffer protocol, got " +
                       type_name(obj));
}

}  // namespace streamrt::python
