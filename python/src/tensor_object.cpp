// The streamrt.Tensor Python object seen from the bindings (tensor_object.hpp).
#include "tensor_object.hpp"

#include <string>

#include "error_text.hpp"

namespace streamrt::python {

void Operand::promote_for(py::handle scalar) {
  const DType want = scalar_promoted_dtype(tensor_->dtype(), scalar);
  if (want == tensor_->dtype()) return;
  Tensor converted = tensor_->to(want);
  tensor_ = &owned_.emplace(std::move(converted));
}

namespace {

// The message of `e` in Python spelling, beginning with the op's name `what`.
std::string op_message(const char* what, const Error& e) {
  std::string message = python_text(e.text());
  if (message.rfind(what, 0) != 0) message = std::string(what) + ": " + message;
  return message;
}

}  // namespace

py::value_error op_error(const char* what, const Error& e) {
  return py::value_error(op_message(what, e));
}

void rethrow_refusal(const char* what, const ResourceUnavailable& e) {
  if (dynamic_cast<const OutOfMemory*>(&e) != nullptr) throw OutOfMemory(op_message(what, e));
  throw ResourceUnavailable(op_message(what, e));
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

}  // namespace streamrt::python
