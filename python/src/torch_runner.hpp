#pragma once
//! \file torch_runner.hpp
//! The calls that _streamrt_torch (bind_torch_runner.cpp, built against torch's C++ API) lends
//! _streamrt (bind_torch.cpp) through a capsule, so that a torch op enqueued by streamrt.torch
//! runs on a worker without the GIL, and `import streamrt` never loads torch. Both modules are
//! built by the same compiler from this header.

#include <Python.h>

#include <string>

namespace streamrt::python {

//! Capsule name of the TorchRunner (attribute `runner` of streamrt._streamrt_torch).
inline constexpr const char* kTorchRunnerCapsule = "streamrt._streamrt_torch.runner";
//! Bumped when TorchRunner changes.
inline constexpr int kTorchRunnerAbi = 1;

//! A torch op bound to its arguments, run later on another thread.
struct TorchRunner {
  int abi;
  //! Binds `op` (a torch OpOverload) to `args` (a tuple) and `kwargs` (a dict or null), with the
  //! dispatch keys this thread excludes now (autograd and ADInplaceOrView under a dispatch mode).
  //! Requires the GIL. Null with a Python error set when they do not bind.
  void* (*prepare)(PyObject* op, PyObject* args, PyObject* kwargs);
  //! Runs a prepared op with those keys excluded. Needs no GIL (torch's kernels do not). False
  //! when it throws: `type` gets the Python exception's name ("IndexError", "RuntimeError") and
  //! `message` torch's message, as eager torch raises it.
  bool (*run)(void* prepared, std::string* type, std::string* message);
  //! Frees a prepared op (run or not). Needs no GIL: torch takes it itself if a tensor's Python
  //! object goes with it.
  void (*destroy)(void* prepared) noexcept;
};

}  // namespace streamrt::python
