// streamrt._streamrt_torch: streamrt.torch's native part on torch's C++ API (Debian's
// libtorch-dev). The TorchRunner of torch_runner.hpp (a prepared op is the operator's dispatcher
// handle with its arguments as a boxed stack: a worker calls it with no Python at all), the tracker
// registry (torch_runner_registry.cpp) and the fast path (torch_runner_fast.cpp), bound for
// streamrt.torch's Python code. Built only where torch's headers are found; without it
// streamrt.torch runs on its Python path (_torch_submit.py, _torch_tracking.py).
#include <ATen/Parallel.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/util/Exception.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/jit/python/pybind_utils.h>

#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <string>
#include <unordered_map>
#include <utility>

#include "torch_graph.hpp"
#include "torch_output_cache.hpp"
#include "torch_output_handover.hpp"
#include "torch_runner.hpp"
#include "torch_runner_fast.hpp"
#include "torch_runner_internal.hpp"
#include "torch_runner_marks.hpp"
#include "torch_runner_threads.hpp"

namespace py = pybind11;

namespace streamrt::python::torch_runner {

namespace {
const TorchHost* g_host = nullptr;  // set once by connect(), then constant
}  // namespace

const TorchHost* host() noexcept {
  return g_host;
}

const c10::OperatorHandle& operator_of(PyObject* op) {
  // OpOverload object -> its operator, found once. The objects are kept (torch caches them for
  // the life of the process anyway). Used with the GIL held, which also guards the map.
  static auto* map = new std::unordered_map<PyObject*, c10::OperatorHandle>;  // leaked at exit
  auto it = map->find(op);
  if (it != map->end()) return it->second;
  py::handle schema = py::handle(op).attr("_schema");
  const std::string name = py::str(schema.attr("name"));
  const std::string overload = py::str(schema.attr("overload_name"));
  auto handle = c10::Dispatcher::singleton().findSchemaOrThrow(name.c_str(), overload.c_str());
  Py_INCREF(op);
  return map->emplace(op, handle).first->second;
}

bool register_boxed_fallback(c10::DispatchKey key, torch::CppFunction fn, std::string* why) {
  try {
    auto library =
        std::make_unique<torch::Library>(torch::Library::IMPL, "_", key, __FILE__, __LINE__);
    library->fallback(std::move(fn));
    (void)library.release();  // leaked on purpose (see the declaration)
    return true;
  } catch (const std::exception& e) {
    *why = e.what();
    return false;
  }
}

c10::DispatchKeySet work_excluded() noexcept {
  // Every key above Python's, as torch's Python fallback excludes them for a dispatch mode, and
  // Python's own (the tensors are plain; a work item run on this thread must not reach the mode).
  static const c10::DispatchKeySet python_and_above =
      c10::DispatchKeySet(c10::DispatchKeySet::FULL) ^
      c10::DispatchKeySet(c10::DispatchKeySet::FULL_AFTER, c10::DispatchKey::Python);
  // The fast path's key too (torch 2.x puts it below Python's), and the pending marks'.
  static const c10::DispatchKeySet ours({c10::DispatchKey::Fake, kMarkKey});
  return c10::impl::tls_local_dispatch_key_set().excluded_ | python_and_above | ours;
}

c10::IValue for_work(const c10::IValue& v) {
  if (v.isTensor()) return alias_for_work(v.toTensor());
  if (v.isTensorList()) {
    c10::List<at::Tensor> list;
    const auto items = v.toListRef();
    list.reserve(items.size());
    for (const c10::IValue& x : items) list.push_back(alias_for_work(x.toTensor()));
    return list;
  }
  if (v.isList() && v.toList().elementType()->isSubtypeOf(*c10::OptionalType::ofTensor())) {
    c10::List<c10::optional<at::Tensor>> list;  // Tensor?[] (index's indices)
    const auto items = v.toListRef();
    list.reserve(items.size());
    for (const c10::IValue& x : items) {
      list.push_back(x.isNone() ? c10::optional<at::Tensor>() : alias_for_work(x.toTensor()));
    }
    return list;
  }
  return v;
}

namespace {

// ------------------------------------------------------------------------------------------------
// The TorchRunner

void* prepare(PyObject* op, PyObject* args, PyObject* kwargs, std::size_t output_bytes,
              std::uint64_t stream_id) {
  try {
    const c10::OperatorHandle& handle = operator_of(op);
    py::kwargs kw = kwargs != nullptr ? py::reinterpret_borrow<py::kwargs>(kwargs) : py::kwargs();
    // A dispatch mode receives wrapped numbers (`x + 2`'s 2) as Python numbers where the schema
    // has a Tensor; torch's own op call accepts them back the same way.
    torch::jit::ToIValueAllowNumbersAsTensors numbers(true);
    auto stack = torch::jit::createStackForSchema(
        handle.schema(), torch::jit::tuple_slice(py::reinterpret_borrow<py::tuple>(args)),
        std::move(kw), c10::nullopt);
    PreparedPtr prepared(new_prepared(handle, work_excluded()));
    prepared->stack.reserve(stack.size());
    for (const c10::IValue& v : stack) add_argument(*prepared, v);
    prepared->output_bytes = output_bytes;
    list_prepared(*prepared, stream_id);
    return prepared.release();
  } catch (py::error_already_set& e) {
    e.restore();
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  }
  return nullptr;
}

// The Python exception eager torch raises for each of its C++ exceptions.
template <class E>
bool as(const std::exception& e, const char* name, std::string* type, std::string* message) {
  const auto* x = dynamic_cast<const E*>(&e);
  if (x == nullptr) return false;
  *type = name;
  *message = x->what_without_backtrace();
  return true;
}

bool run(void* prepared, std::string* type, std::string* message) {
  return run_prepared(*static_cast<Prepared*>(prepared), type, message);
}

void destroy(void* prepared) noexcept {
  free_prepared(static_cast<Prepared*>(prepared));
}

std::size_t output_bytes(const void* prepared) noexcept {
  return static_cast<const Prepared*>(prepared)->output_bytes;
}

// The storages of a Python work item's outputs (a tensor or a sequence of them), listed.
void* list_outputs(PyObject* outs, std::uint64_t stream_id) noexcept {
  try {
    c10::SmallVector<c10::Storage, 4> storages;
    auto add = [&](py::handle h) {
      if (THPVariable_Check(h.ptr())) {
        const at::Tensor& t = THPVariable_Unpack(h.ptr());
        if (t.has_storage()) storages.push_back(t.storage());
      }
    };
    if (PyTuple_Check(outs) || PyList_Check(outs)) {
      for (py::handle h : py::reinterpret_borrow<py::sequence>(outs)) add(h);
    } else {
      add(outs);
    }
    c10::SmallVector<const c10::Storage*, 4> ptrs;
    for (const auto& s : storages) ptrs.push_back(&s);
    return list_reusable(ptrs.data(), ptrs.size(), stream_id);
  } catch (...) {
    return nullptr;  // (out of memory: nothing listed, nothing lost)
  }
}

void reuse_started(void* ticket) noexcept {
  reusable_started(static_cast<ReuseTicket*>(ticket));
}

void reuse_free(void* ticket) noexcept {
  free_reusable(static_cast<ReuseTicket*>(ticket));
}

TorchRunner g_runner{kTorchRunnerAbi, &prepare,      &run,           &destroy,
                     &output_bytes,   &list_outputs, &reuse_started, &reuse_free};

// Whether `op` returns several references to its arguments (a tuple of out= tensors). A single
// `Tensor&` return is copied before the arguments are dropped.
bool returns_several_argument_references(const c10::OperatorHandle& op) {
  const auto& returns = op.schema().returns();
  if (returns.size() < 2) return false;
  for (const auto& r : returns) {
    if (r.alias_info() != nullptr) return true;
  }
  return false;
}

}  // namespace

bool run_prepared(Prepared& prepared, std::string* type, std::string* message) {
  if (prepared.steps) return run_steps(*prepared.steps, type, message);
  Prepared* p = &prepared;
  reusable_started(p->reuse);  // (before the op drops a tensor)
  OneIntraOpThread one;
  try {
    c10::impl::ExcludeDispatchKeyGuard guard(p->excluded);
    make_aliases(*p);
    // torch's boxed wrapper of a kernel returning several references (max.dim_max, sort.values:
    // std::tuple<Tensor&, Tensor&>) drops the arguments from the stack before it copies the
    // returns out of them. Eager callers still own the out tensors then; here the work item's
    // aliases (for_work) are owned by the stack alone, so without this second reference they
    // would be freed first and the returns copied from freed memory (a double free later).
    std::vector<c10::IValue> arguments;
    if (returns_several_argument_references(p->op)) arguments = p->stack;
    if (p->copy_into.size() == 1) {
      // A functional op run for the output handed out at the call: computed there, or copied.
      HandOver handover(p->copy_into[0]);
      p->op.callBoxed(&p->stack);
      handover.finish(std::move(p->stack.at(0)).toTensor(), p->copy_into[0], p->op.schema().name());
      return true;
    }
    p->op.callBoxed(&p->stack);
    // A functional op run for outputs handed out at the call: its results go into them.
    copy_results(p->copy_into, p->stack, p->op.schema().name());
    return true;
  } catch (const std::bad_alloc&) {
    *type = "MemoryError";
    *message = "out of memory";
  } catch (const std::exception& e) {
    if (!as<c10::IndexError>(e, "IndexError", type, message) &&
        !as<c10::ValueError>(e, "ValueError", type, message) &&
        !as<c10::TypeError>(e, "TypeError", type, message) &&
        !as<c10::NotImplementedError>(e, "NotImplementedError", type, message) &&
        !as<c10::Error>(e, "RuntimeError", type, message)) {
      *type = "RuntimeError";
      *message = e.what();
    }
  }
  return false;
}

namespace {

// ------------------------------------------------------------------------------------------------
// Bindings

const at::Tensor& tensor_arg(py::handle obj, const char* what) {
  if (!THPVariable_Check(obj.ptr())) {
    throw py::type_error(std::string(what) + ": expected a torch.Tensor");
  }
  return THPVariable_Unpack(obj.ptr());
}

py::object tracker_object(const TrackerPtr& t) {
  if (!t) return py::none();
  PyObject* obj = t->object();
  if (obj == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(obj);
}

void need_host(const char* what) {
  if (host() == nullptr) throw py::value_error(std::string(what) + ": call connect() first");
}

void connect(py::capsule capsule) {
  auto* h = static_cast<const TorchHost*>(capsule.get_pointer());
  if (std::string(capsule.name()) != kTorchHostCapsule || h->abi != kTorchRunnerAbi) {
    throw py::value_error("connect: not a TorchHost of this build");
  }
  g_host = h;
}

at::ScalarType dtype_arg(py::handle obj) {
  if (!THPDtype_Check(obj.ptr())) throw py::type_error("teach: expected a torch.dtype");
  return reinterpret_cast<THPDtype*>(obj.ptr())->scalar_type;
}

void bind_registry(py::module_& m) {
  using namespace pybind11::literals;
  m.def(
      "registry_tracker",
      [](py::handle t) {
        need_host("registry_tracker");
        TrackerPtr tracker;
        const auto found = registry().tracker(tensor_arg(t, "registry_tracker"), &tracker);
        if (found == Registry::Found::kFailed) throw std::bad_alloc();
        return tracker_object(tracker);
      },
      "tensor"_a,
      "The tracker (a streamrt.Tensor) of the tensor's storage, made on first use; None for a "
      "tensor without memory. Never blocks.");
  m.def(
      "registry_find",
      [](py::handle t) {
        need_host("registry_find");
        return tracker_object(registry().find(tensor_arg(t, "registry_find")));
      },
      "tensor"_a, "The tracker of the tensor's storage, or None when no stream work used it.");
  m.def(
      "registry_fresh",
      [](py::handle t) {
        need_host("registry_fresh");
        TrackerPtr tracker = registry().fresh(tensor_arg(t, "registry_fresh"));
        if (!tracker) throw std::bad_alloc();
        return tracker_object(tracker);
      },
      "tensor"_a, "A new tracker for a tensor just allocated (replacing a stale entry).");
  m.def(
      "registry_share",
      [](py::handle t, py::handle with) {
        need_host("registry_share");
        void* handle = host()->tracker_from_python(with.ptr());
        if (handle == nullptr) throw py::type_error("registry_share: expected a streamrt.Tensor");
        registry().share(tensor_arg(t, "registry_share"), std::make_shared<Tracker>(handle));
      },
      "tensor"_a, "with"_a,
      "Torch work on the tensor is tracked as work on the streamrt tensor `with`'s storage.");
}

// The registry as a whole: its size, its sweep, and the hand-over of its entries to and from
// streamrt.torch's Python registry (_torch_tracking.use_native).
void bind_registry_entries(py::module_& m) {
  using namespace pybind11::literals;
  m.def(
      "registry_sweep", [] { registry().sweep(); },
      "Drops the entries whose storages are gone and whose work has finished.");
  m.def(
      "registry_size", [] { return registry().size(); }, "Entries now.");
  m.def(
      "registry_take_all",
      [] {
        need_host("registry_take_all");
        py::list out;
        for (auto& x : registry().take_all()) {
          py::list weak;
          for (c10::StorageImpl* w : x.weak) weak.append(reinterpret_cast<std::uintptr_t>(w));
          out.append(py::make_tuple(x.base, tracker_object(x.tracker), weak, x.end, x.wrapped));
        }
        return out;
      },
      "Empties the registry: [(address, tracker, [owning weak references as ints], end address, "
      "wrapped)].");
  m.def(
      "registry_put",
      [](py::handle items) {
        need_host("registry_put");
        std::vector<Registry::Exported> entries;
        for (py::handle item : items) {
          auto t = item.cast<py::tuple>();
          void* handle = host()->tracker_from_python(t[1].ptr());
          if (handle == nullptr)
            throw py::type_error("registry_put: expected streamrt.Tensor trackers");
          Registry::Exported x{t[0].cast<std::uintptr_t>(),
                               std::make_shared<Tracker>(handle),
                               {},
                               t[3].cast<std::uintptr_t>(),
                               t[4].cast<bool>()};
          for (py::handle w : t[2])
            x.weak.push_back(reinterpret_cast<c10::StorageImpl*>(w.cast<std::uintptr_t>()));
          entries.push_back(std::move(x));
        }
        registry().put(std::move(entries));
      },
      "items"_a,
      "Adds entries as registry_take_all() gives them (taking over the weak references).");
}

// The native part's dispatch keys excluded while a Python work item runs (see _Exclude in
// _torch_submit.py): torch's Python API has no name for them. And the item's one intra-op thread,
// set as for the runner's items (torch's Python setter would change other threads' start too).
struct ExcludeOurs {
  OneIntraOpThread threads;
  c10::impl::ExcludeDispatchKeyGuard guard{c10::DispatchKeySet({c10::DispatchKey::Fake, kMarkKey})};
};

// The fast path's switches: connecting it, turning it on, and the threads it guards and takes.
void bind_fast(py::module_& m) {
  using namespace pybind11::literals;
  py::class_<ExcludeOurs>(
      m, "ExcludeOurs",
      "Excludes the fast path's and the pending marks' keys, and sets one intra-op thread on this "
      "thread, while it lives.")
      .def(py::init<>());
  m.def(
      "connect",
      [](py::capsule capsule) {
        connect(std::move(capsule));
        std::string why;
        const bool fast = register_fallback(&why);
        return py::make_tuple(fast, why);
      },
      "host"_a,
      "Takes streamrt._streamrt._torch_host() and registers the fast path's fallback: (whether the "
      "fast path is available, why not).");
  m.def("set_enabled", &set_enabled, "on"_a, "The fast path on or off for every thread.");
  m.def(
      "quiesce",
      [](double timeout_s) {
        py::gil_scoped_release release;
        return quiesce(std::chrono::duration_cast<std::chrono::nanoseconds>(
            std::chrono::duration<double>(timeout_s)));
      },
      "timeout_s"_a,
      "After set_enabled(False): waits (GIL released) until no fast-path enqueue is under way; "
      "False after timeout_s.");
  m.def(
      "set_waiter", [](py::object waiter) { set_waiter(waiter.ptr()); }, "waiter"_a,
      "waiter(tensor, for_write): the host wait of a marked tensor's pending work (once).");
  m.def(
      "mark",
      [](const std::vector<py::handle>& tensors) {
        for (py::handle t : tensors) mark(tensor_arg(t, "mark"));
      },
      "tensors"_a,
      "The tensors' pending state travels with them: work on their memory was just enqueued.");
  m.def(
      "marked", [](py::handle t) { return tensor_arg(t, "marked").key_set().has(kMarkKey); },
      "tensor"_a, "Whether the tensor carries a pending mark (tests).");
  m.def(
      "set_handler", [](py::object handler) { set_handler(handler.ptr()); }, "handler"_a,
      "handler(op, args, kwargs): where ops of threads in a stream context go when the fast path "
      "does not enqueue them (once, at import).");
  m.def("set_active", &set_active, "on"_a,
        "This thread enters or leaves its outermost stream context.");
  m.def("set_guarded", &set_guarded, "on"_a,
        "This thread's ops outside stream contexts wait for their tensors' pending work, or not.");
  m.def("fast_counts", &fast_counts,
        "(ops the fast path enqueued, ops of active threads sent on to the Python path) so far.");
  py::enum_<Probe>(m, "Probe", "bench/torch_install.py's breakdown (torch_runner_fast.hpp).")
      .value("OFF", Probe::kOff)
      .value("ENTRY", Probe::kEntry)
      .value("WORK", Probe::kWork)
      .value("NO_KERNEL", Probe::kNoKernel);
  m.def("_set_probe", &set_probe, "probe"_a,
        "bench/torch_install.py's breakdown only: Probe.OFF, ENTRY, WORK or NO_KERNEL.");
}

// What the Python path teaches the fast path about an op it missed: its kind, or how it was
// enqueued. The enums are torch_runner_fast.hpp's own, so Python never spells their values.
void bind_teaching(py::module_& m) {
  using namespace pybind11::literals;
  py::enum_<Kind>(m, "Kind", "What an op is, as the Python path planned it (teach_kind).")
      .value("UNKNOWN", Kind::kUnknown)
      .value("META", Kind::kMeta)
      .value("HOST", Kind::kHost)
      .value("TRACKED", Kind::kTracked);
  py::enum_<Mode>(m, "Mode", "How a taught op's work item runs (teach).")
      .value("WRITE", Mode::kWrite)
      .value("OUT", Mode::kOut)
      .value("COPY", Mode::kCopy);
  m.def("pending", &pending,
        "Whether an op of this thread waits to be taught (teach, teach_kind).");
  m.def(
      "teach_kind",
      [](py::handle op, Kind kind) {
        if (kind != Kind::kMeta && kind != Kind::kHost) {
          throw py::value_error("teach_kind: kind is Kind.META or Kind.HOST");
        }
        teach_kind(op.ptr(), kind);
      },
      "op"_a, "kind"_a, "The pending op is a view or allocation (META) or a host op (HOST).");
  m.def(
      "teach",
      [](py::handle op, Mode mode, std::vector<std::string> written, py::handle out_op,
         std::vector<std::string> out_names, py::handle outs) {
        std::vector<TaughtOutput> specs;
        for (py::handle o : outs) {
          auto t = o.cast<py::tuple>();
          specs.push_back(TaughtOutput{t[0].cast<std::vector<std::int64_t>>(),
                                       t[1].cast<std::vector<std::int64_t>>(), dtype_arg(t[2])});
        }
        return teach(op.ptr(), mode, written, out_op.is_none() ? nullptr : out_op.ptr(), out_names,
                     std::move(specs));
      },
      "op"_a, "mode"_a, "written"_a, "out_op"_a, "out_names"_a, "outs"_a,
      "The pending op was enqueued: in place (WRITE, `written` names what it writes), through "
      "its out= overload `out_op` (OUT) or functionally with a copy (COPY) into outputs of "
      "layouts `outs` [(sizes, strides, dtype)]. True when the fast path takes such calls from "
      "now on.");
}

// The output cache (torch_output_cache.hpp): the Python path's outputs, and its settings.
void bind_output_cache(py::module_& m) {
  using namespace pybind11::literals;
  m.def(
      "empty_output",
      [](std::vector<std::int64_t> sizes, std::vector<std::int64_t> strides, py::handle dtype) {
        return empty_output(sizes, strides, dtype_arg(dtype));
      },
      "sizes"_a, "strides"_a, "dtype"_a, "A new CPU tensor of this layout on the output cache.");
  m.def(
      "empty_stream_output",
      [](std::vector<std::int64_t> sizes, std::vector<std::int64_t> strides, py::handle dtype) {
        return empty_stream_output(sizes, strides, dtype_arg(dtype));
      },
      "sizes"_a, "strides"_a, "dtype"_a,
      "A new output of this layout for the op this thread launches next on its current stream: "
      "on the memory of a queued op's storage that only that op holds, or on the output cache.");
  // The fewest bytes of outputs whose block may be handed on (the block sizes grow with the bytes):
  // a Python work item holds such outputs through tensors of its own (_torch_submit.py).
  std::size_t n = kReusableBlock;
  while (n > 0 && output_block_size(n - 1) >= kReusableBlock) --n;
  m.attr("reusable_from_nbytes") = n;
  m.def("_use_output_reuse", &use_output_reuse, "on"_a,
        "Measurements and tests: new stream outputs may take queued ops' memory (True).");
  m.def(
      "set_output_cache_limit", [](std::size_t bytes) { set_output_cache_limit(bytes); },
      "nbytes"_a, "How many bytes of freed outputs the cache keeps.");
  m.def("empty_output_cache", &empty_output_cache, "Frees every kept block.");
  m.def(
      "output_cache_stats",
      [] {
        const OutputCacheStats s = output_cache_stats();
        return py::dict("cached_bytes"_a = s.cached_bytes, "limit_bytes"_a = s.limit_bytes,
                        "hits"_a = s.hits, "misses"_a = s.misses, "reused"_a = s.reused);
      },
      "The output cache's figures: cached_bytes, limit_bytes, hits, misses, reused.");
  m.def("_use_output_cache", &use_output_cache, "on"_a,
        "Measurements only: outputs on the cache (True) or on torch's CPU allocator.");
}

// The hand-over of an output's memory to its functional op (torch_output_handover.hpp).
void bind_handover(py::module_& m) {
  using namespace pybind11::literals;
  m.def(
      "handover_stats",
      [] {
        const HandOverStats s = handover_stats();
        return py::dict("in_place"_a = s.in_place, "copied"_a = s.copied);
      },
      "Results of functional ops on streams computed in their outputs (in_place) and copied "
      "into them (copied) so far.");
  m.def("handover_available", &handover_available,
        "Whether ops' first allocations may take their outputs' memory now.");
  m.def("_use_handover", &use_handover, "on"_a,
        "Measurements and tests: functional ops may compute in their outputs (True).");
  m.def(
      "_handover_run",
      [](const at::Tensor& out, py::function fn) {
        HandOver handover(out);
        py::object result = fn();
        at::Tensor r = THPVariable_Unpack(result.ptr());
        result = py::object();  // (the op's tensor held by `r` alone)
        handover.finish(std::move(r), out, "fn");
      },
      "out"_a, "fn"_a,
      "Tests: runs fn() as a work item runs a functional op for the output `out` (its first "
      "allocation may take out's memory), then puts fn's result tensor into `out`.");
  m.def(
      "_copy_results",
      [](const std::vector<at::Tensor>& outs, py::function fn) {
        py::tuple got = fn();
        std::vector<c10::IValue> results;
        for (py::handle r : got) results.emplace_back(THPVariable_Unpack(r.ptr()));
        got = py::tuple();
        copy_results(outs, results, "fn");
      },
      "outs"_a, "fn"_a,
      "Tests: puts the tensors of the tuple fn() returns into `outs` as a work item puts the "
      "results of a functional op with several outputs into the outputs handed out at its call.");
  m.def(
      "_raw_roundtrip",
      [](std::size_t nbytes) {
        c10::Allocator* a = c10::GetCPUAllocator();
        void* p = a->raw_allocate(nbytes);
        std::memset(p, 0x5a, nbytes);
        a->raw_deallocate(p);
      },
      "nbytes"_a, "Tests: raw_allocate() and raw_deallocate() through torch's CPU allocator.");
}

// Capture and replay (torch_graph.hpp), wrapped by streamrt.torch.CPUGraph.
void bind_graph(py::module_& m) {
  // torch's own messages without the C++ backtrace, as torch raises them.
  auto checked = [](auto&& fn) {
    try {
      fn();
    } catch (const c10::Error& e) {
      throw std::runtime_error(e.what_without_backtrace());
    }
  };
  py::class_<CapturedGraph>(m, "_CapturedGraph",
                            "A capture of the torch ops of a stream (streamrt.torch.CPUGraph).")
      .def(py::init<>())
      .def(
          "begin", [checked](CapturedGraph& g) { checked([&] { g.begin(); }); },
          "Starts recording this thread's ops on its current stream.")
      .def(
          "end", [checked](CapturedGraph& g) { checked([&] { g.end(); }); }, "Ends the capture.")
      .def("abort", &CapturedGraph::abort, "Ends the capture and drops what it recorded.")
      .def(
          "reset", [checked](CapturedGraph& g) { checked([&] { g.reset(); }); },
          "Drops the capture.")
      .def(
          "replay", [checked](CapturedGraph& g) { checked([&] { g.replay(); }); },
          py::call_guard<py::gil_scoped_release>(),
          "Enqueues the captured ops as one item on this thread's current stream.")
      .def_property_readonly("num_ops", &CapturedGraph::size, "Ops captured.")
      .def_property_readonly("capturing", &CapturedGraph::capturing, "Whether it captures now.");
  m.def("_fail_next_capture_record", &CapturedGraph::fail_next_record_for_testing,
        "Tests: the next op a capture records fails to be recorded, as when out of memory.");
  m.def("_inside_stream_context", &inside_stream_context,
        "Whether this thread's torch ops are stream work now (inside a stream context).");
}

}  // namespace
}  // namespace streamrt::python::torch_runner

PYBIND11_MODULE(_streamrt_torch, m) {
  namespace tr = streamrt::python::torch_runner;
  m.doc() = "streamrt.torch's native part on torch's C++ API (torch_runner.hpp)";
  m.attr("runner") = py::capsule(&tr::g_runner, streamrt::python::kTorchRunnerCapsule);
  m.attr("abi") = streamrt::python::kTorchRunnerAbi;
  // The torch whose headers this was compiled with: loaded beside another, it is not used.
  m.attr("built_for") = STREAMRT_TORCH_BUILT_FOR;
  tr::bind_registry(m);
  tr::bind_registry_entries(m);
  tr::bind_fast(m);
  tr::bind_teaching(m);
  tr::bind_output_cache(m);
  tr::bind_handover(m);
  tr::bind_graph(m);
}
