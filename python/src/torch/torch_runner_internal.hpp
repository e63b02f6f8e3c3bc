#pragma once
//! \file torch_runner_internal.hpp
//! The pieces of streamrt._streamrt_torch (C++17, torch's C++ API) shared by its files:
//! bind_torch_runner.cpp (the module and the kernel runner), torch_runner_registry.cpp (the
//! tracker registry) and torch_runner_fast.cpp (the enqueue of a small op without Python).
//! docs/torch.md, "How it works", says how they fit together.

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/StorageImpl.h>
#include <c10/util/intrusive_ptr.h>
#include <torch/library.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "torch_output_reuse.hpp"
#include "torch_runner.hpp"

namespace streamrt::python::torch_runner {

//! A plain tensor argument of a work item as the worker makes it (make_aliases): a new TensorImpl
//! on `storage` with this layout, for the stack's entry `slot` (or copy_into's, `into_copy`).
struct LaterAlias {
  std::size_t slot;
  bool into_copy;
  c10::Storage storage;
  c10::DispatchKeySet keys;
  caffe2::TypeMeta dtype;
  c10::SmallVector<std::int64_t, 5> sizes;
  c10::SmallVector<std::int64_t, 5> strides;
  std::int64_t offset;
};

struct CapturedSteps;  // torch_graph.hpp

//! A torch op bound to its arguments, run by a worker (TorchRunner::run). With `copy_into`, the
//! op is functional and its results are copied into those tensors (handed out at the call).
//! Plain tensor arguments wait in `later` until the worker runs the op (torch_runner_prepared.cpp).
struct Prepared {
  c10::OperatorHandle op;
  std::vector<c10::IValue> stack;
  c10::DispatchKeySet excluded;
  std::vector<at::Tensor> copy_into;
  c10::SmallVector<LaterAlias, 4> later;
  std::size_t output_bytes = 0;  // the new outputs' (TorchRunner::output_bytes)
  ReuseTicket* reuse = nullptr;  // its tensors' memory, listed for reuse (list_prepared)
  // Set: a graph's replay (torch_graph.hpp), which runs these items instead of `op`.
  std::shared_ptr<const CapturedSteps> steps;
};

//! Lists the memory of the prepared op's tensors for reuse by later outputs of stream `stream_id`
//! (torch_output_reuse.hpp), for the launch this thread makes next. Never blocks but briefly;
//! throws std::bad_alloc.
void list_prepared(Prepared& p, std::uint64_t stream_id);

//! A new TensorImpl on `t`'s memory with its layout, where `t` is a plain dense tensor; `t` itself
//! otherwise (what for_work does to each tensor). Never blocks.
at::Tensor alias_for_work(const at::Tensor& t);

//! A prepared op for `op` with no arguments yet, from the pool of freed ones (their vectors keep
//! their capacity). Never blocks but briefly (a lock); thread-safe; throws std::bad_alloc.
Prepared* new_prepared(const c10::OperatorHandle& op, c10::DispatchKeySet excluded);

//! A new prepared op with the op, keys and arguments of `p` (not its reuse listing): a graph's
//! item, run once more. Never blocks but briefly; thread-safe; throws std::bad_alloc.
Prepared* copy_prepared(const Prepared& p);
//! Drops a prepared op's arguments and keeps it for new_prepared(), or frees it. Never blocks but
//! briefly; thread-safe.
void free_prepared(Prepared* p) noexcept;

//! Owns a prepared op, giving it back to free_prepared().
struct FreePrepared {
  void operator()(Prepared* p) const noexcept { free_prepared(p); }
};
using PreparedPtr = std::unique_ptr<Prepared, FreePrepared>;

//! Appends `v` to the op's arguments: a plain tensor as a LaterAlias, anything else through
//! for_work. Never blocks.
void add_argument(Prepared& p, const c10::IValue& v);

//! Appends an output the op's result is copied into (copy_into), as add_argument does.
void add_copy_target(Prepared& p, const at::Tensor& t);

//! Makes the tensors of `later` (on this thread: the worker's own allocations) and puts them in
//! place. Never blocks.
void make_aliases(Prepared& p);

//! `v` for a work item's stack: each tensor (alone or in a list) replaced by a new TensorImpl on
//! the same memory, with the same layout (wrapped numbers stay). The work item then never holds
//! the last reference to a tensor that Python saw, whose release would take the GIL on the worker.
//! Never blocks.
c10::IValue for_work(const c10::IValue& v);

//! Runs a prepared op as a worker does (TorchRunner::run). Needs no GIL.
bool run_prepared(Prepared& prepared, std::string* type, std::string* message);

//! streamrt's side (set once by connect(), then constant). Null before.
const TorchHost* host() noexcept;

//! Registers `fn` as the boxed fallback of `key` for the life of the process (the registration is
//! leaked: no deregistration racing torch's own static destructors at exit). False, with torch's
//! reason in `why`, when torch refuses (another library registered one on that key).
bool register_boxed_fallback(c10::DispatchKey key, torch::CppFunction fn, std::string* why);

//! The operator behind a torch OpOverload object, found once per object. Requires the GIL.
const c10::OperatorHandle& operator_of(PyObject* op);

//! The dispatch keys a fast-path work item excludes: those this thread excludes now plus Python's
//! and every key above it (autograd, ADInplaceOrView, autocast: applied at the call already), as
//! a dispatch mode's work item has them.
c10::DispatchKeySet work_excluded() noexcept;

//! Owns one TorchHost tracker, and the Python object standing for it once Python asked for it
//! (one object per tracker, so Python code can tell trackers apart by identity).
class Tracker {
 public:
  explicit Tracker(void* handle) noexcept : handle_(handle) {}
  ~Tracker() {
    if (object_ != nullptr) host()->release_object(object_);
    host()->tracker_free(handle_);
  }
  Tracker(const Tracker&) = delete;
  Tracker& operator=(const Tracker&) = delete;
  //! The TorchHost handle. Never blocks.
  const void* get() const noexcept { return handle_; }
  //! The Python object (a streamrt.Tensor), made on first use; a new reference, or null with a
  //! Python error set. Requires the GIL (which also guards the object).
  PyObject* object() {
    if (object_ == nullptr) object_ = host()->tracker_to_python(handle_);
    Py_XINCREF(object_);
    return object_;
  }

