#pragma once
//! \file bindings.hpp
//! Shared pieces of the _streamrt extension: argument conversion and the per-area binders.

#include <pybind11/pybind11.h>

#include <chrono>
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

//! Short type name of a Python object ("int", "numpy.ndarray") for messages. Requires the GIL.
std::string type_name(py::handle obj);

//! Waits with the GIL released, in slices, until `try_wait(slice)` returns true. Between slices,
//! with the GIL held, runs Python's signal handlers: Ctrl-C in the main thread raises
//! KeyboardInterrupt (thrown as py::error_already_set) and leaves the awaited work queued and
//! running. Requires the GIL. Off the main thread (which never gets signals) it does not slice.
void wait_interruptibly(const std::function<bool(std::chrono::nanoseconds)>& try_wait);

//! Binds Device, Stream, StreamContext, Event and the device-wide functions. Requires the GIL.
void bind_core(py::module_& m);

//! Binds dtypes, Generator, Tensor, the ops, dependency tracking and the profiler. Requires the
//! GIL.
void bind_tensor(py::module_& m);

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
