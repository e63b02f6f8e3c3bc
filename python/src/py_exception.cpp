// Python exceptions carried through the C++ runtime (py_exception.hpp).
#include "py_exception.hpp"

#include <string>
#include <utility>

namespace streamrt::python {

void attach_traceback(const py::error_already_set& e) {
  if (!e.trace()) return;
  PyObject* tb = PyException_GetTraceback(e.value().ptr());  // new reference or null
  if (tb == nullptr) {
    PyException_SetTraceback(e.value().ptr(), e.trace().ptr());
  } else {
    Py_DECREF(tb);
  }
}

PythonException::PythonException(const py::error_already_set& e, std::string where)
    : value_(std::make_shared<SafeObject>(e.value())), where_(std::move(where)) {
  attach_traceback(e);
  PyObject* tb = PyException_GetTraceback(e.value().ptr());  // new reference or null
  if (tb != nullptr) {
    traceback_ = std::make_shared<SafeObject>(py::reinterpret_steal<py::object>(tb));
  }
  try {
    message_ = std::string(py::str(py::type::handle_of(e.value()).attr("__name__")));
    const std::string text = py::str(e.value());
    if (!text.empty()) message_ += ": " + text;
  } catch (const py::error_already_set&) {
    message_ = "a Python exception (its str() failed)";
  }
}

namespace {

// A new exception of the same type as `original`, with the same args and attributes, or null
// when the type cannot be made that way (then the original is raised again). Requires the GIL.
py::object fresh_copy(const py::object& original) {
  try {
    py::handle cls = py::type::handle_of(original);
    py::object fresh = cls.attr("__new__")(cls);
    fresh.attr("args") = original.attr("args");
    if (py::hasattr(original, "__dict__") && py::hasattr(fresh, "__dict__")) {
      fresh.attr("__dict__").attr("update")(original.attr("__dict__"));
    }
    if (PyExceptionInstance_Check(fresh.ptr()) == 0) return py::object();
    return fresh;
  } catch (const py::error_already_set&) {
    return py::object();
  }
}

}  // namespace

void PythonException::restore() const {
  py::object value = value_->object();
  // The traceback of the raise on the worker only: a raise through the caller's frames appends
  // them to the traceback it starts from, so starting from the captured one never accumulates.
  PyException_SetTraceback(value.ptr(), traceback_ ? traceback_->get().ptr() : Py_None);
  py::object raised = value;
  if (raises_->fetch_add(1, std::memory_order_relaxed) > 0) {
    try {
      if (py::object fresh = fresh_copy(value)) {
        const std::string note =
            "streamrt: raised again. This failure of work on " +
            (where_.empty() ? std::string("a stream") : where_) +
            " was already raised by an earlier wait (the exception above). The work that "
            "depended on it was skipped, so its results are not valid: submit that work again; "
            "work submitted after the earlier wait runs normally.";
        if (py::hasattr(fresh, "add_note")) fresh.attr("add_note")(note);
        PyException_SetCause(fresh.ptr(), value.inc_ref().ptr());  // steals the reference
        raised = fresh;
      }
    } catch (const py::error_already_set&) {
      raised = value;  // the note could not be added: raise the original, as raised
    }
  }
  py::object type = py::reinterpret_borrow<py::object>(py::type::handle_of(raised));
  PyObject* tb = raised.is(value) ? PyException_GetTraceback(value.ptr()) : nullptr;
  PyErr_Restore(type.release().ptr(), raised.release().ptr(), tb);
}

py::object exception_object(const std::exception_ptr& e) {
  if (!e) return py::none();
  try {
    std::rethrow_exception(e);
  } catch (const PythonException& pe) {
    return pe.value();  // the original object: handing it to a callback is no raise
  } catch (...) {
  }
  // Let pybind11 translate it exactly as if a bound function had thrown it (registered
  // translators included): call a tiny bound function that rethrows, and catch the result.
  py::cpp_function thrower([e]() { std::rethrow_exception(e); });
  try {
    thrower();
  } catch (const py::error_already_set& err) {
    attach_traceback(err);
    return err.value();
  }
  return py::none();  // unreachable: the thrower always throws
}

void set_python_error(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const PythonException& pe) {
    pe.restore();
    return;
  } catch (py::error_already_set& err) {
    err.restore();
    return;
  } catch (...) {
  }
  py::object exc = exception_object(e);
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
}

}  // namespace streamrt::python