 private:
  void* handle_;
  PyObject* object_ = nullptr;
};
using TrackerPtr = std::shared_ptr<Tracker>;

//! The trackers of torch storages by the storage's start address: every view of a storage, and
//! every torch tensor made on the same memory, finds the same one (the C++ twin of
//! _torch_tracking.py's registry, used where this module is built). Trackers of overlapping
//! memory from other start addresses share tracking through streamrt's index of wrapped memory. An
//! entry lives while one of its torch storages does, or while work on it is pending. Thread-safe
//! (one mutex, never held while taking the GIL or freeing a tracker); never blocks otherwise.
class Registry {
 public:
  //! What tracker() found.
  enum class Found { kTracker, kNoMemory, kFailed };

  //! The tracker of `t`'s storage, made on first use; kNoMemory for a storage without memory,
  //! kFailed when a tracker could not be made (out of memory).
  Found tracker(const at::Tensor& t, TrackerPtr* out);
  //! The tracker of `t`'s storage, or null when no stream work has used it.
  TrackerPtr find(const at::Tensor& t);
  //! A new tracker for `t`, a tensor just allocated (an entry found at its address belongs to
  //! memory freed before: pending work would have kept it). Null when out of memory.
  TrackerPtr fresh(const at::Tensor& t);
  //! `t` (made on the memory of `with`'s storage) is tracked through `with`.
  void share(const at::Tensor& t, TrackerPtr with);
  //! Drops every entry whose storages are gone and whose work has finished.
  void sweep();
  //! Entries now.
  std::size_t size();
  //! True when the registry is empty (a hint: no lock).
  bool empty() const noexcept { return count_.load(std::memory_order_relaxed) == 0; }

  //! One entry handed over between registries: the address, the tracker, and owning weak
  //! references to the storages (c10::raw::weak_intrusive_ptr, as torch's Storage._weak_ref()).
  struct Exported {
    std::uintptr_t base;
    TrackerPtr tracker;
    std::vector<c10::StorageImpl*> weak;
    std::uintptr_t end;  // past the memory
    bool wrapped;        // the tracker was made for this memory (see Entry)
  };
  //! Takes every entry out (the registry is empty after).
  std::vector<Exported> take_all();
  //! Adds entries (taking over their weak references).
  void put(std::vector<Exported> entries);

  //! fork(): taken by the forking thread before, released in parent and child after.
  void lock_for_fork() { mutex_.lock(); }
  void unlock_after_fork() { mutex_.unlock(); }

 private:
  struct Entry {
    TrackerPtr tracker;
    std::vector<c10::weak_intrusive_ptr<c10::StorageImpl>> weak;
    std::uintptr_t end = 0;  // past the storage's memory
    bool wrapped = false;    // the tracker was made for this memory (not shared: share())
    bool alive() const noexcept;
    // No storage left and no work pending: its memory was freed (maybe handed out again).
    bool freed() const noexcept;
  };
  // Under mutex_: moves the tracker of `e` (whose memory was freed) to `dropped`.
  void drop_locked(Entry& e, std::vector<TrackerPtr>& dropped);
  // Under mutex_: drops the entries over [base, end) whose storages are gone and whose work has
  // finished (their memory was freed, maybe handed out again), so that a tracker made there now
  // does not join their tracking.
  void drop_dead_overlaps_locked(std::uintptr_t base, std::uintptr_t end,
                                 std::vector<TrackerPtr>& dropped);
  // Under mutex_: the entry at `base` when its memory is still this memory (alive, or with
  // pending work), else null.
  Entry* live(std::uintptr_t base);
  // Under mutex_: files `tracker` as the one of `t`'s storage at `base` (a previous entry's
  // tracker goes to `dropped`), then sweeps as maybe_sweep.
  void file_locked(std::uintptr_t base, const at::Tensor& t, TrackerPtr tracker, bool wrapped,
                   std::vector<TrackerPtr>& dropped);
  // Under mutex_: drops dead idle entries into `dropped` when the map has grown enough.
  void maybe_sweep(std::vector<TrackerPtr>& dropped);
  void update_count() noexcept { count_.store(entries_.size(), std::memory_order_relaxed); }

  std::mutex mutex_;
  std::unordered_map<std::uintptr_t, Entry> entries_;
  std::size_t sweep_at_ = 1024;
  // entries_.size(), readable without the lock (relaxed: a hint for callers that skip the
  // registry when nothing is tracked; they re-check under the lock when it matters).
  std::atomic<std::size_t> count_{0};
};

//! The process's registry.
Registry& registry();

//! The start address of `t`'s storage (0 when it has no memory).
std::uintptr_t storage_base(const at::Tensor& t) noexcept;

//! Whether every return of `schema` aliases an argument without writing it (a view); false for an
//! op that returns nothing. Never blocks.
inline bool returns_views(const c10::FunctionSchema& schema) noexcept {
  for (const auto& r : schema.returns()) {
    if (r.alias_info() == nullptr || r.alias_info()->isWrite()) return false;
  }
  return !schema.returns().empty();
}

}  // namespace streamrt::python::torch_runner
