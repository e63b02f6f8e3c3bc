#pragma once
//! \file bind_ops.hpp
//! Pieces of the tensor bindings (bind_tensor.cpp) that the op bindings (bind_ops.cpp) share.

#include <functional>

#include "bindings.hpp"
#include "streamrt/tensor.hpp"

namespace streamrt::python {

//! An op's operand: a Tensor as it is; numpy arrays, DLPack/buffer objects and lists shared or
//! converted (read-only memory is fine). TypeError for anything else. Requires the GIL.
Tensor tensor_operand(py::handle obj, const char* what);
//! True for Python and numpy numbers (not bool). Requires the GIL.
bool is_python_scalar(py::handle obj);
//! `t` converted as torch promotes it against the Python number `scalar` (a float makes integer
//! and bool tensors float32; an int makes bool tensors int64). Requires the GIL.
Tensor scalar_promoted(const Tensor& t, py::handle scalar);
//! A dtype from a streamrt or numpy dtype-like. TypeError otherwise. Requires the GIL.
DType dtype_arg(py::handle obj, const char* what);
//! A shape as a Python tuple. Requires the GIL.
py::tuple shape_to_tuple(const Shape& shape);
//! Runs an enqueueing op with the GIL released; its Errors become ValueError naming `what`.
//! Requires the GIL.
Tensor run_op(const char* what, const std::function<Tensor()>& f);

//! Binds views, indexing, reductions, the element-wise math, comparisons, where, softmax, cat and
//! stack as Tensor methods and module functions. Requires the GIL; after bind_tensor.
void bind_ops(py::module_& m);

}  // namespace streamrt::python
