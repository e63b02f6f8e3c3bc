#pragma once
//! \file torch_runner.hpp
//! The calls that _streamrt_torch (bind_torch_runner.cpp and torch_runner_*.cpp, built against
//! torch's C++ API) and _streamrt (bind_torch.cpp) lend each other through capsules, so that a
//! torch op enqueued by streamrt.torch runs on a worker without the GIL, a small op is enqueued
//! without any Python at all (torch_runner_fast.cpp), and `import streamrt` never loads torch.
//! Both modules are built by the same compiler from this header.

#include <Python.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace streamrt::python {

//! Capsule name of the TorchRunner (attribute `runner` of streamrt._streamrt_torch).
inline constexpr const char* kTorchRunnerCapsule = "streamrt._streamrt_torch.runner";
//! Capsule name of the TorchHost (streamrt._streamrt._torch_host()).
inline constexpr const char* kTorchHostCapsule = "streamrt._streamrt.torch_host";
//! Bumped when TorchRunner or TorchHost changes.
inline constexpr int kTorchRunnerAbi = 7;

//! A torch op bound to its arguments, run later on another thread.
struct TorchRunner {
  int abi;
  //! Binds `op` (a torch OpOverload) to `args` (a tuple) and `kwargs` (a dict or null), with the
  //! dispatch keys this thread excludes now (autograd and ADInplaceOrView under a dispatch mode);
  //! `output_bytes`: those of the new outputs among them (output_bytes()); `stream_id`: the
  //! stream this thread launches it on next (its tensors' memory is listed for reuse by later
  //! outputs of that stream, torch_output_reuse.hpp; 0: not listed). Requires the GIL. Null with
  //! a Python error set when they do not bind.
  void* (*prepare)(PyObject* op, PyObject* args, PyObject* kwargs, std::size_t output_bytes,
                   std::uint64_t stream_id);
  //! Runs a prepared op with those keys excluded. Needs no GIL (torch's kernels do not). False
  //! when it throws: `type` gets the Python exception's name ("IndexError", "RuntimeError") and
  //! `message` torch's message, as eager torch raises it.
  bool (*run)(void* prepared, std::string* type, std::string* message);
  //! Frees a prepared op (run or not). Needs no GIL: torch takes it itself if a tensor's Python
  //! object goes with it.
  void (*destroy)(void* prepared) noexcept;
  //! The bytes of the new outputs a prepared op holds (allocated at its call; 0 when they are not
  //! known), counted against its stream's queue limit. Never blocks.
  std::size_t (*output_bytes)(const void* prepared) noexcept;
  //! For a work item of streamrt's that holds the torch tensors `outs` (a tensor or a sequence of
  //! them) and that this thread launches next on stream `stream_id`: lists their memory for reuse
  //! by later outputs of that stream (torch_output_reuse.hpp). A ticket for reuse_started() and
  //! reuse_free(), or null (nothing listed). Requires the GIL; never throws.
  void* (*list_outputs)(PyObject* outs, std::uint64_t stream_id) noexcept;
  //! The item of `ticket` starts (or is dropped): call before it drops its tensors. Idempotent;
  //! null does nothing. Needs no GIL.
  void (*reuse_started)(void* ticket) noexcept;
  //! reuse_started(), then frees the ticket. Null does nothing. Needs no GIL.
  void (*reuse_free)(void* ticket) noexcept;
};

//! What enqueue() did.
enum class TorchEnqueued : int {
  kYes = 0,     //!< queued (the op's accesses recorded)
  kNo = 1,      //!< nothing queued (a graph capture, a failure before the launch): the caller
                //!< takes the Python path, which queues the op or raises the error there
  kFailed = 2,  //!< the op was queued but recording its accesses failed; `error` says why
};

//! streamrt's side, lent to _streamrt_torch: trackers (streamrt tensors standing for a torch
//! storage's memory in dependency tracking; opaque here) and the enqueue of a prepared op. None of
//! these needs the GIL unless it says so; all are thread-safe.
struct TorchHost {
  int abi;
  //! A new tracker for `nbytes` of memory at `address`, joining the tracking of the wrapped and
  //! exposed memory it overlaps, or, when `fresh` (memory just allocated), starting its own; null
  //! when out of memory or refused. Never blocks.
  void* (*tracker_new)(std::uintptr_t address, std::int64_t nbytes, bool fresh) noexcept;
  //! The tracker's memory was freed: trackers made later over it do not join its tracking.
  void (*tracker_release)(const void* tracker) noexcept;
  //! A tracker sharing the storage (so the tracking) of the streamrt.Tensor `obj`; null when `obj`
  //! is not one. Requires the GIL.
  void* (*tracker_from_python)(PyObject* obj) noexcept;
  //! A new streamrt.Tensor on the tracker's storage; null with a Python error set on failure.
  //! Requires the GIL.
  PyObject* (*tracker_to_python)(const void* tracker) noexcept;
  //! Frees a tracker. Never blocks on the GIL.
  void (*tracker_free)(void* tracker) noexcept;
  //! Drops a reference to a Python object, with or without the GIL (without it, later: see
  //! SafeObject). Never blocks on the GIL.
  void (*release_object)(PyObject* obj) noexcept;
  //! True when no queued work reads or writes the tracker's storage any more. Never blocks.
  bool (*tracker_idle)(const void* tracker) noexcept;
  //! True when a host access must wait through streamrt.torch's host wait: work on the tracker's
  //! storage is queued, or its last writer failed (the wait raises that failure). Never blocks.
  bool (*tracker_busy)(const void* tracker) noexcept;
  //! Enqueues `prepared` (a TorchRunner op; always taken over, freed on failure) on this thread's
  //! current CPU stream after the tracked writers of `reads` and the writers and readers of
  //! `writes` (trackers), then records the accesses; `label` must outlive the work. Never blocks.
  TorchEnqueued (*enqueue)(const char* label, const void* const* reads, std::size_t n_reads,
                           const void* const* writes, std::size_t n_writes, void* prepared,
                           std::string* error) noexcept;
  //! True on one of streamrt's CPU worker threads (streamrt::cpu::on_worker_thread()), false on a
  //! host thread, also while it runs queued items as it waits. Never blocks.
  bool (*on_worker_thread)() noexcept;
  //! The id of this thread's current CPU stream, where an op launched now would be stream work
  //! on it; 0 where it would not (a graph capture, launch-blocking mode). Never blocks.
  std::uint64_t (*current_stream_id)() noexcept;
};

}  // namespace streamrt::python
