#pragma once
//! \file tensor_object.hpp
//! The streamrt.Tensor Python object seen from the bindings: borrowing the Tensor inside it,
//! wrapping results, op operands, launching ops, and methods CPython calls without pybind11's
//! dispatcher. These are the fast path of every small op from Python: what is inline here stays
//! inline (a call into another file per operand would cost more than the lookup it replaces).
//! All require the GIL.

#include <pybind11/pybind11.h>

#include <memory>
#include <optional>
#include <type_traits>
#include <utility>

#include "interop.hpp"
#include "launch_origin.hpp"
#include "streamrt/error.hpp"
#include "streamrt/impl/launch_site.hpp"
#include "streamrt/tensor.hpp"

namespace streamrt::python {

namespace py = pybind11;

namespace internal {
// Tensor's pybind11 type record, set once by remember_tensor_type() right after the class is
// bound, before any op can run.
inline const py::detail::type_info* g_tensor_info = nullptr;
}  // namespace internal

//! Records the bound Tensor class's type record for the functions below. Once, at import.
inline void remember_tensor_type() {
  internal::g_tensor_info = py::detail::get_type_info(typeid(Tensor));
}

//! The Tensor inside a streamrt.Tensor (or subclass) instance, borrowed: valid while `obj` lives.
//! Null for any other object (and for an instance whose __init__ has not run).
inline const Tensor* borrowed_tensor(py::handle obj) {
  if (PyObject_TypeCheck(obj.ptr(), internal::g_tensor_info->type) == 0) return nullptr;
  // The caster with the type known: no lookup of Tensor's type by its C++ name.
  py::detail::type_caster_generic caster(internal::g_tensor_info);
  if (!caster.load(obj, false)) return nullptr;
  return static_cast<const Tensor*>(caster.value);
}

//! A new streamrt.Tensor owning `t`, for a new result only: it is not in pybind11's registry of
//! instances, which finds the wrapper of a C++ address.
inline py::object wrap_tensor(Tensor&& t) {
  // Made as pybind11's cast makes it (an owning holder in pybind11's instance layout), but left
  // out of pybind11's registry of live instances, which only serves to find the Python object of
  // a C++ address already wrapped: this value is new, and no binding returns a reference to a
  // wrapped Tensor. Registering and deregistering cost a hash-table insert and erase per result,
  // the most of any step of wrapping when many tensors are alive. pybind11 deregisters, when an
  // instance is deallocated, only instances marked registered.
  using Holder = py::class_<Tensor>::holder_type;
  auto self = py::reinterpret_steal<py::object>(
      py::detail::make_new_instance(internal::g_tensor_info->type));
  auto value = std::make_unique<Tensor>(std::move(t));
  auto* inst = reinterpret_cast<py::detail::instance*>(self.ptr());
  auto v_h = inst->get_value_and_holder(internal::g_tensor_info);
  v_h.value_ptr() = value.get();
  inst->owned = true;
  new (std::addressof(v_h.holder<Holder>())) Holder(std::move(value));
  v_h.set_holder_constructed();
  return self;
}

//! True for Python and numpy numbers (not bool).
inline bool is_python_scalar(py::handle obj) {
  PyObject* o = obj.ptr();
  if (PyFloat_Check(o)) return true;
  if (PyLong_Check(o)) return !PyBool_Check(o);
  // Tensors first: they are the common operand, and need no numpy.
  if (PyObject_TypeCheck(o, internal::g_tensor_info->type) != 0) return false;
  return is_numpy_scalar(obj);
}

//! An op's tensor operand as tensor_operand takes it, but a streamrt.Tensor borrowed, not copied
//! (a copy costs allocations for its shape and strides). Lives in the scope of the op's launch;
//! neither copied nor moved.
class Operand {
 public:
  //! Borrows or converts `obj`; TypeError naming `what` as tensor_operand.
  Operand(py::handle obj, const char* what) : tensor_(borrowed_tensor(obj)) {
    if (tensor_ == nullptr) tensor_ = &owned_.emplace(tensor_operand(obj, what));
  }
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

//! Throws the OS's refusal `e` again as the same kind (OutOfMemory or ResourceUnavailable), its
//! message named after `what` as op_error names argument errors.
[[noreturn]] void rethrow_refusal(const char* what, const ResourceUnavailable& e);

//! Launches an op that only enqueues work (element-wise math and comparisons, dtype conversions)
//! with the GIL held: such a launch never waits for a thread that may need the GIL (runtime locks
//! are never held while waiting for it, py_runtime.hpp), so releasing the GIL would only add a
//! hand-off to every small op. Its Errors become ValueError naming `what`, but for a refusal of
//! the OS (ResourceUnavailable: a worker thread, memory), which is no argument error and stays
//! what Python code expects for it (streamrt.Error, a RuntimeError; streamrt.OutOfMemoryError, a
//! MemoryError).
//! The work it launches carries the caller's source line (launch_origin.hpp); in launch-blocking
//! mode it waits for that work before it returns, raising its failure as it is (not as a
//! ValueError: no argument was wrong).
template <class F>
Tensor launch_op(const char* what, F&& f) {
  auto launch = [&]() -> Tensor {
    const impl::LaunchOriginScope origin(launch_origin_here());
    try {
      return f();
    } catch (const Cancelled&) {
      throw;
    } catch (const ResourceUnavailable& e) {
      rethrow_refusal(what, e);
    } catch (const Error& e) {
      throw op_error(what, e);
    }
  };
  Tensor out = launch();
  finish_blocking_launches();
  return out;
}

//! Runs an op that may wait (or is not known not to) with the GIL released; its Errors are
//! argument errors and become ValueError naming `what`.
template <class F>
Tensor run_op(const char* what, F&& f) {
  return launch_op(what, [&] {
    py::gil_scoped_release release;
    return f();
  });
}

//! Sets the Python error for the C++ exception being handled, as pybind11's dispatcher does (this
//! module's translators, then the global ones), and returns null. Only in a catch handler.
PyObject* raise_current_exception() noexcept;

//! Adds method `name` with the C entry point `entry` (METH_O or METH_NOARGS in `flags`) to class
//! `cls`. `name` and `doc` must outlive the module.
void add_direct_method(py::handle cls, const char* name, PyCFunction entry, int flags,
                       const char* doc);

//! Binds `F` (py::object(py::handle self) or py::object(py::handle self, py::handle other)) as
//! method `name` of class `cls`, called by CPython directly: pybind11's dispatcher (argument
//! vectors, casters, overload loop) costs a good part of a small op's launch, so the operators
//! skip it. C++ exceptions become the Python exceptions pybind11 would raise. `name` and `doc`
//! must outlive the module.
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

}  // namespace streamrt::python
