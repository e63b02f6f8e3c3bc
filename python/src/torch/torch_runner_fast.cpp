// The fast path of streamrt.torch (docs/torch.md, "How it works"): a boxed fallback on a dispatch
// key that sits just above the Python key, so below autograd. A thread inside a stream context
// includes that key, and every aten op of the thread reaches fallback() below, where an op
// already seen with the same argument layouts is enqueued without any Python: the arguments'
// layouts are the cache key, the outputs are allocated here, the trackers come from the registry,
// and the work item (the op's out= overload, the op itself for in-place and out= calls, or the op
// plus a copy into the outputs) goes to the stream through TorchHost::enqueue. Everything else
// goes on to the Python key, where streamrt.torch's dispatch mode handles it as before and
// teaches this cache what it decided (teach_kind, teach): the Python code stays the one place
// where ops are planned, inferred and checked.
#include "torch_runner_fast.hpp"

#include <ATen/EmptyTensor.h>
#include <ATen/core/stack.h>
#include <c10/core/DefaultDtype.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/util/SmallVector.h>
#include <pthread.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/jit/python/pybind_utils.h>
#include <torch/library.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "torch_graph.hpp"
#include "torch_output_cache.hpp"
#include "torch_output_handover.hpp"
#include "torch_runner_marks.hpp"

