#pragma once
//! \file bind_ops.hpp
//! Pieces of the tensor bindings (bind_tensor.cpp) that the op bindings (bind_ops.cpp) share.

#include <functional>
#include <optional>
#include <string>
#include <type_traits>

#include <pybind11/stl.h>

#include "bindings.hpp"
#include "streamrt/error.hpp"
#include "streamrt/tensor.hpp"

//! A Shape crosses to and from Python as a sequence of ints, as the std::vector it replaced (every
//! binding file that binds a Shape includes this header, so all of them use this caster).
template <>
struct pybind11::detail::type_caster<streamrt::Shape>
    : pybind11::detail::list_caster<streamrt::Shape, std::int64_t> {};

namespace streamrt::python {

//! numpy, imported on first use (importing streamrt does not import it) and kept for the life of
//! the process. Requires the GIL.
py::module_ numpy();
//! The Tensor inside a streamrt.Tensor (or subclass) instance, borrowed: valid while `obj` lives.
//! Null for any other object (and for an instance whose __init__ has not run). Requires the GIL.
const Tensor* borrowed_tensor(py::handle obj);
//! A new streamrt.Tensor owning `t`, for a new result only: it is not in pybind11's registry of
//! instances, which finds the wrapper of a C++ address. Requires the GIL.
py::object wrap_tensor(Tensor&& t);
//! An op's operand: a Tensor as it is; numpy arrays, DLPack/buffer objects and lists shared or
//! converted (read-only memory is fine). TypeError for anything else. Requires the GIL.
Tensor tensor_operand(py::handle obj, const char* what);
//! True for Python and numpy numbers (not bool). Requires the GIL.
bool is_python_scalar(py::handle obj);
//! The dtype torch gives an op of a `d` tensor and the Python number `scalar`: a float makes
//! integer and bool tensors float32, an int makes bool tensors int64, otherwise `d`. Requires
//! the GIL.
DType scalar_promoted_dtype(DType d, py::handle scalar);

//! An op's tensor operand as tensor_operand takes it, but a streamrt.Tensor borrowed, not copied
//! (a copy costs allocations for its shape and strides). Lives in the scope of the op's launch;
//! neither copied nor moved. Requires the GIL.
class Operand {
 public:
  //! Borrows or converts `obj`; TypeError naming `what` as tensor_operand.
  Operand(py::handle obj, const char* what);
  Operand(const Operand&) = delete;
  Operand& operator=(const Operand&) = delete;

  //! The tensor.
  const Tensor& operator*() const noexcept { return *tensor_; }
  //! The tensor's members.
  const Tensor* operator->() const noexcept { return tensor_; }
  //! Converts the operand to scalar_promoted_dtype against the Python number `scalar` (a launch
  //! on the current stream when the dtype changes).
  void promote_for(py::handle scalar);

 private:
  const Tensor* tensor_;
  std::optional<Tensor> owned_;  // a converted operand; tensor_ points into it
};

//! The ValueError for an op's argument Error `e`, named after `what`.
py::value_error op_error(const char* what, const Error& e);

//! Launches an op that only enqueues work (element-wise math and comparisons, dtype conversions)
//! with the GIL held: such a launch never waits for a thread that may need the GIL (runtime locks
//! are never held while waiting for it, py_runtime.hpp), so releasing the GIL would only add a
//! hand-off to every small op. Its Errors become ValueError naming `what`. Requires the GIL.
template <class F>
Tensor launch_op(const char* what, F&& f) {
  try {
    return f();
  } catch (const Cancelled&) {
    throw;
  } catch (const Error& e) {
    throw op_error(what, e);
  }
}
//! A dtype from a streamrt or numpy dtype-like. TypeError otherwise. Requires the GIL.
DType dtype_arg(py::handle obj, const char* what);
//! Waits (GIL released, Ctrl-C raising KeyboardInterrupt in the main thread) for the queued work
//! that writes `t` (and reads it, when `writable`); a failure is left for the access that
//! follows. Requires the GIL.
void wait_tensor(const Tensor& t, bool writable);
//! Waits as wait_tensor for everything queued so far on the current stream, without reporting a
//! failure: a blocking call that queues its own work there (allclose, equal) then waits only for
//! that. Requires the GIL.
void wait_current_stream();
//! A shape as a Python tuple. Requires the GIL.
py::tuple shape_to_tuple(const Shape& shape);
//! Runs an enqueueing op with the GIL released; its Errors become ValueError naming `what`.
//! Requires the GIL.
Tensor run_op(const char* what, const std::function<Tensor()>& f);

//! Sets the Python error for the C++ exception being handled, as pybind11's dispatcher does (this
//! module's translators, then the global ones), and returns null. Only in a catch handler;
//! requires the GIL.
PyObject* raise_current_exception() noexcept;
//! Adds method `name` with the C entry point `entry` (METH_O or METH_NOARGS in `flags`) to class
//! `cls`. `name` and `doc` must outlive the module. Requires the GIL.
void add_direct_method(py::handle cls, const char* name, PyCFunction entry, int flags,
                       const char* doc);

//! Binds `F` (py::object(py::handle self) or py::object(py::handle self, py::handle other)) as
//! method `name` of class `cls`, called by CPython directly: pybind11's dispatcher (argument
//! vectors, casters, overload loop) costs a good part of a small op's launch, so the operators
//! skip it. C++ exceptions become the Python exceptions pybind11 would raise. `name` and `doc`
//! must outlive the module. Requires the GIL.
template <auto F>
void def_direct(py::handle cls, const char* name, const char* doc) {
  constexpr bool unary = std::is_invocable_v<decltype(F), py::handle>;
  PyCFunction entry = [](PyObject* self, PyObject* other) noexcept -> PyObject* {
    try {
      if constexpr (unary) {
        return F(self).release().ptr();
      } else {
        return F(self, other).release().ptr();
      }
    } catch (...) {
      return raise_current_exception();
    }
  };
  add_direct_method(cls, name, entry, unary ? METH_NOARGS : METH_O, doc);
}

//! Binds views, indexing, reductions, the element-wise math, comparisons, where, softmax, cat and
//! stack as Tensor methods and module functions. Requires the GIL; after bind_tensor.
void bind_ops(py::module_& m);

}  // namespace streamrt::python
