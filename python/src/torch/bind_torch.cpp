// Native support for streamrt.torch (docs/torch.md): torch ops as tracked stream work. A torch
// storage is tracked through a streamrt tensor standing for its memory (its "tracker", made by
// _torch_tracker and kept by the Python registry), so torch ops, streamrt ops and host reads order
// themselves as accesses to one storage. A torch tensor imported through DLPack shares its
// tracker's tracking (share_tracking) when streamrt.torch is installed.
#include <pybind11/pybind11.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "args.hpp"
#include "bindings.hpp"
#include "interop.hpp"
#include "launch_origin.hpp"
#include "py_exception.hpp"
#include "py_runtime.hpp"
#include "streamrt/cpu.hpp"
#include "streamrt/error.hpp"
#include "streamrt/impl/launch_site.hpp"
#include "streamrt/ops.hpp"
#include "streamrt/stream.hpp"
#include "streamrt/tensor.hpp"
#include "tensor_object.hpp"
#include "torch_queue_limit.hpp"
#include "torch_runner.hpp"
#include "waits.hpp"

namespace streamrt::python {

using namespace pybind11::literals;

namespace {

// The most storages one tracked submission takes (enqueue_tracked's limit).
constexpr std::size_t kMaxTracked = 8;

// torch._C.ExcludeDispatchKeyGuard, set by _set_torch_runtime (a leaked reference).
PyObject* g_exclude_guard = nullptr;

// _streamrt_torch's runner (torch_runner.hpp), when that module was built: set once by
// streamrt.torch's first import, then constant.
const TorchRunner* g_runner = nullptr;

// The runner's reuse ticket of a Python work item's outputs (TorchRunner::list_outputs): given up
// as the item starts, or with the item.
class ReuseHold {
 public:
  explicit ReuseHold(void* ticket = nullptr) noexcept : ticket_(ticket) {}
  ReuseHold(ReuseHold&& other) noexcept : ticket_(std::exchange(other.ticket_, nullptr)) {}
  ReuseHold& operator=(ReuseHold&&) = delete;
  ReuseHold(const ReuseHold&) = delete;
  ReuseHold& operator=(const ReuseHold&) = delete;
  ~ReuseHold() {
    if (ticket_ != nullptr) g_runner->reuse_free(ticket_);
  }
  void started() noexcept {
    if (ticket_ != nullptr) g_runner->reuse_started(ticket_);
  }

 private:
  void* ticket_;
};

// A torch op run in stream order on a worker: fn(*args, **kwargs) with the dispatch keys `keys`
// excluded (those excluded where the op was called: autograd, ADInplaceOrView, ...), called
// without a Python frame. It takes the GIL only for the call (torch releases it inside its
// kernels). Its references are dropped with the GIL held once it ran, and through SafeObject
// when it was skipped.
struct TorchWork {
  SafeObject keys;  // a torch DispatchKeySet, or empty
  SafeObject fn;
  SafeObject args;    // a tuple
  SafeObject kwargs;  // a dict, or empty
  const char* label;
  PendingPythonWork pending;
  QueuedOutputs queued;  // the new outputs among its arguments, counted on its stream
  ReuseHold reuse;       // last: unlists its outputs before the references above go

  void operator()() {
    reuse.started();
    PythonScope scope;
    if (!scope.ok()) {
      throw Error(std::string("torch op '") + label +
                  "' was not run: the Python interpreter is shutting down");
    }
    PyObject* guard = nullptr;
    if (keys) guard = PyObject_CallOneArg(g_exclude_guard, keys.get().ptr());
    PyObject* result = nullptr;
    if (guard != nullptr || !keys) {
      result = PyObject_Call(fn.get().ptr(), args.get().ptr(), kwargs.get().ptr());
    }
    Py_XDECREF(guard);  // restores the excluded keys (an error set meanwhile is kept)
    if (result == nullptr) {
      py::error_already_set e;
      PythonException carried(
          e, current_stream().device().str() + " stream " + std::to_string(current_stream().id()));
      drop();
      throw carried;  // the stream fails with torch's exception (rule 10)
    }
    Py_DECREF(result);
    drop();
  }