namespace streamrt::python::torch_runner {
namespace {

// The key of the fast path: Fake, which torch's own eager code does not use on real tensors. It
// sits below autograd's, ADInplaceOrView's, Functionalize's and the conjugate/negative bits', so
// this fallback sees the ops a dispatch mode sees; torch 1.13 puts it above the Python key, 2.x
// below it (so a thread inside a context has no dispatch mode set: see to_handler()).
constexpr c10::DispatchKey kKey = c10::DispatchKey::Fake;
const c10::DispatchKeySet kBelowKey(c10::DispatchKeySet::FULL_AFTER, kKey);
// Below both this key and Python's, whichever order this torch puts them in: straight to the
// kernel.
const c10::DispatchKeySet kBelowPython =
    kBelowKey & c10::DispatchKeySet(c10::DispatchKeySet::FULL_AFTER, c10::DispatchKey::Python);
// The keys a plain CPU tensor may have for the fast path (no subclass, no lazy conj/neg bits, no
// zero tensor, no names), its pending mark included.
const std::uint64_t kPlainCpu =
    c10::DispatchKeySet({c10::DispatchKey::CPU, c10::DispatchKey::AutogradCPU,
                         c10::DispatchKey::ADInplaceOrView, c10::DispatchKey::AutocastCPU,
                         kMarkKey})
        .raw_repr();

// Whether streamrt.torch is installed with the runner (set_enabled), read at every op; relaxed
// where it only routes an op (a thread that sees it late sends one more op to the Python path,
// which checks the same), seq_cst where it decides an enqueue (see InFlight).
std::atomic<bool> g_enabled{false};

// Fast-path enqueues under way, counted in stripes (one per thread hash, on its own cache line, so
// threads issuing ops do not share a counter). uninstall() turns g_enabled off and then waits
// (quiesce) until every stripe is zero, and only then synchronizes: an enqueue either saw the
// flag off, or is counted before it read the flag on (both seq_cst: neither can miss the other),
// so none lands after that synchronize.
struct alignas(64) InFlight {
  std::atomic<int> n{0};
};
constexpr std::size_t kInFlightStripes = 16;
InFlight g_in_flight[kInFlightStripes];

InFlight& in_flight() noexcept {
  thread_local InFlight* mine =
      &g_in_flight[std::hash<std::thread::id>()(std::this_thread::get_id()) % kInFlightStripes];
  return *mine;
}
// Whether this thread is inside a stream context (set_active), with the key included.
thread_local bool tls_active = false;
// Whether this thread's ops outside stream contexts wait for the pending work on their tensors
// (set_guarded: the thread installed streamrt.torch or entered a context since), key included.
thread_local bool tls_guarded = false;

// bench/torch_install.py's breakdown of the host's cost (set_probe, torch_runner_fast.hpp).
std::atomic<Probe> g_probe{Probe::kOff};  // relaxed: a benchmark's switch, set between loops

std::atomic<long> g_fast{0};    // ops enqueued here (fast_counts)
std::atomic<long> g_python{0};  // ops sent on to the Python key from an active thread

using Key = std::vector<std::int64_t>;

struct KeyHash {
  std::size_t operator()(const Key& k) const noexcept {
    std::uint64_t h = 1469598103934665603ull;  // FNV-1a over the words, with a final mix
    for (std::int64_t w : k) {
      h ^= static_cast<std::uint64_t>(w);
      h *= 1099511628211ull;
    }
    return static_cast<std::size_t>(h ^ (h >> 31));
  }
};

struct OutSpec {
  std::vector<std::int64_t> sizes;
  std::vector<std::int64_t> strides;
  at::ScalarType dtype;
};

// How a taught op runs (one per op and mode; immutable once made).
struct Recipe {
  Mode mode;
  c10::OperatorHandle run_op;     // the op itself, or its out= overload (kOut)
  std::vector<bool> written;      // per argument (kWrite)
  std::vector<int> returns_from;  // per return, the argument it is (kWrite)
  std::vector<int> out_args;  // per argument of the out= overload: >= 0 the op's, < 0 output -1-k
};

// One op with one argument layout (immutable once made).
struct Entry {
  std::shared_ptr<const Recipe> recipe;
  std::vector<OutSpec> outs;
};

struct Plan {
  explicit Plan(const c10::OperatorHandle& o) : op(o) {
    const auto& name = o.schema().operator_name();
    label = name.overload_name.empty() ? name.name : name.name + "." + name.overload_name;
    // A view is known from its schema: the first call need not ask the Python path, whose result
    // would come back with a Python object already made for it (x.as_subclass(C) then fails).
    if (returns_views(o.schema())) kind = Kind::kMeta;
  }
  c10::OperatorHandle op;
  std::string label;  // the profiler's "aten::add.Tensor" (stable: plans are never freed)
  Kind kind = Kind::kUnknown;
  std::shared_ptr<const Recipe> recipes[3];  // by Mode
  std::unordered_map<Key, std::shared_ptr<const Entry>, KeyHash> entries;
};

// Plans by operator (the schema's address: one per registered operator, stable). One mutex guards
// the plans and their entries; it is never held while calling out of this file.
std::mutex g_mutex;
std::unordered_map<const void*, std::unique_ptr<Plan>>* g_plans =
    new std::unordered_map<const void*, std::unique_ptr<Plan>>;  // leaked: used at exit
std::size_t g_entry_count = 0;
constexpr std::size_t kMaxEntries = 20000;  // then the cache starts again (as the Python one)

Plan& plan_locked(const c10::OperatorHandle& op) {
  auto& slot = (*g_plans)[&op.schema()];
  if (!slot) slot = std::make_unique<Plan>(op);
  return *slot;
}

// ------------------------------------------------------------------------------------------------
// Scanning the arguments: the cache key, and the tensors to track.

enum Tag : std::int64_t {
  kNone = 1,
  kTensor,
  kWrapped,
  kUndefined,
  kInt,
  kDouble,
  kBool,
  kList,
  kString,
  kDevice,
};

struct Scan {
  Key key;
  c10::SmallVector<std::pair<const at::Tensor*, int>, 8> tensors;  // (tensor, argument index)
  bool ok = true;
};

bool plain_cpu(const at::Tensor& t) {
  // (Bitwise: DispatchKeySet's difference keeps the backend bits.)
  const std::uint64_t keys = t.key_set().raw_repr();
  return t.layout() == at::kStrided && (keys & ~kPlainCpu) == 0 &&
         t.key_set().has(c10::DispatchKey::CPU);
}

void scan_tensor(const at::Tensor& t, int arg, bool with_key, Scan& s) {
  if (!t.defined()) {
    s.key.push_back(kUndefined);
    return;
  }
  if (!plain_cpu(t)) {
    s.ok = false;
    return;
  }
  const c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  const bool wrapped = impl->is_wrapped_number();  // `x + 2`'s 2: fresh memory, never tracked
  if (!wrapped) s.tensors.emplace_back(&t, arg);
  if (!with_key) return;
  s.key.push_back(wrapped ? kWrapped : kTensor);
  s.key.push_back(static_cast<std::int64_t>(t.scalar_type()));
  const auto sizes = impl->sizes();
  const auto strides = impl->strides();
  s.key.push_back(static_cast<std::int64_t>(sizes.size()));
  s.key.insert(s.key.end(), sizes.begin(), sizes.end());
  s.key.insert(s.key.end(), strides.begin(), strides.end());
}

void scan_value(const c10::IValue& v, int arg, bool with_key, Scan& s);

void scan_string(const std::string& text, Scan& s) {
  s.key.push_back(kString);
  s.key.push_back(static_cast<std::int64_t>(text.size()));
  for (std::size_t i = 0; i < text.size(); i += sizeof(std::int64_t)) {
    std::int64_t w = 0;
    std::memcpy(&w, text.data() + i, std::min(sizeof w, text.size() - i));
    s.key.push_back(w);
  }
}

void scan_value(const c10::IValue& v, int arg, bool with_key, Scan& s) {
  if (v.isTensor()) {
    scan_tensor(v.toTensor(), arg, with_key, s);
  } else if (v.isList()) {
    const auto items = v.toListRef();
    if (with_key) {
      s.key.push_back(kList);
      s.key.push_back(static_cast<std::int64_t>(items.size()));
    }
    for (const c10::IValue& x : items) {
      if (x.isList()) {
        s.ok = false;  // (no aten op nests lists of values that matter here)
        return;
      }
      scan_value(x, arg, with_key, s);
    }
  } else if (!with_key) {
    if (v.isDevice() && v.toDevice().type() != c10::DeviceType::CPU) s.ok = false;
  } else if (v.isNone()) {
    s.key.push_back(kNone);
  } else if (v.isInt()) {
    s.key.push_back(kInt);
    s.key.push_back(v.toInt());
  } else if (v.isDouble()) {
    const double d = v.toDouble();
    std::int64_t bits;
    std::memcpy(&bits, &d, sizeof bits);
    s.key.push_back(kDouble);
    s.key.push_back(bits);
  } else if (v.isBool()) {
    s.key.push_back(kBool);
    s.key.push_back(v.toBool() ? 1 : 0);
  } else if (v.isString()) {
    scan_string(v.toStringRef(), s);
  } else if (v.isDevice() && v.toDevice().type() == c10::DeviceType::CPU) {
    s.key.push_back(kDevice);
  } else {
    s.ok = false;  // a generator, a complex number, another device, an object: the Python path
  }
}

// The arguments of `op` on top of `stack`, scanned; stops at the first unsupported one.
void scan(const c10::OperatorHandle& op, const torch::jit::Stack& stack, bool with_key, Scan& s) {
  const std::size_t n = op.schema().arguments().size();
  if (with_key) {
    s.key.reserve(8 + 12 * n);
    // The default dtype decides factories' and Python floats' result types.
    s.key.push_back(static_cast<std::int64_t>(c10::typeMetaToScalarType(c10::get_default_dtype())));
  }
  const std::size_t first = stack.size() - n;
  for (std::size_t i = 0; i < n && s.ok; ++i) {
    scan_value(stack[first + i], static_cast<int>(i), with_key, s);
  }
}

// ------------------------------------------------------------------------------------------------
// The fast path

struct Access {
  const void* tracker;
  bool write;
};

void add_access(c10::SmallVector<Access, 12>& accesses, const void* tracker, bool write) {
  for (Access& a : accesses) {
    if (a.tracker == tracker) {
      a.write = a.write || write;  // read and written: a write
      return;
    }
  }
  accesses.push_back(Access{tracker, write});
}

// The work item of an op enqueued as `recipe` says, its arguments from the `stack` (from
// `first`) and its new outputs `outs` (add_argument: the worker makes their tensors).
PreparedPtr work_item(const Recipe& recipe, const torch::jit::Stack& stack, std::size_t first,
                      const std::vector<at::Tensor>& outs) {
  PreparedPtr prepared(new_prepared(recipe.run_op, work_excluded()));
  if (recipe.mode == Mode::kOut) {
    prepared->stack.reserve(recipe.out_args.size());
    for (int a : recipe.out_args) {
      add_argument(*prepared, a >= 0 ? stack[first + a] : c10::IValue(outs[-1 - a]));
    }
  } else {
    prepared->stack.reserve(stack.size() - first);
    for (std::size_t i = first; i < stack.size(); ++i) add_argument(*prepared, stack[i]);
    if (recipe.mode == Mode::kCopy) {
      for (const auto& o : outs) add_copy_target(*prepared, o);
    }
  }
  return prepared;
}

// Replaces the op's `n` arguments on the stack by its returns: the written arguments they alias
// (kWrite), or the new outputs.
void put_returns(const Recipe& recipe, torch::jit::Stack& stack, std::size_t n,
                 std::vector<at::Tensor> outs) {
  const std::size_t first = stack.size() - n;
  c10::SmallVector<c10::IValue, 4> returns;
  for (int a : recipe.returns_from) returns.push_back(stack[first + a]);
  torch::jit::drop(stack, n);
  for (auto& r : returns) stack.push_back(std::move(r));
  if (recipe.mode != Mode::kWrite) {
    for (auto& o : outs) stack.emplace_back(std::move(o));
  }
}

// A capture records one stream's ops: an op of this thread on another stream is refused.
void check_capture_stream(const CapturedGraph& graph, const Plan& plan) {
  TORCH_CHECK(host()->current_stream_id() == graph.stream_id(),
              "streamrt.torch.CPUGraph: ", plan.label,
              " is launched on another stream than the capture's; a capture records the ops of "
              "one stream (capture each stream's part into a graph of its own)");
}

// Records an op enqueued during a capture into `graph`: its work item's copy, its accesses (their
// trackers among `keep`), and the tensors it reaches.
void record(CapturedGraph& graph, PreparedPtr item, const c10::SmallVector<Access, 12>& accesses,
            const c10::SmallVector<TrackerPtr, 12>& keep, const Scan& scan,
            const std::vector<at::Tensor>& outs) {
  std::vector<std::pair<TrackerPtr, bool>> tracked;
  for (const Access& a : accesses) {
    for (const TrackerPtr& t : keep) {
      if (t->get() == a.tracker) {
        tracked.emplace_back(t, a.write);
        break;
      }
    }
  }
  std::vector<at::Tensor> tensors;
  for (const auto& [tensor, arg] : scan.tensors) tensors.push_back(*tensor);
  graph.record(std::move(item), tracked, outs, tensors);
}

// Enqueues the op of `plan` as `entry` says; false when it must take the Python path instead
// (nothing was queued then, and the stack is as it was).
bool run_fast(const Plan& plan, const Entry& entry, const Scan& scan, torch::jit::Stack& stack) {
  CapturedGraph* const graph = capturing();
  if (graph != nullptr) check_capture_stream(*graph, plan);
  const Recipe& recipe = *entry.recipe;
  const std::size_t n = plan.op.schema().arguments().size();
  const std::size_t first = stack.size() - n;
  c10::SmallVector<TrackerPtr, 12> keep;  // the trackers, alive until the enqueue is done
  c10::SmallVector<Access, 12> accesses;
  for (const auto& [tensor, arg] : scan.tensors) {
    TrackerPtr tracker;
    const auto found = registry().tracker(*tensor, &tracker);
    if (found == Registry::Found::kFailed) return false;
    if (found == Registry::Found::kNoMemory) continue;
    add_access(accesses, tracker->get(), recipe.mode == Mode::kWrite && recipe.written[arg]);
    keep.push_back(std::move(tracker));
  }
  std::vector<at::Tensor> outs;
  outs.reserve(entry.outs.size());
  std::size_t output_bytes = 0;
  for (const OutSpec& o : entry.outs) {
    outs.emplace_back(empty_stream_output(o.sizes, o.strides, o.dtype));
    output_bytes += outs.back().storage().nbytes();
    if (outs.back().storage().nbytes() == 0) continue;
    TrackerPtr tracker = registry().fresh(outs.back());
    if (!tracker) return false;
    add_access(accesses, tracker->get(), true);
    keep.push_back(std::move(tracker));
  }
  c10::SmallVector<const void*, 12> reads, writes;
  for (const Access& a : accesses) (a.write ? writes : reads).push_back(a.tracker);

  auto prepared = work_item(recipe, stack, first, outs);
  prepared->output_bytes = output_bytes;
  std::string error;
  if (const Probe probe = g_probe.load(std::memory_order_relaxed); probe != Probe::kOff) {
    std::string type;
    if (probe == Probe::kWork) run_prepared(*prepared, &type, &error);
    prepared.reset();
    keep.clear();
  } else {
    // A captured op's copy is made before the enqueue lists its memory for reuse and gives it up.
    PreparedPtr captured(graph != nullptr ? copy_prepared(*prepared) : nullptr);
    list_prepared(*prepared, host()->current_stream_id());
    const TorchEnqueued done =
        host()->enqueue(plan.label.c_str(), reads.data(), reads.size(), writes.data(),
                        writes.size(), prepared.release(), &error);
    if (done == TorchEnqueued::kNo) return false;
    TORCH_CHECK(done == TorchEnqueued::kYes, "streamrt.torch: ", plan.label,
                " was queued, but recording its accesses failed: ", error);
    if (graph != nullptr) record(*graph, std::move(captured), accesses, keep, scan, outs);
  }
  // Every tensor the work touches carries its pending state from now on (marks).
  for (const auto& [tensor, arg] : scan.tensors) mark(*tensor);
  for (const auto& o : outs) mark(o);
  put_returns(recipe, stack, n, std::move(outs));
  g_fast.fetch_add(1, std::memory_order_relaxed);  // (a statistic: no order needed)
  return true;
}

// What the Python path is asked to teach (teach_kind, teach): set on this thread while an op
// that missed the cache goes on to the Python key.
struct Pending {
  Plan* plan;
  Key key;
  bool has_key;
};
thread_local Pending* tls_pending = nullptr;

struct PendingScope {
  explicit PendingScope(Pending* p) noexcept : previous(std::exchange(tls_pending, p)) {}
  ~PendingScope() { tls_pending = previous; }
  PendingScope(const PendingScope&) = delete;
  PendingScope& operator=(const PendingScope&) = delete;
  Pending* previous;
};

void to_python(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
  op.redispatchBoxed(ks & kBelowKey, stack);
}

// streamrt.torch's Python handler of the ops this file does not know (set_handler; a leaked
// reference, set once before any thread is active).
PyObject* g_handler = nullptr;

// torch.ops.<namespace>.<name>.<overload>: the OpOverload object a dispatch mode is handed, found
// once per operator (with the GIL, which guards the map; the objects live as long as torch).
PyObject* overload_of(const c10::OperatorHandle& op) {
  static auto* map = new std::unordered_map<const void*, PyObject*>;  // leaked: used at exit
  auto it = map->find(&op.schema());
  if (it != map->end()) return it->second;
  const auto& name = op.schema().operator_name();
  const std::size_t colons = name.name.find("::");
  py::object o = py::module_::import("torch")
                     .attr("ops")
                     .attr(name.name.substr(0, colons).c_str())
                     .attr(name.name.substr(colons + 2).c_str())
                     .attr(name.overload_name.empty() ? "default" : name.overload_name.c_str());
  return map->emplace(&op.schema(), o.release().ptr()).first->second;
}

// The op as a dispatch mode would see it, handed to the Python handler: its OpOverload, its
// positional and keyword-only arguments as Python objects; its results back on the stack. The ops
// the handler runs meanwhile (meta inference, host ops) do not come back here: they run eagerly.
// A Python exception travels through torch to the caller as itself (python_error).
void to_handler(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  c10::impl::ExcludeDispatchKeyGuard no_reentry{c10::DispatchKeySet(kKey)};
  py::gil_scoped_acquire gil;
  const auto& schema = op.schema();
  auto arguments = torch::jit::pop(*stack, schema.arguments().size());
  try {
    py::list args;
    py::dict kwargs;
    for (std::size_t i = 0; i < arguments.size(); ++i) {
      const auto& a = schema.arguments()[i];
      py::object v = torch::jit::toPyObject(std::move(arguments[i]));
      if (a.kwarg_only()) {
        kwargs[a.name().c_str()] = std::move(v);
      } else {
        args.append(std::move(v));
      }
    }
    py::object out = py::reinterpret_borrow<py::object>(g_handler)(py::handle(overload_of(op)),
                                                                   py::tuple(args), kwargs);
    const auto& returns = schema.returns();
    if (returns.size() == 1) {
      stack->push_back(torch::jit::toIValue(out, returns[0].type()));
    } else if (returns.size() > 1) {
      py::tuple t = py::reinterpret_borrow<py::tuple>(out);
      for (std::size_t i = 0; i < returns.size(); ++i) {
        stack->push_back(torch::jit::toIValue(t[i], returns[i].type()));
      }
    }
  } catch (py::error_already_set& e) {
    e.restore();
    python_error error;
    error.persist();
    throw error;
  }
}

// Where an op of an active thread goes when this file does not enqueue it: the Python handler
// (no dispatch mode is set inside a context), or the Python key before one is set.
void not_here(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
  TORCH_CHECK(capturing() == nullptr, "streamrt.torch.CPUGraph: ", op.schema().name(),
              " cannot be captured: it is not stream work that the capture can record (an op "
              "that reads data on the host, or one not yet run with these argument layouts). Run "
              "the block once on the stream and synchronize before capturing it (a warm-up), "
              "and keep host reads out of it");
  if (g_handler != nullptr) return to_handler(op, stack);
  to_python(op, ks, stack);
}

// Runs the op on the fast path when its plan knows the argument layout; false when it did not
// (the Python path takes it). Counted in flight while it decides and enqueues (see InFlight).
bool enqueued_fast(Plan& plan, Scan& s, torch::jit::Stack& stack) {
  struct Counted {
    explicit Counted(InFlight& f) noexcept : f(f) { f.n.fetch_add(1, std::memory_order_seq_cst); }
    // Also when the enqueue throws: quiesce() would wait for it forever otherwise.
    ~Counted() { f.n.fetch_sub(1, std::memory_order_release); }  // quiesce() sees the enqueue
    Counted(const Counted&) = delete;
    Counted& operator=(const Counted&) = delete;
    InFlight& f;
  } counted(in_flight());
  if (!g_enabled.load(std::memory_order_seq_cst)) return false;
  std::shared_ptr<const Entry> entry;
  {
    std::lock_guard lock(g_mutex);
    auto it = plan.entries.find(s.key);
    if (it != plan.entries.end()) entry = it->second;
  }
  return entry && run_fast(plan, *entry, s, stack);
}

void fallback(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
  if (!tls_active || !g_enabled.load(std::memory_order_relaxed)) {
    if (!g_enabled.load(std::memory_order_relaxed)) {  // uninstalled meanwhile
      set_guarded(false);
      set_active(false);
    } else {
      guard(op, *stack, /*all=*/true);  // outside a context: wait for what the op touches
    }
    return to_python(op, ks, stack);
  }
  if (g_probe.load(std::memory_order_relaxed) == Probe::kEntry) {
    return op.redispatchBoxed(ks & kBelowPython, stack);
  }
  Plan* plan;
  Kind kind;
  {
    std::lock_guard lock(g_mutex);
    plan = &plan_locked(op);
    kind = plan->kind;
  }
  if (kind == Kind::kHost) {
    g_python.fetch_add(1, std::memory_order_relaxed);
    return not_here(op, ks, stack);
  }
  Scan s;
  scan(op, *stack, kind != Kind::kMeta, s);
  if (kind == Kind::kMeta && s.ok) {
    // A view or an allocation of plain tensors: what the Python path would do, without it.
    return op.redispatchBoxed(ks & kBelowPython, stack);
  }
  if (s.ok && kind == Kind::kTracked && enqueued_fast(*plan, s, *stack)) return;
  g_python.fetch_add(1, std::memory_order_relaxed);
  Pending pending{plan, std::move(s.key), s.ok && kind != Kind::kMeta};
  PendingScope scope(&pending);
  not_here(op, ks, stack);
}

// ------------------------------------------------------------------------------------------------
// Teaching (with the GIL, from the Python path, while an op of this thread is pending).

bool is_tensor_type(const c10::TypePtr& t) {
  return t->kind() == c10::TypeKind::TensorType;
}

bool all_returns_tensors(const c10::FunctionSchema& schema) {
  for (const auto& r : schema.returns()) {
    if (!is_tensor_type(r.type())) return false;
  }
  return true;
}

int argument_index(const c10::FunctionSchema& schema, const std::string& name) {
  const auto& args = schema.arguments();
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i].name() == name) return static_cast<int>(i);
  }
  return -1;
}

