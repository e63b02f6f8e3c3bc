#pragma once
//! \file bindings.hpp
//! The binders of the _streamrt extension, one per file, in the order module.cpp calls them (a
//! class is bound before the signatures that name it). Each requires the GIL.

#include <pybind11/pybind11.h>

#include <optional>

#include "streamrt/cpu.hpp"
#include "streamrt/stream.hpp"

namespace streamrt::python {

namespace py = pybind11;

//! streamrt.cpu.Partition's object (bind_cpu.cpp): a cpu::Partition handle, dropped with the GIL
//! released, since the last handle stops the partition's workers, which may be waiting for the
//! GIL to finish Python work.
struct PyPartition {
  std::optional<cpu::Partition> partition;
  PyPartition() = default;
  PyPartition(const PyPartition&) = delete;
  PyPartition& operator=(const PyPartition&) = delete;
  ~PyPartition();
};

//! A NEW stream on `device` with `priority`, in `partition` (a streamrt.cpu.Partition) unless it
//! is None: Stream(device, priority, partition=...) and Partition.new_stream (bind_stream.cpp).
//! Raises ValueError for a priority out of range or a partition with a non-CPU device, TypeError
//! for a partition of another type.
Stream make_stream(py::handle device, int priority, py::handle partition);

//! Device and synchronize(device) (bind_device.cpp).
void bind_device(py::module_& m);

//! The CPU backend's settings: the worker threads' count, spin and scheduling policy
//! (bind_cpu.cpp).
void bind_cpu(py::module_& m);

//! Stream (launching Python callables) and the current and default streams (bind_stream.cpp).
void bind_stream(py::module_& m);

//! StreamContext and stream(): `with` contexts for a stream (bind_stream_context.cpp); after
//! bind_stream.
void bind_stream_context(py::module_& m);

//! Event and wait_all (bind_event.cpp).
void bind_event(py::module_& m);

//! LaunchHandle, what Stream.launch returns (bind_launch_handle.cpp).
void bind_launch_handle(py::module_& m);

//! streamrt.dtype and its values streamrt.float32 ... (bind_dtype.cpp).
void bind_dtype(py::module_& m);

//! Generator, the default generator and manual_seed (bind_generator.cpp).
void bind_generator(py::module_& m);

//! Tensor: attributes, host access (numpy, DLPack, buffer protocol, item), copies and
//! conversions (bind_tensor.cpp).
void bind_tensor(py::module_& m);

//! Tensor creation: from_numpy, from_dlpack, asarray, tensor, zeros, ones, empty, full, arange,
//! rand, randn (bind_factories.cpp).
void bind_factories(py::module_& m);

//! Every op, as Tensor methods, operators and module functions: element-wise math, comparisons,
//! reductions, matmul, views, softmax, joins, allclose, equal (bind_ops.cpp).
void bind_ops(py::module_& m);

//! Tensor.__getitem__ and __setitem__ (bind_indexing.cpp).
void bind_indexing(py::module_& m);

//! Automatic dependency tracking: set_dependency_tracking, DependencyTracking
//! (bind_tracking.cpp).
void bind_tracking(py::module_& m);

//! TraceRecord, Profiler and profile (bind_profiler.cpp).
void bind_profiler(py::module_& m);

//! The caching allocator's counters and controls (bind_memory.cpp).
void bind_memory(py::module_& m);

//! Graph, Stream.is_capturing and is_current_stream_capturing (bind_graph.cpp).
void bind_graph(py::module_& m);

//! The native support of streamrt.torch: its tracker registry and work items
//! (torch/bind_torch.cpp).
void bind_torch(py::module_& m);

}  // namespace streamrt::python