  void drop() noexcept {
    keys.reset();
    fn.reset();
    args.reset();
    kwargs.reset();
  }
};

// A torch op prepared by the runner, run in stream order on a worker with no GIL at all. A
// failure becomes the Python exception eager torch raises (taking the GIL only then).
class NativeTorchWork {
 public:
  explicit NativeTorchWork(void* prepared) noexcept : prepared_(prepared) {}
  NativeTorchWork(NativeTorchWork&& other) noexcept
      : pending_(std::move(other.pending_)),
        prepared_(std::exchange(other.prepared_, nullptr)),
        queued_(std::exchange(other.queued_, nullptr)) {}
  NativeTorchWork& operator=(NativeTorchWork&&) = delete;
  NativeTorchWork(const NativeTorchWork&) = delete;
  NativeTorchWork& operator=(const NativeTorchWork&) = delete;
  ~NativeTorchWork() {
    if (prepared_ == nullptr) return;
    if (queued_ != nullptr) finish_queued(queued_, g_runner->output_bytes(prepared_));
    g_runner->destroy(prepared_);
  }

  //! Counts the op's new outputs as queued in `q`, its stream's count (torch_queue_limit.hpp),
  //! until it is gone.
  void count_in(QueuedBytes* q) {
    queued_ = q;
    add_queued_bytes(queued_, g_runner->output_bytes(prepared_));
  }

  void operator()() {
    std::string type, message;
    if (g_runner->run(prepared_, &type, &message)) return;
    PythonScope scope;
    // (the stream adds the op's label to the failure)
    if (!scope.ok()) throw Error("torch op: " + type + ": " + message);
    py::object builtins = py::module_::import("builtins");
    py::object exc = py::getattr(builtins, type.c_str(), py::none());
    PyErr_SetString(exc.is_none() ? PyExc_RuntimeError : exc.ptr(), message.c_str());
    py::error_already_set e;
    throw PythonException(
        e, current_stream().device().str() + " stream " + std::to_string(current_stream().id()));
  }