std::shared_ptr<const Recipe> write_recipe(const Plan& plan,
                                           const std::vector<std::string>& written) {
  const auto& schema = plan.op.schema();
  auto r = std::make_shared<Recipe>(Recipe{Mode::kWrite, plan.op, {}, {}, {}});
  r->written.assign(schema.arguments().size(), false);
  for (const auto& name : written) {
    const int i = argument_index(schema, name);
    if (i < 0) return nullptr;
    r->written[i] = true;
  }
  // Each return is a written argument (the one of its alias set), a single tensor.
  for (const auto& ret : schema.returns()) {
    if (!is_tensor_type(ret.type()) || ret.alias_info() == nullptr) return nullptr;
    int from = -1;
    const auto& args = schema.arguments();
    for (std::size_t i = 0; i < args.size(); ++i) {
      const auto* info = args[i].alias_info();
      if (info != nullptr && info->isWrite() && is_tensor_type(args[i].type()) &&
          info->beforeSets() == ret.alias_info()->beforeSets()) {
        from = static_cast<int>(i);
      }
    }
    if (from < 0 || !r->written[from]) return nullptr;
    r->returns_from.push_back(from);
  }
  return r;
}

std::shared_ptr<const Recipe> out_recipe(const Plan& plan, const c10::OperatorHandle& out_op,
                                         const std::vector<std::string>& out_names) {
  const auto& schema = plan.op.schema();
  if (!all_returns_tensors(schema) || out_names.size() != schema.returns().size()) return nullptr;
  auto r = std::make_shared<Recipe>(Recipe{Mode::kOut, out_op, {}, {}, {}});
  for (const auto& a : out_op.schema().arguments()) {
    int k = -1;
    for (std::size_t j = 0; j < out_names.size(); ++j) {
      if (out_names[j] == a.name()) k = static_cast<int>(j);
    }
    if (k >= 0) {
      r->out_args.push_back(-1 - k);
    } else {
      const int i = argument_index(schema, a.name());
      if (i < 0) return nullptr;
      r->out_args.push_back(i);
    }
  }
  return r;
}

