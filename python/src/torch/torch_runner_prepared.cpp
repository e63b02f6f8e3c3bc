// A work item's own tensors and its prepared op are made where they are freed. The host used to
// make a TensorImpl per tensor argument at the call (for_work's aliases, so that the worker never
// drops a tensor Python saw) and a worker freed them when the op finished: blocks that glibc
// returns to the host's arena under its lock, while the host allocates the next op from that
// arena, so the two threads kept waking each other. Now the host records each plain tensor's
// storage and layout (no allocation: a reference count and small inline arrays) and the worker
// makes the aliases as it runs the op, from its own arena, and frees them there. The prepared ops
// themselves are kept in a pool once freed, their vectors' capacity with them.
#include <pthread.h>

#include <mutex>
#include <new>
#include <typeinfo>
#include <utility>
#include <vector>

#include "torch_runner_internal.hpp"
#include "torch_spin_pool.hpp"

namespace streamrt::python::torch_runner {
namespace {

// The most freed prepared ops kept (their vectors included, a few hundred bytes each).
constexpr std::size_t kPoolSize = 1024;

using Pool = SpinPool<Prepared, kPoolSize>;

Pool& pool() {
  static Pool* const p = [] {
    auto* made = new Pool;  // leaked: ops are freed during interpreter exit too
    pthread_atfork(nullptr, nullptr, [] { pool().reset_in_child(); });
    return made;
  }();
  return *p;
}

// A plain dense TensorImpl with storage: the only kind whose alias is a TensorImpl on its storage
// (no wrappers, sparse, quantized or opaque tensors; not a wrapped number). The key set carries
// the conjugate, negative and zero-tensor bits along.
bool plain(const at::Tensor& t) {
  // typeid of a named object: clang warns when the operand is a call it would evaluate.
  const c10::TensorImpl* raw = t.defined() ? t.unsafeGetTensorImpl() : nullptr;
  return raw != nullptr && typeid(*raw) == typeid(c10::TensorImpl) && !raw->is_wrapped_number() &&
         t.has_storage();
}

LaterAlias later_alias(std::size_t slot, bool into_copy, const at::Tensor& t) {
  return LaterAlias{slot,
                    into_copy,
                    c10::Storage(t.storage()),
                    t.key_set(),
                    t.dtype(),
                    c10::SmallVector<std::int64_t, 5>(t.sizes().begin(), t.sizes().end()),
                    c10::SmallVector<std::int64_t, 5>(t.strides().begin(), t.strides().end()),
                    t.storage_offset()};
}

at::Tensor alias_of(LaterAlias& a) {
  auto impl = c10::make_intrusive<c10::TensorImpl>(std::move(a.storage), a.keys, a.dtype);
  impl->set_sizes_and_strides(a.sizes, a.strides);
  impl->set_storage_offset(a.offset);
  return at::Tensor(std::move(impl));
}

}  // namespace

at::Tensor alias_for_work(const at::Tensor& t) {
  if (!plain(t)) return t;
  LaterAlias a = later_alias(0, false, t);
  return alias_of(a);
}

Prepared* new_prepared(const c10::OperatorHandle& op, c10::DispatchKeySet excluded) {
  Prepared* prepared = pool().take();
  if (prepared == nullptr) return new Prepared{op, {}, excluded, {}, {}, 0, nullptr, nullptr};
  prepared->op = op;
  prepared->excluded = excluded;
  prepared->output_bytes = 0;
  return prepared;
}

Prepared* copy_prepared(const Prepared& p) {
  PreparedPtr copy(new_prepared(p.op, p.excluded));
  copy->stack = p.stack;
  copy->copy_into = p.copy_into;
  copy->later = p.later;
  copy->steps = p.steps;
  return copy.release();
}

void free_prepared(Prepared* prepared) noexcept {
  free_reusable(std::exchange(prepared->reuse, nullptr));  // (before its tensors go)
  prepared->steps.reset();
  prepared->stack.clear();
  prepared->copy_into.clear();
  prepared->later.clear();
  pool().give(prepared);
}

void add_argument(Prepared& p, const c10::IValue& v) {
  if (v.isTensor() && plain(v.toTensor())) {
    p.later.push_back(later_alias(p.stack.size(), false, v.toTensor()));
    p.stack.emplace_back();  // (None until make_aliases)
    return;
  }
  p.stack.push_back(for_work(v));
}

void add_copy_target(Prepared& p, const at::Tensor& t) {
  if (plain(t)) {
    p.later.push_back(later_alias(p.copy_into.size(), true, t));
    p.copy_into.emplace_back();
    return;
  }
  p.copy_into.push_back(t);  // (no alias for it: for_work would hand back `t` itself)
}

void list_prepared(Prepared& p, std::uint64_t stream_id) {
  c10::SmallVector<const c10::Storage*, 8> storages;
  for (const LaterAlias& a : p.later) storages.push_back(&a.storage);
  p.reuse = list_reusable(storages.data(), storages.size(), stream_id);
}

void make_aliases(Prepared& p) {
  for (LaterAlias& a : p.later) {
    if (a.into_copy) {
      p.copy_into[a.slot] = alias_of(a);
    } else {
      p.stack[a.slot] = alias_of(a);
    }
  }
  p.later.clear();
}

}  // namespace streamrt::python::torch_runner
