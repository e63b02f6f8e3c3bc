#pragma once
//! \file interop.hpp
//! Tensors to and from what Python programs hold: numpy arrays, DLPack producers and consumers
//! (torch, numpy, capsules), objects with the buffer protocol, nested lists and numbers. Memory is
//! shared, never copied, whenever the layout and dtype allow it; host access first waits (GIL
//! released, interruptibly) for the work that writes the tensor. All require the GIL.

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <optional>

#include "streamrt/tensor.hpp"

namespace streamrt::python {

namespace py = pybind11;

//! numpy, imported on first use (importing streamrt does not import it) and kept for the life of
//! the process.
py::module_ numpy();

//! The numpy dtype of `d`.
py::dtype numpy_dtype(DType d);

//! True for a numpy number (numpy.generic); tensor_object.hpp's is_python_scalar asks this last.
bool is_numpy_scalar(py::handle obj);

//! The dtype torch gives an op of a `d` tensor and the Python number `scalar`: a float makes
//! integer and bool tensors float32, an int makes bool tensors int64, otherwise `d`.
DType scalar_promoted_dtype(DType d, py::handle scalar);

//! The memory of tensor `self` (a streamrt.Tensor) as a numpy array, without copying; the array
//! keeps `self` alive. Waits for the queued work that writes the tensor and, when `writable`,
//! also for the work that reads it (the host may then write); read-only array otherwise.
py::array numpy_view(py::object self, bool writable);

//! A tensor sharing the memory of an aligned numpy array with its strides (views included);
//! a read-only array only when `allow_readonly`. TypeError or ValueError naming `what` otherwise.
Tensor from_numpy_array(py::handle obj, bool allow_readonly, const char* what);

//! A tensor sharing the memory of a DLPack producer (an object with __dlpack__, or a capsule),
//! with its strides. The capsule is consumed only when the tensor is made. A torch tensor that
//! streamrt.torch tracks (the hook of set_dlpack_hook) is taken without waiting, and the tensor
//! shares the torch storage's tracking (share_tracking).
Tensor from_dlpack_object(py::handle obj);

//! Sets (None: clears) the hook that imports of DLPack producers ask first: hook(obj) returns
//! (tracker, capsule) for a torch tensor that streamrt.torch tracks, or None. Set by
//! streamrt.torch.install(), cleared by uninstall().
void set_dlpack_hook(py::object hook);

//! A DLPack capsule sharing `t`'s memory (waits for its pending work first); `stream` must be
//! None.
py::object to_dlpack_capsule(const Tensor& t, py::object stream);

//! asarray's semantics: a tensor from `obj` (a tensor, numpy array, DLPack or buffer object,
//! nested lists, a number) in `dtype` (when given). copy: nullopt = share when possible, true =
//! always copy, false = never copy (ValueError when it must). Python data: floats become float32
//! (torch's default dtype), ints int64.
Tensor asarray_tensor(py::handle obj, std::optional<DType> dtype, std::optional<bool> copy,
                      bool allow_readonly, const char* what);

//! An op's operand: a Tensor as it is; numpy arrays, DLPack/buffer objects and lists shared or
//! converted (read-only memory is fine, the op only reads it). TypeError for anything else.
Tensor tensor_operand(py::handle obj, const char* what);

//! Gives the bound Tensor class `cls` its buffer protocol (memoryview, bytes, numpy.frombuffer):
//! the consumer waits (interruptibly) for the tensor's pending work, a failed writer or Ctrl-C
//! raises its Python exception, and a strided view is refused when the consumer asks for a
//! contiguous buffer.
void enable_tensor_buffer(py::handle cls);

}  // namespace streamrt::python
