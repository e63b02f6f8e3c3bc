#pragma once
//! \file py_exception.hpp
//! Python exceptions carried through the C++ runtime: a callable that raised on a stream fails
//! the stream with the original exception object, and every wait that reports the failure raises
//! that object again (with a note from the second time on); C++ failures become the Python
//! exceptions a bound function would raise.

#include <pybind11/pybind11.h>

#include <atomic>
#include <exception>
#include <memory>
#include <string>

#include "py_runtime.hpp"

namespace streamrt::python {

namespace py = pybind11;

//! A Python exception raised by a callable that ran on a stream, carried through the C++ runtime
//! (stream failures, events, synchronize) as the original exception object, with its traceback.
//! Copies share the object. Thread-safe to copy and destroy anywhere (see SafeObject).
class PythonException : public std::exception {
 public:
  //! Captures the exception held by `e`, with its traceback; `where` names the stream whose work
  //! raised it ("cpu:0 stream 3"). Requires the GIL.
  explicit PythonException(const py::error_already_set& e, std::string where = {});
  //! "KeyError: 'x'" (computed at capture, so no GIL is needed here). Never blocks.
  const char* what() const noexcept override { return message_.c_str(); }
  //! Sets the Python error indicator for raising the failure to a host wait. The first time: the
  //! original exception object with the traceback it had when captured (frames of earlier raises
  //! never accumulate). Later times: a fresh exception of the same type and args, chained to the
  //! original (__cause__), with a note that it was raised before and how to clear it (rule 10).
  //! Requires the GIL.
  void restore() const;
  //! The exception object. Requires the GIL.
  py::object value() const { return value_->object(); }

 private:
  std::shared_ptr<SafeObject> value_;
  std::shared_ptr<SafeObject> traceback_;  // as captured; empty when there was none
  std::shared_ptr<std::atomic<int>> raises_ = std::make_shared<std::atomic<int>>(0);
  std::string message_;
  std::string where_;
};

//! The Python exception object for a C++ failure `e` (the original object for a PythonException;
//! streamrt.Error, RuntimeError ... otherwise, as pybind11 translates them), None for null.
//! Requires the GIL.
py::object exception_object(const std::exception_ptr& e);

//! Sets the Python error indicator for the C++ failure `e`, as a bound function that threw it
//! would (a PythonException restores the original object). For C slots, where no exception may
//! pass. Requires the GIL.
void set_python_error(const std::exception_ptr& e);

//! Makes sure the exception object held by `e` carries `e`'s traceback (__traceback__), so that
//! the object alone can be raised again as it was. Requires the GIL.
void attach_traceback(const py::error_already_set& e);

}  // namespace streamrt::python
