#pragma once
//! \file torch_runner_marks.hpp
//! Pending state that travels with the tensor (docs/torch.md, "What waits: never reading early"):
//! a tensor whose memory stream work reads or writes carries a dispatch key of its own (kMarkKey),
//! so every op on it, on any thread (one that never entered a stream context included), reaches
//! mark_fallback() first, which waits for that work (guard()). Tensors without pending work carry
//! no key and pay nothing.

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <Python.h>

#include <string>

namespace streamrt::python::torch_runner {

//! The key of a pending mark (torchdistx's deferred-init key, unused by torch itself).
constexpr c10::DispatchKey kMarkKey = c10::DispatchKey::DeferredInit;

//! Registers mark_fallback() on kMarkKey; false (with why) when another library has one there.
bool register_mark_fallback(std::string* why);

//! The fallback of marked tensors' ops: outside a stream context, guard(); then the op goes on.
void mark_fallback(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack);

//! `t` (and every view made of it from now on) carries the key. Called right after work on its
//! memory was enqueued. Never blocks.
void mark(const at::Tensor& t) noexcept;

//! For an op of a thread outside stream contexts: waits (through the waiter, GIL taken) for the
//! queued work that writes each tensor argument the op reads, and that reads or writes each one
//! it writes, and raises that work's failure; views and allocations never wait. `all`: every
//! tensor argument, found by its memory (a guarded thread); else only those carrying a pending
//! mark. Drops the mark from tensors with no pending work. May block.
void guard(const c10::OperatorHandle& op, const torch::jit::Stack& stack, bool all = false);

//! The Python callable `waiter(tensor, for_write)` that blocks until the tensor's pending work is
//! done (streamrt.torch's host wait). Requires the GIL; call once, before any op is marked.
void set_waiter(PyObject* waiter);

}  // namespace streamrt::python::torch_runner
