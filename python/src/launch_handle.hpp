#pragma once
//! \file launch_handle.hpp
//! What Stream.launch(fn, ...) returns (bind_stream.cpp makes it, bind_launch_handle.cpp binds
//! it): fn's result once it ran, and the event recorded right after it.

#include <memory>

#include "py_runtime.hpp"
#include "streamrt/event.hpp"

namespace streamrt::python {

//! What a launched callable returned, once it ran. Written by the worker that runs it and read
//! by LaunchHandle.result after the handle's event completed, both with the GIL held.
struct LaunchResult {
  SafeObject value;
  bool ran = false;
};

//! Stream.launch's handle: the callable's result, and the event recorded right after it. Copies
//! share the result.
struct LaunchHandle {
  std::shared_ptr<LaunchResult> result;
  Event done;
};

}  // namespace streamrt::python
