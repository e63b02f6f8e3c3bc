#pragma once
//! \file bindings.hpp
//! Shared pieces of the _streamrt extension: argument conversion and the per-area binders.

#include <pybind11/pybind11.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "streamrt/device.hpp"
#include "streamrt/tensor.hpp"

namespace streamrt::python {

namespace py = pybind11;

//! Device from a Python argument: None (CPU), a streamrt.Device, or text such as "cpu", "cpu:0".
//! Raises ValueError for malformed text and TypeError for other types; `what` names the caller in
//! the message. Requires the GIL. Does not check that the device has a backend.
Device to_device(py::handle obj, const char* what);

//! An integer argument `name` of `what` (an int or anything with __index__, such as a numpy
//! integer; not a bool) in [lo, hi]. Raises TypeError naming the argument for other types, and
//! `range_error` (ValueError by default; IndexError for indices) naming the value and the range
//! when it is outside, however large: no input reaches pybind11's bare cast errors. Requires the
//! GIL.
std::int64_t int_arg(py::handle obj, const char* what, const char* name, std::int64_t lo,
                     std::int64_t hi, PyObject* range_error = PyExc_ValueError);

//! A number argument `name` of `what` as a double: TypeError naming it for non-numbers,
//! OverflowError naming the value and the limit for an int too large for a float (numpy's
//! exception for the same). Requires the GIL.
double float_arg(py::handle obj, const char* what, const char* name);

//! Short type name of a Python object ("int", "numpy.ndarray") for messages. Requires the GIL.
std::string type_name(py::handle obj);

//! Waits with the GIL released, in slices, until `try_wait(slice)` returns true. Between slices,
//! with the GIL held, runs Python's signal handlers: Ctrl-C in the main thread raises
//! KeyboardInterrupt (thrown as py::error_already_set) and leaves the awaited work queued and
//! running. Requires the GIL. Off the main thread (which never gets signals) it does not slice.
void wait_interruptibly(const std::function<bool(std::chrono::nanoseconds)>& try_wait);

//! As wait_interruptibly, for at most `timeout` (any length, nanoseconds::max() included): true
//! when `try_wait` succeeded, false when the time ran out. `try_wait` must change nothing when it
//! times out, so that slices add up to one wait. Requires the GIL.
bool wait_interruptibly_for(const std::function<bool(std::chrono::nanoseconds)>& try_wait,
                            std::chrono::nanoseconds timeout);

//! Binds Device, Stream, StreamContext, Event and the device-wide functions. Requires the GIL.
void bind_core(py::module_& m);

//! Binds dtypes, Generator, Tensor, the ops, dependency tracking and the profiler. Requires the
//! GIL.
void bind_tensor(py::module_& m);

//! Gives the bound Tensor class `cls` its buffer protocol (memoryview, bytes, numpy.frombuffer):
//! the consumer waits (interruptibly) for the tensor's pending work, a failed writer or Ctrl-C
//! raises its Python exception, and a strided view is refused when the consumer asks for a
//! contiguous buffer. Requires the GIL.
void enable_tensor_buffer(py::handle cls);

//! Binds the caching allocator's counters and controls. Requires the GIL.
void bind_memory(py::module_& m);
//! Binds Graph, Stream.is_capturing and is_current_stream_capturing. Requires the GIL; after
//! bind_core.
void bind_graph(py::module_& m);
//! Binds the native support of streamrt.torch (bind_torch.cpp). Requires the GIL.
void bind_torch(py::module_& m);

//! `obj.__dlpack__()`, or, when streamrt.torch is installed and `obj` is a torch tensor, a capsule
//! taken without waiting, with `tracker` set to the tensor standing for the torch storage's
//! tracking (the import must share it). Requires the GIL.
py::object dlpack_capsule(py::handle obj, Tensor& tracker);

}  // namespace streamrt::python
