// The Tensor type's buffer protocol (memoryview, bytes, numpy.frombuffer, struct.unpack_from).
// pybind11's def_buffer cannot fail: its getter is called from a C slot with no way for an
// exception to pass (a failed writer or Ctrl-C during the wait ended in std::terminate), and
// it ignores the consumer's contiguity request. This slot waits, reports failures as Python
// exceptions and refuses layouts the consumer did not ask for.
#include <pybind11/pybind11.h>

#include <chrono>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "interop.hpp"
#include "py_exception.hpp"
#include "py_runtime.hpp"
#include "streamrt/error.hpp"
#include "streamrt/ops.hpp"
#include "streamrt/tensor.hpp"
#include "waits.hpp"

namespace streamrt::python {
namespace {

// What a view keeps while it lives (Py_buffer points into it).
struct BufferLayout {
  std::vector<Py_ssize_t> shape;
  std::vector<Py_ssize_t> strides;  // in bytes
  std::string format;
};

// The struct-module format of one element.
const char* element_format(DType d) {
  switch (d) {
    case DType::Float32:
      return "f";
    case DType::Float64:
      return "d";
    case DType::Int32:
      return "i";
    case DType::Int64:
      return "q";
    case DType::Bool:
      return "?";
  }
  return "B";
}

bool c_contiguous(const BufferLayout& l, Py_ssize_t itemsize) {
  Py_ssize_t expected = itemsize;
  for (std::size_t i = l.shape.size(); i-- > 0;) {
    if (l.shape[i] == 0) return true;
    if (l.shape[i] != 1 && l.strides[i] != expected) return false;
    expected *= l.shape[i];
  }
  return true;
}

bool f_contiguous(const BufferLayout& l, Py_ssize_t itemsize) {
  Py_ssize_t expected = itemsize;
  for (std::size_t i = 0; i < l.shape.size(); ++i) {
    if (l.shape[i] == 0) return true;
    if (l.shape[i] != 1 && l.strides[i] != expected) return false;
    expected *= l.shape[i];
  }
  return true;
}

// The contiguity the consumer needs that the layout lacks, or null when it fits the request.
const char* unmet_request(int flags, const BufferLayout& l, Py_ssize_t itemsize) {
  const bool c = c_contiguous(l, itemsize), f = f_contiguous(l, itemsize);
  if ((flags & PyBUF_C_CONTIGUOUS) == PyBUF_C_CONTIGUOUS && !c) return "C-contiguous";
  if ((flags & PyBUF_F_CONTIGUOUS) == PyBUF_F_CONTIGUOUS && !f) return "Fortran-contiguous";
  if ((flags & PyBUF_ANY_CONTIGUOUS) == PyBUF_ANY_CONTIGUOUS && !c && !f) return "contiguous";
  // Without PyBUF_STRIDES the consumer reads the memory as one dense C-ordered run.
  if ((flags & PyBUF_STRIDES) != PyBUF_STRIDES && !c) return "C-contiguous (no strides asked)";
  return nullptr;
}

// Fills `view` for tensor `obj`; throws on failure (the caller turns it into a Python error).
void fill_view(PyObject* obj, Py_buffer* view, int flags) {
  const Tensor& t = py::handle(obj).cast<const Tensor&>();
  // Writable either way: a memoryview of a tensor may be written, so readers finish first too.
  wait_interruptibly([&](std::chrono::nanoseconds slice) { return t.wait_for(slice, true); });
  void* data = nullptr;
  {
    py::gil_scoped_release release;  // a failed writer's error is raised from here
    data = const_cast<Tensor&>(t).data_ptr();
  }
  expose_memory(t);  // wraps of the memory later (torch.frombuffer) join its tracking
  auto layout = std::make_unique<BufferLayout>();
  const auto itemsize = static_cast<Py_ssize_t>(t.element_size());
  Py_ssize_t len = itemsize;
  for (int d = 0; d < t.dim(); ++d) {
    const auto i = static_cast<std::size_t>(d);
    layout->shape.push_back(static_cast<Py_ssize_t>(t.shape()[i]));
    layout->strides.push_back(static_cast<Py_ssize_t>(t.strides()[i]) * itemsize);
    len *= layout->shape.back();
  }
  layout->format = element_format(t.dtype());
  if (const char* need = unmet_request(flags, *layout, itemsize)) {
    throw py::buffer_error("the buffer consumer needs a " + std::string(need) +
                           " buffer, but this tensor view is strided (shape " +
                           to_string(t.shape()) + ", strides " + to_string(t.strides()) +
                           "); pass tensor.contiguous() instead");
  }
  view->buf = data;
  view->len = len;
  view->itemsize = itemsize;
  view->readonly = 0;
  view->ndim = t.dim();
  view->format = (flags & PyBUF_FORMAT) == PyBUF_FORMAT ? layout->format.data() : nullptr;
  view->shape = (flags & PyBUF_ND) == PyBUF_ND ? layout->shape.data() : nullptr;
  view->strides = (flags & PyBUF_STRIDES) == PyBUF_STRIDES ? layout->strides.data() : nullptr;
  view->suboffsets = nullptr;
  view->internal = layout.release();
  view->obj = py::handle(obj).inc_ref().ptr();
}

extern "C" int tensor_getbuffer(PyObject* obj, Py_buffer* view, int flags) {
  if (view == nullptr) {
    PyErr_SetString(PyExc_BufferError, "streamrt.Tensor: a buffer request without a view");
    return -1;
  }
  view->obj = nullptr;
  try {
    fill_view(obj, view, flags);
    return 0;
  } catch (py::error_already_set& e) {
    e.restore();
  } catch (const PythonException& e) {
    e.restore();
  } catch (...) {
    set_python_error(std::current_exception());
  }
  return -1;
}

extern "C" void tensor_releasebuffer(PyObject*, Py_buffer* view) {
  delete static_cast<BufferLayout*>(view->internal);
  view->internal = nullptr;
}

}  // namespace

void enable_tensor_buffer(py::handle cls) {
  auto* type = reinterpret_cast<PyTypeObject*>(cls.ptr());
  if (type->tp_as_buffer == nullptr) {
    throw std::logic_error("streamrt.Tensor was bound without py::buffer_protocol()");
  }
  type->tp_as_buffer->bf_getbuffer = &tensor_getbuffer;
  type->tp_as_buffer->bf_releasebuffer = &tensor_releasebuffer;
  PyType_Modified(type);
}

}  // namespace streamrt::python