// The functional op itself, its results copied into the outputs handed out at the call, or
// computed in them (torch_output_handover.hpp); null where a return is not a tensor.
std::shared_ptr<const Recipe> copy_recipe(const Plan& plan) {
  if (!all_returns_tensors(plan.op.schema())) return nullptr;
  return std::make_shared<Recipe>(Recipe{Mode::kCopy, plan.op, {}, {}, {}});
}

// The pending op when `op` is it (the Python path may teach for another op: then nothing).
Pending* pending_for(PyObject* op) {
  Pending* p = tls_pending;
  if (p == nullptr) return nullptr;
  if (&operator_of(op).schema() != &p->plan->op.schema()) return nullptr;
  return p;
}

void lock_for_fork() {
  g_mutex.lock();
  registry().lock_for_fork();
}

void unlock_after_fork() {
  registry().unlock_after_fork();
  g_mutex.unlock();
}

}  // namespace

bool pending() noexcept {
  return tls_pending != nullptr;
}

bool inside_stream_context() noexcept {
  return tls_active && g_enabled.load(std::memory_order_relaxed);  // see g_enabled
}

void teach_kind(PyObject* op, Kind kind) {
  Pending* p = pending_for(op);
  if (p == nullptr) return;
  std::lock_guard lock(g_mutex);
  p->plan->kind = kind;
}

