#pragma once
//! \file bindings.hpp
//! Shared pieces of the _streamrt extension: argument conversion and the per-area binders.

#include <pybind11/pybind11.h>

#include <string>

#include "streamrt/device.hpp"

namespace streamrt::python {

namespace py = pybind11;

//! Device from a Python argument: None (CPU), a streamrt.Device, or text such as "cpu", "cpu:0".
//! Raises ValueError for malformed text and TypeError for other types; `what` names the caller in
//! the message. Requires the GIL. Does not check that the device has a backend.
Device to_device(py::handle obj, const char* what);

//! Short type name of a Python object ("int", "numpy.ndarray") for messages. Requires the GIL.
std::string type_name(py::handle obj);

//! Binds Device, Stream, StreamContext, Event and the device-wide functions. Requires the GIL.
void bind_core(py::module_& m);

//! Binds dtypes, Generator, Tensor, the ops, dependency tracking and the profiler. Requires the
//! GIL.
void bind_tensor(py::module_& m);

//! Binds Graph, Stream.is_capturing and is_current_stream_capturing. Requires the GIL; after
//! bind_core.
void bind_graph(py::module_& m);

}  // namespace streamrt::python