 private:
  PendingPythonWork pending_;  // first: counts until the prepared op (and its tensors) is gone
  void* prepared_;
  QueuedBytes* queued_ = nullptr;  // the stream's count of queued outputs, once counted
};
// One per torch op: it must fit a queue entry's inline storage, or every op allocates a box.
static_assert(detail::QueueWork::kStoresInline<NativeTorchWork>);

std::vector<const Tensor*> trackers(py::handle seq, const char* what) {
  std::vector<const Tensor*> out;
  for (py::handle item : seq) {
    const Tensor* t = borrowed_tensor(item);
    if (t == nullptr) {
      throw py::type_error(std::string(what) + ": expected streamrt.Tensor trackers, got " +
                           type_name(item));
    }
    out.push_back(t);
  }
  return out;
}

// Makes `s` wait for the hazards of reads/writes, runs `launch` to enqueue the op, and records the
// accesses after it. Up to kMaxTracked storages in one tracked submission; more (torch.cat of many
// tensors, a foreach op over a model's parameters) in two passes: waits before the op, records
// after it (the positions recorded by the first pass are replaced by the second).
template <class Launch>
void submit(Stream& s, const char* label, const std::vector<const Tensor*>& reads,
            const std::vector<const Tensor*>& writes, Launch&& launch) {
  const std::size_t total = reads.size() + writes.size();
  if (total <= kMaxTracked) {
    enqueue_tracked(s, label, reads, writes, [&](Stream& st) { launch(st); });
    return;
  }
  auto chunks = [&](auto&& each) {
    for (std::size_t i = 0; i < writes.size(); i += kMaxTracked) {
      const std::size_t n = std::min(kMaxTracked, writes.size() - i);
      each(std::span<const Tensor* const>(), std::span(writes.data() + i, n));
    }
    for (std::size_t i = 0; i < reads.size(); i += kMaxTracked) {
      const std::size_t n = std::min(kMaxTracked, reads.size() - i);
      each(std::span(reads.data() + i, n), std::span<const Tensor* const>());
    }
  };
  auto nothing = [](Stream&) {};
  chunks([&](auto r, auto w) { enqueue_tracked(s, label, r, w, nothing); });
  launch(s);
  chunks([&](auto r, auto w) { enqueue_tracked(s, label, r, w, nothing); });
}

// TorchHost: what _streamrt_torch's fast path needs from streamrt. Trackers are heap Tensors.

// Never read or written through: only its storage's tracking is used.
Tensor make_tracker(std::uintptr_t address, std::int64_t nbytes, bool fresh) {
  // Fresh memory: whatever was wrapped there before stands for memory freed since.
  if (fresh) claim_memory(reinterpret_cast<const void*>(address), static_cast<std::size_t>(nbytes));
  return from_blob(reinterpret_cast<void*>(address), Shape{nbytes}, DType::Bool);
}

void* host_tracker_new(std::uintptr_t address, std::int64_t nbytes, bool fresh) noexcept {
  try {
    return new Tensor(make_tracker(address, nbytes, fresh));
  } catch (...) {
    // (out of memory, or too many buffers tracked apart): the caller takes the Python path,
    // which raises
    return nullptr;
  }
}

void host_tracker_release(const void* tracker) noexcept {
  release_memory(*static_cast<const Tensor*>(tracker));
}

void* host_tracker_from_python(PyObject* obj) noexcept {
  const Tensor* t = borrowed_tensor(obj);
  if (t == nullptr) return nullptr;
  try {
    return new Tensor(*t);
  } catch (...) {
    return nullptr;
  }
}

PyObject* host_tracker_to_python(const void* tracker) noexcept {
  try {
    return wrap_tensor(Tensor(*static_cast<const Tensor*>(tracker))).release().ptr();
  } catch (py::error_already_set& e) {
    e.restore();
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  }
  return nullptr;
}

void host_tracker_free(void* tracker) noexcept {
  delete static_cast<Tensor*>(tracker);
}

void host_release_object(PyObject* obj) noexcept {
  call_with_gil([](void* o) { Py_DECREF(static_cast<PyObject*>(o)); }, obj);
}

bool host_tracker_idle(const void* tracker) noexcept {
  try {
    return static_cast<const Tensor*>(tracker)->wait_for(std::chrono::nanoseconds(0),
                                                         /*for_write=*/true);
  } catch (...) {
    return true;  // failed work is finished work
  }
}

std::uint64_t host_current_stream_id() noexcept {
  try {
    if (cpu::launch_blocking()) return 0;
    Stream s = current_stream();
    return s.is_capturing() ? 0 : s.id();
  } catch (...) {
    return 0;
  }
}

bool host_tracker_busy(const void* tracker) noexcept {
  try {
    return !static_cast<const Tensor*>(tracker)->settled(/*for_write=*/true);
  } catch (...) {
    return true;  // the host wait says what is wrong
  }
}

TorchEnqueued host_enqueue(const char* label, const void* const* reads, std::size_t n_reads,
                           const void* const* writes, std::size_t n_writes, void* prepared,
                           std::string* error) noexcept {
  bool launched = false;
  try {
    NativeTorchWork work(prepared);  // owns the prepared op from here
    // Launch-blocking mode: the Python path, which waits for the op at its end and raises its
    // failure as torch does (this fallback could only raise a RuntimeError).
    if (cpu::launch_blocking()) return TorchEnqueued::kNo;
    Stream s = current_stream();
    if (s.is_capturing()) return TorchEnqueued::kNo;  // the Python path raises the error
    QueuedBytes* const queued = queued_bytes_of(s);
    work.count_in(queued);
    std::vector<const Tensor*> r(n_reads), w(n_writes);
    for (std::size_t i = 0; i < n_reads; ++i) r[i] = static_cast<const Tensor*>(reads[i]);
    for (std::size_t i = 0; i < n_writes; ++i) w[i] = static_cast<const Tensor*>(writes[i]);
    // Read without the GIL (torch released it): this thread's frames stand still meanwhile.
    const impl::LaunchOriginScope origin(launch_origin_here());
    submit(s, label, r, w, [&](Stream& st) {
      st.launch(label, std::move(work));
      launched = true;
    });
    limit_torch_queue(s, *queued);
    return TorchEnqueued::kYes;
  } catch (const std::exception& e) {
    if (!launched) return TorchEnqueued::kNo;
    *error = e.what();
  } catch (...) {
    if (!launched) return TorchEnqueued::kNo;
    *error = "unknown error";
  }
  return TorchEnqueued::kFailed;
}

const TorchHost g_host{kTorchRunnerAbi,
                       &host_tracker_new,
                       &host_tracker_release,
                       &host_tracker_from_python,
                       &host_tracker_to_python,
                       &host_tracker_free,
                       &host_release_object,
                       &host_tracker_idle,
                       &host_tracker_busy,
                       &host_enqueue,
                       &streamrt::cpu::on_worker_thread,
                       &host_current_stream_id};

// Trackers: the streamrt tensors that stand for torch storages, and host access through them.
// A host access to a tracked storage (_torch_host_access): waits for its writers, and for its
// readers too when `for_write`; raises their failure.
void host_access(py::handle tracker, bool for_write) {
  const Tensor* t = borrowed_tensor(tracker);
  if (t == nullptr) {
    throw py::type_error("_torch_host_access: expected a tracker, got " + type_name(tracker));
  }
  if (!for_write && t->ready()) {
    py::gil_scoped_release release;
    t->wait();  // done: raises a failure, if any
    return;
  }
  wait_interruptibly([&](std::chrono::nanoseconds slice) { return t->wait_for(slice, for_write); });
  py::gil_scoped_release release;
  if (for_write) {
    (void)const_cast<Tensor*>(t)->data_ptr();  // raises the failure of what it waited for
  } else {
    t->wait();
  }
}

void bind_trackers(py::module_& m) {
  m.def(
      "_torch_tracker",
      [](std::uintptr_t address, std::int64_t nbytes, bool fresh) {
        if (address == 0 || nbytes <= 0) {
          throw py::value_error("_torch_tracker: needs the address and size of a torch storage");
        }
        return make_tracker(address, nbytes, fresh);
      },
      "address"_a, "nbytes"_a, "fresh"_a = false,
      "A tensor standing for a torch storage's memory in dependency tracking (streamrt.torch), "
      "joining the tracking of the wrapped and exposed memory it overlaps, or, when fresh (memory "
      "just allocated), starting its own. Never blocks.");
  m.def(
      "_torch_release", [](const Tensor& tracker) { release_memory(tracker); }, "tracker"_a,
      "The tracker's memory was freed: trackers made later over it do not join its tracking.");
  m.def(
      "_memory_tracked",
      [](std::uintptr_t address, std::size_t nbytes) {
        return memory_tracked(reinterpret_cast<const void*>(address), nbytes);
      },
      "address"_a, "nbytes"_a,
      "Whether wrapped or exposed memory overlaps the range (a tracker made there would join it).");
  m.def("_torch_host_access", &host_access, "tracker"_a, "for_write"_a,
        "Blocks (GIL released; Ctrl-C interrupts it in the main thread) until the tracked writers "
        "of the storage (and its readers when for_write) have finished; raises their failure.");
  m.def(
      "_torch_idle",
      [](py::handle tracker) {
        const Tensor* t = borrowed_tensor(tracker);
        if (t == nullptr) {
          throw py::type_error("_torch_idle: expected a tracker, got " + type_name(tracker));
        }
        return t->wait_for(std::chrono::nanoseconds(0), /*for_write=*/true);
      },
      "tracker"_a, "True when no queued work reads or writes the storage any more. Never blocks.");
  m.def(
      "_set_torch_dlpack_hook", [](py::object hook) { set_dlpack_hook(std::move(hook)); }, "hook"_a,
      "hook(obj) -> (tracker, capsule) or None, asked by imports of DLPack producers "
      "(streamrt.torch installs it): the import then shares the tracker's tracking.");
}

// The dispatch mode's path: torch ops as Python callables on the stream.
void bind_python_path(py::module_& m) {
  m.def(
      "_set_torch_runtime",
      [](py::object exclude_guard) {
        Py_XDECREF(g_exclude_guard);
        g_exclude_guard = exclude_guard.release().ptr();
      },
      "exclude_guard"_a, "Gives bind_torch torch._C.ExcludeDispatchKeyGuard.");
  m.def(
      "_torch_label",
      [](py::handle op) { return reinterpret_cast<std::uintptr_t>(callable_label(op)); }, "op"_a,
      "An interned profiler label for `op` (its qualified name), as a number for _torch_enqueue.");
  m.def(
      "_torch_enqueue",
      [](Stream& s, std::uintptr_t label_id, py::object keys, py::object fn, py::tuple args,
         py::object kwargs, py::handle reads, py::handle writes, std::size_t nbytes,
         py::handle outs) {
        if (g_exclude_guard == nullptr && !keys.is_none()) {
          throw py::value_error("_torch_enqueue: call _set_torch_runtime first");
        }
        if (s.is_capturing()) {
          throw Error(
              "streamrt.torch: torch ops cannot be captured into a streamrt graph; run them "
              "outside the streamrt.graph block (or capture streamrt ops)");
        }
        const char* label = reinterpret_cast<const char*>(label_id);  // from _torch_label
        const auto r = trackers(reads, "_torch_enqueue");
        const auto w = trackers(writes, "_torch_enqueue");
        QueuedBytes* const queued = queued_bytes_of(s);
        void* ticket = nullptr;
        if (g_runner != nullptr && !outs.is_none())
          ticket = g_runner->list_outputs(outs.ptr(), s.id());
        TorchWork work{keys.is_none() ? SafeObject() : SafeObject(std::move(keys)),
                       SafeObject(std::move(fn)),
                       SafeObject(std::move(args)),
                       kwargs.is_none() ? SafeObject() : SafeObject(std::move(kwargs)),
                       label,
                       {},
                       QueuedOutputs(queued, nbytes),
                       ReuseHold(ticket)};
        {
          const impl::LaunchOriginScope origin(launch_origin_here());
          submit(s, label, r, w, [&](Stream& st) { st.launch(label, std::move(work)); });
        }
        limit_torch_queue(s, *queued);
        finish_blocking_launches();  // launch-blocking mode: the op's failure is raised here
      },
      "stream"_a, "label"_a, "keys"_a, "fn"_a, "args"_a, "kwargs"_a, "reads"_a, "writes"_a,
      "nbytes"_a = 0, "outs"_a = py::none(),
      "Enqueues fn(*args, **kwargs), with the dispatch keys `keys` excluded, on `stream` after "
      "the tracked writers of `reads` and the writers and readers of `writes` (trackers), then "
      "records the accesses; `nbytes`: the new outputs' among the arguments (the stream's queue "
      "limit); `outs`: those outputs as the arguments hold them (tensors of their own, not the "
      "caller's), whose memory later outputs of the stream may then take once only this op holds "
      "it. `label` comes from _torch_label. Returns at once, or waits as the queue limit says.");
}

// The native path: ops run by _streamrt_torch's runner, and the host side of its fast path.
void bind_native_path(py::module_& m) {
  m.def(
      "_set_torch_runner",
      [](py::capsule runner) {
        auto* r = static_cast<const TorchRunner*>(runner.get_pointer());
        if (std::string(runner.name()) != kTorchRunnerCapsule || r->abi != kTorchRunnerAbi) {
          throw py::value_error("_set_torch_runner: not a TorchRunner of this build");
        }
        g_runner = r;
      },
      "runner"_a, "Takes streamrt._streamrt_torch.runner (torch_runner.hpp).");
  m.def(
      "_torch_host",
      [] { return py::capsule(static_cast<const void*>(&g_host), kTorchHostCapsule); },
      "The TorchHost of torch_runner.hpp, for streamrt._streamrt_torch's fast path.");
  m.def(
      "_torch_enqueue_native",
      [](Stream& s, std::uintptr_t label_id, py::handle op, py::tuple args, py::handle kwargs,
         py::handle reads, py::handle writes, std::size_t nbytes) {
        if (g_runner == nullptr) {
          throw py::value_error("_torch_enqueue_native: call _set_torch_runner first");
        }
        if (s.is_capturing()) {
          throw Error(
              "streamrt.torch: torch ops cannot be captured into a streamrt graph; run them "
              "outside the streamrt.graph block (or capture streamrt ops)");
        }
        const char* label = reinterpret_cast<const char*>(label_id);  // from _torch_label
        const auto r = trackers(reads, "_torch_enqueue_native");
        const auto w = trackers(writes, "_torch_enqueue_native");
        void* prepared = g_runner->prepare(
            op.ptr(), args.ptr(), kwargs.is_none() ? nullptr : kwargs.ptr(), nbytes, s.id());
        if (prepared == nullptr) throw py::error_already_set();
        NativeTorchWork work(prepared);
        QueuedBytes* const queued = queued_bytes_of(s);
        work.count_in(queued);
        {
          const impl::LaunchOriginScope origin(launch_origin_here());
          submit(s, label, r, w, [&](Stream& st) { st.launch(label, std::move(work)); });
        }
        limit_torch_queue(s, *queued);
        finish_blocking_launches();  // launch-blocking mode: the op's failure is raised here
      },
      "stream"_a, "label"_a, "op"_a, "args"_a, "kwargs"_a, "reads"_a, "writes"_a, "nbytes"_a = 0,
      "As _torch_enqueue for a torch OpOverload, run by _streamrt_torch's runner on the worker "
      "without the GIL. Returns at once, or waits as the queue limit says.");
}

// The bound on torch ops queued per stream (torch_queue_limit.hpp).
void bind_queue_limit(py::module_& m) {
  m.def("_torch_set_queue_limit", &set_queue_limit, "items"_a,
        "The most items a stream may have queued before a launch of a torch op on it waits (0: "
        "no limit).");
  m.def("_torch_queue_limit", &queue_limit, "The limit of _torch_set_queue_limit.");
  m.def("_torch_set_queue_bytes_limit", &set_queue_bytes_limit, "nbytes"_a,
        "The most bytes of queued torch ops' new outputs a stream may have before the host "
        "waits (0: no limit).");
  m.def("_torch_queue_bytes_limit", &queue_bytes_limit,
        "The limit of _torch_set_queue_bytes_limit.");
  m.def("_torch_queue_limit_waits", &queue_limit_waits,
        "How many times a host thread waited for its stream's queued torch ops so far.");
}

}  // namespace

void bind_torch(py::module_& m) {
  bind_trackers(m);
  bind_python_path(m);
  bind_native_path(m);
  bind_queue_limit(m);
}

}  // namespace streamrt::python
