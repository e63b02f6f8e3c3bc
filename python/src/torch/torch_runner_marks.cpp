// Pending marks: the fast path's dispatch key on tensors with pending stream work, and the guard
// that an op of a thread outside stream contexts passes through (torch_runner_marks.hpp).
#include "torch_runner_marks.hpp"

#include <c10/core/TensorImpl.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <pybind11/pybind11.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/library.h>

#include <atomic>
#include <string>

#include "torch_runner_fast.hpp"
#include "torch_runner_internal.hpp"

namespace py = pybind11;

namespace streamrt::python::torch_runner {
namespace {

// torchdistx's deferred-init key: out of tree, unused by torch itself, with no meaning torch checks
// (torch 2.x gives Fake one: a tensor carrying it is a fake tensor to 2.x). It sits above autograd,
// so a marked tensor's op passes through mark_fallback() before anything else runs.
constexpr c10::DispatchKey kKey = kMarkKey;
const c10::DispatchKeySet kBelowMark(c10::DispatchKeySet::FULL_AFTER, kKey);

// TensorImpl keeps its key set protected, with no setter for a functionality key: a derived
// type's pointer to the member reaches it. The key set is a plain word: a thread that reads it
// while another marks sees the old or the new set, and both are safe (an op on a tensor being
// marked races with the enqueue that marks it, as it would race with the op in eager torch).
struct KeySetAccess : c10::TensorImpl {
  static constexpr c10::DispatchKeySet c10::TensorImpl::*kMember = &KeySetAccess::key_set_;
};

void set_key(c10::TensorImpl* impl, bool on) noexcept {
  c10::DispatchKeySet& keys = impl->*KeySetAccess::kMember;
  keys = on ? keys.add(kKey) : keys.remove(kKey);
}

PyObject* g_waiter = nullptr;  // set once by set_waiter() (a leaked reference)

bool idle(const at::Tensor& t) {
  const TrackerPtr tracker = registry().find(t);
  return tracker == nullptr || host()->tracker_idle(tracker->get());
}

// Whether a host access to `t` must go through the host wait: pending work, or a failure to raise.
bool busy(const at::Tensor& t) {
  const TrackerPtr tracker = registry().find(t);
  return tracker != nullptr && host()->tracker_busy(tracker->get());
}

// Drops the key when nothing is pending, then looks again: an enqueue that raced with the drop
// (its work recorded before our first look had finished, its mark before our drop) finds the key
// back. The fence orders the drop before the second look.
void unmark_if_idle(const at::Tensor& t) {
  if (!idle(t)) return;
  set_key(t.unsafeGetTensorImpl(), false);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (!idle(t)) set_key(t.unsafeGetTensorImpl(), true);
}

bool written(const c10::Argument& a) {
  return a.alias_info() != nullptr && a.alias_info()->isWrite();
}

void wait_for(const at::Tensor& t, bool for_write) {
  c10::impl::ExcludeDispatchKeyGuard no_reentry{c10::DispatchKeySet(kKey)};
  py::gil_scoped_acquire gil;
  try {
    py::reinterpret_borrow<py::object>(g_waiter)(
        py::reinterpret_steal<py::object>(THPVariable_Wrap(t)), for_write);
  } catch (py::error_already_set& e) {
    e.restore();
    python_error error;
    error.persist();
    throw error;
  }
}

void guard_tensor(const at::Tensor& t, bool view, bool for_write, bool all) {
  if (!t.defined()) return;
  const bool marked = t.key_set().has(kKey);
  if (!marked && (!all || registry().empty())) return;
  if (!view && g_waiter != nullptr && busy(t)) wait_for(t, for_write);
  if (marked) unmark_if_idle(t);
}

}  // namespace

void mark(const at::Tensor& t) noexcept {
  if (t.defined()) set_key(t.unsafeGetTensorImpl(), true);
}

void mark_fallback(const c10::OperatorHandle& op, c10::DispatchKeySet ks,
                   torch::jit::Stack* stack) {
  // Inside a stream context the op is stream work, ordered by the tracking: no wait here.
  if (!inside_stream_context()) guard(op, *stack);
  op.redispatchBoxed(ks & kBelowMark, stack);
}

bool register_mark_fallback(std::string* why) {
  return register_boxed_fallback(kKey, torch::CppFunction::makeFromBoxedFunction<&mark_fallback>(),
                                 why);
}

void guard(const c10::OperatorHandle& op, const torch::jit::Stack& stack, bool all) {
  const auto& schema = op.schema();
  const auto& args = schema.arguments();
  const bool view = returns_views(schema);
  const std::size_t first = stack.size() - args.size();
  for (std::size_t i = 0; i < args.size(); ++i) {
    const c10::IValue& v = stack[first + i];
    if (v.isTensor()) {
      guard_tensor(v.toTensor(), view, written(args[i]), all);
    } else if (v.isList()) {
      for (const c10::IValue& x : v.toListRef()) {
        if (x.isTensor()) guard_tensor(x.toTensor(), view, written(args[i]), all);
      }
    }
  }
}

void set_waiter(PyObject* waiter) {
  Py_XINCREF(waiter);
  g_waiter = waiter;
}

}  // namespace streamrt::python::torch_runner