// Whether `op`, taught as enqueued through its out= overload `out_op`, runs better as itself with
// its result computed in the output (torch_output_handover.hpp): where that overload is torch's
// generated one (the op and a copy), for an op of one output.
bool computes_in_place(const c10::OperatorHandle& op, PyObject* out_op) {
  return op.schema().returns().size() == 1 && handover_available() &&
         generated_out_overload(operator_of(out_op));
}

bool teach(PyObject* op, Mode mode, const std::vector<std::string>& written, PyObject* out_op,
           const std::vector<std::string>& out_names, std::vector<TaughtOutput> outs) {
  Pending* p = pending_for(op);
  if (p == nullptr || !p->has_key) return false;
  Plan& plan = *p->plan;
  std::shared_ptr<const Recipe> recipe;
  {
    std::lock_guard lock(g_mutex);
    recipe = plan.recipes[static_cast<int>(mode)];
  }
  if (!recipe) {
    if (mode == Mode::kWrite) {
      recipe = write_recipe(plan, written);
    } else if (mode == Mode::kOut) {
      if (out_op != nullptr) {
        recipe = computes_in_place(plan.op, out_op)
                     ? copy_recipe(plan)
                     : out_recipe(plan, operator_of(out_op), out_names);
      }
    } else {
      recipe = copy_recipe(plan);
    }
    if (!recipe) return false;
  }
  const std::size_t wanted = mode == Mode::kWrite ? 0 : plan.op.schema().returns().size();
  if (outs.size() != wanted) return false;
  auto entry = std::make_shared<Entry>();
  entry->recipe = recipe;
  for (auto& o : outs) {
    entry->outs.push_back(OutSpec{std::move(o.sizes), std::move(o.strides), o.dtype});
  }
  std::lock_guard lock(g_mutex);
  if (!plan.recipes[static_cast<int>(mode)]) plan.recipes[static_cast<int>(mode)] = recipe;
  if (g_entry_count >= kMaxEntries) {
    for (auto& [schema, other] : *g_plans) other->entries.clear();
    g_entry_count = 0;
  }
  plan.kind = Kind::kTracked;
  if (plan.entries.emplace(p->key, std::move(entry)).second) ++g_entry_count;
  return true;
}

