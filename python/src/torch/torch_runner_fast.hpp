#pragma once
//! \file torch_runner_fast.hpp
//! streamrt.torch's fast path (torch_runner_fast.cpp): small ops enqueued from a dispatch-key
//! fallback without Python, taught by the Python path what each op is.

#include <Python.h>
#include <c10/core/ScalarType.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "torch_runner_internal.hpp"

namespace streamrt::python::torch_runner {

//! What an op is, as the Python path planned it (the C++ twin of _torch_plan's kinds; bound to
//! Python as _streamrt_torch.Kind).
enum class Kind { kUnknown, kMeta, kHost, kTracked };
//! How a tracked op's work item runs: the op itself (in-place ops and out= calls, which write
//! some arguments), its out= overload into new outputs, or the op then a copy into new outputs
//! (bound to Python as _streamrt_torch.Mode).
enum class Mode { kWrite, kOut, kCopy };

//! One new output of a taught op: its layout.
struct TaughtOutput {
  std::vector<std::int64_t> sizes;
  std::vector<std::int64_t> strides;
  at::ScalarType dtype;
};

//! True while an op of this thread that missed the cache is on the Python path (the Python path
//! then teaches what it decided). Never blocks.
bool pending() noexcept;

//! Whether this thread is inside a stream context with the fast path on. Never blocks.
bool inside_stream_context() noexcept;

//! The pending op `op` (a torch OpOverload) is a view or allocation (kMeta: run at once, no
//! Python) or a host op (kHost: always the Python path). Ignored when `op` is not the pending op.
//! Requires the GIL.
void teach_kind(PyObject* op, Kind kind);

//! The pending op `op`, with the pending argument layouts, was enqueued by the Python path as
//! `mode` says: `written` names the arguments it writes (kWrite), `out_op` is its out= overload
//! with the output arguments `out_names` (kOut), `outs` the new outputs' layouts (kOut, kCopy).
//! Later calls with those layouts take the fast path. False (nothing learnt) when `op` is not the
//! pending op or the fast path cannot run it. Requires the GIL.
bool teach(PyObject* op, Mode mode, const std::vector<std::string>& written, PyObject* out_op,
           const std::vector<std::string>& out_names, std::vector<TaughtOutput> outs);

//! Turns the fast path on or off for every thread (streamrt.torch installed, with the runner).
//! Never blocks; thread-safe.
void set_enabled(bool on) noexcept;
//! Waits until no fast-path enqueue that saw the fast path enabled is under way (call after
//! set_enabled(false), before synchronizing, so nothing is enqueued after). False after `timeout`.
//! Needs no GIL; release it while waiting.
bool quiesce(std::chrono::nanoseconds timeout);

//! The Python callable `handler(op, args, kwargs)` that an op of a thread inside a stream context
//! goes to when the fast path does not enqueue it (streamrt.torch's planner; no dispatch mode is
//! set inside contexts). Requires the GIL; call once, before any thread is active.
void set_handler(PyObject* handler);

//! This thread enters (true) or leaves (false) its outermost stream context: includes the fast
//! path's dispatch key in this thread's dispatch, or stops. Never blocks.
void set_active(bool on);

//! This thread's ops outside stream contexts wait for the pending work on their tensors (true:
//! streamrt.torch is installed and the thread installed it or entered a context), or not. The
//! fast path's key stays included meanwhile; its fallback does the waits (guard()). Never blocks.
void set_guarded(bool on);

//! Registers the fallback on the fast path's dispatch key (once per process). False, with the
//! reason in `why`, when torch refused (another library registered one on that key).
bool register_fallback(std::string* why);

//! For bench/torch_install.py's breakdown of the host's cost, never for real work: kEntry, every
//! op of an active thread runs its kernel at once from the fallback (the key's entry cost); kWork,
//! the fast path does everything but the enqueue and runs the work item at once; kNoKernel, the
//! same without running it (the outputs hold garbage). Bound to Python as _streamrt_torch.Probe.
enum class Probe { kOff, kEntry, kWork, kNoKernel };
//! Sets the probe (kOff: real work). Not thread-safe with ops in flight.
void set_probe(Probe probe);

//! (ops enqueued by the fast path, ops of active threads sent on to the Python path) so far.
std::pair<long, long> fast_counts() noexcept;

}  // namespace streamrt::python::torch_runner