void set_handler(PyObject* handler) {
  Py_XINCREF(handler);
  g_handler = handler;  // (set once at import, before any thread is active)
}

void set_enabled(bool on) noexcept {
  if (on) wrap_cpu_allocator();
  g_enabled.store(on, std::memory_order_seq_cst);  // see InFlight
}

bool quiesce(std::chrono::nanoseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (auto& f : g_in_flight) {
    while (f.n.load(std::memory_order_seq_cst) != 0) {  // see InFlight
      if (std::chrono::steady_clock::now() >= deadline) return false;
      std::this_thread::yield();
    }
  }
  return true;
}

void set_active(bool on) {
  tls_active = on;
  c10::impl::tls_set_dispatch_key_included(kKey, on || tls_guarded);
}

void set_guarded(bool on) {
  tls_guarded = on;
  c10::impl::tls_set_dispatch_key_included(kKey, on || tls_active);
}

bool register_fallback(std::string* why) {
  static bool ok = false;
  static std::string failure;
  static std::once_flag once;
  std::call_once(once, [] {
    ok = register_boxed_fallback(kKey, torch::CppFunction::makeFromBoxedFunction<&fallback>(),
                                 &failure) &&
         register_mark_fallback(&failure);
    // A fork() child gets these locks free (the forking thread holds them across the fork).
    pthread_atfork([] { lock_for_fork(); }, [] { unlock_after_fork(); },
                   [] { unlock_after_fork(); });
  });
  if (!ok && why != nullptr) *why = failure;
  return ok;
}

void set_probe(Probe probe) {
  g_probe.store(probe, std::memory_order_relaxed);
}

std::pair<long, long> fast_counts() noexcept {
  return {g_fast.load(std::memory_order_relaxed), g_python.load(std::memory_order_relaxed)};
}

}  // namespace streamrt::python::torch_runner
