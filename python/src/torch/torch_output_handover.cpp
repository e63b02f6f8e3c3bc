// An op that has no out= kernel of its own runs on a stream as the functional op, its result then
// copied into the output the host handed out at the call (Mode::kCopy); torch's generated out=
// overloads do the same inside. For a large output the copy costs as much as a light kernel, and
// the result's own memory comes from malloc in the worker's arena, often as fresh pages. Most
// such ops allocate their result before anything else of its size (a convolution may allocate
// small buffers of its own first) and then compute into it: so while the op runs, the first
// allocation of exactly the output's bytes that this thread makes through torch's CPU allocator
// gets the output's own memory, and the op computes into the output.
//
// The allocator is wrapped once, at the first install(), and stays: it passes every other
// allocation through, and storages made meanwhile keep it as the allocator they resize with.
// The handed memory is a new hold of the output cache's block, with the data as its context, as
// c10's CPU allocator makes them, so that Allocator::raw_allocate() works on it too; the live
// handed pointers are listed so that a raw_deallocate() of one finds its block.
//
// What the op does with the handed memory is checked after it returns: the result there with the
// output's layout needs nothing more; otherwise the op used that memory for something else, which
// must be gone by then (a temporary), and the result is copied (cloned first where it lies on that
// memory with another layout). An op that kept the memory alive fails loudly: the output cannot be
// written without changing what it kept.
#include "torch_output_handover.hpp"

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/CPUAllocator.h>
#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <vector>

#include "torch_output_cache.hpp"
#include "torch_spin_lock.hpp"

namespace streamrt::python::torch_runner {
namespace {

// The handed pointers still held (by tensors of an op, or raw_allocate()'s caller).
struct Live {
  SpinLock lock;  // held for a few instructions; reset in a fork child
  std::vector<void*> data;
  // Read without the lock by every raw_deallocate(): a pointer handed to this thread (or passed
  // to it after that) was counted before, so zero means none of the caller's is listed.
  std::atomic<std::size_t> count{0};
};

Live& live() {
  static Live* const l = [] {
    auto* made = new Live;  // leaked: tensors are freed during interpreter exit too
    // fork(): the child's only thread holds nothing; streamrt's own handler waited for the
    // queued work, so no op holds handed memory either.
    pthread_atfork(nullptr, nullptr, [] { live().lock.reset_in_child(); });
    return made;
  }();
  return *l;
}

void add_live(void* data) {
  Live& l = live();
  std::lock_guard guard(l.lock);
  l.data.push_back(data);
  l.count.store(l.data.size(), std::memory_order_release);
}

bool drop_live(void* data) noexcept {
  Live& l = live();
  std::lock_guard guard(l.lock);
  auto it = std::find(l.data.begin(), l.data.end(), data);
  if (it == l.data.end()) return false;
  l.data.erase(it);
  l.count.store(l.data.size(), std::memory_order_release);
  return true;
}

bool is_live(void* data) {
  Live& l = live();
  std::lock_guard guard(l.lock);
  return std::find(l.data.begin(), l.data.end(), data) != l.data.end();
}

void release_handed(void* data) noexcept {
  drop_live(data);
  release_block_data(data);
}

c10::Allocator* g_next = nullptr;          // torch's CPU allocator before ours (set once)
c10::DeleterFnPtr g_next_raw = nullptr;    // its raw deleter
std::atomic<bool> g_wrapped{false};        // ours is torch's CPU allocator
std::atomic<bool> g_on{true};              // use_handover()
std::atomic<std::uint64_t> g_in_place{0};  // (figures only: relaxed)
std::atomic<std::uint64_t> g_copied{0};

thread_local HandOverSlot* tls_slot = nullptr;

void raw_delete(void* data) {
  if (live().count.load(std::memory_order_acquire) > 0 && drop_live(data)) {
    release_block_data(data);
    return;
  }
  g_next_raw(data);
}

// No `override`: allocate() is const in torch 1.x and not in 2.x, and copy_data() is 2.x's only;
// each declaration below overrides where its base has it.
class HandOverAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(std::size_t n) const { return make(n); }
  c10::DataPtr allocate(std::size_t n) { return make(n); }  // NOLINT(*-overloaded-virtual)
  c10::DeleterFnPtr raw_deleter() const override {
    return g_next_raw != nullptr ? &raw_delete : nullptr;
  }
  void copy_data(void* dest, const void* src, std::size_t count) const {
    std::memcpy(dest, src, count);
  }

 private:
  static c10::DataPtr make(std::size_t n) {
    HandOverSlot* slot = tls_slot;
    if (slot != nullptr && n == slot->nbytes) {
      tls_slot = nullptr;  // once: later allocations of this size are the op's temporaries
      c10::DataPtr d = block_data_ptr(slot->block, &release_handed);
      add_live(slot->data);
      slot->taken = true;
      return d;
    }
    return g_next->allocate(n);
  }
};

HandOverAllocator& allocator() {
  static auto* a = new HandOverAllocator;  // leaked: storages keep it as their allocator
  return *a;
}

bool lies_in_place(const at::Tensor& result, const at::Tensor& out, const void* data) {
  return result.has_storage() && result.storage().data_ptr().get() == data &&
         result.storage_offset() == out.storage_offset() && result.strides() == out.strides();
}

bool overlaps(const at::Tensor& t, const void* data, std::size_t nbytes) {
  if (!t.has_storage()) return false;
  const auto* base = static_cast<const char*>(t.storage().data_ptr().get());
  const auto* begin = static_cast<const char*>(data);
  return base != nullptr && base < begin + nbytes && begin < base + t.storage().nbytes();
}

}  // namespace

bool wrap_cpu_allocator() noexcept {
  static std::once_flag once;
  try {
    std::call_once(once, [] {
      g_next = c10::GetCPUAllocator();
      g_next_raw = g_next->raw_deleter();
      c10::SetCPUAllocator(&allocator(), /*priority=*/0);
      // Release: a thread that sees it wrapped sees g_next set.
      g_wrapped.store(c10::GetCPUAllocator() == &allocator(), std::memory_order_release);
    });
  } catch (...) {
    return false;  // (call_once could not run: the allocator stays torch's)
  }
  return g_wrapped.load(std::memory_order_acquire);
}

bool handover_available() noexcept {
  return g_wrapped.load(std::memory_order_acquire) && g_on.load(std::memory_order_relaxed);
}

void use_handover(bool on) noexcept {
  g_on.store(on, std::memory_order_relaxed);  // (read at each HandOver: no order needed)
}

bool generated_out_overload(const c10::OperatorHandle& op) {
  return !op.hasKernelForDispatchKey(c10::DispatchKey::CPU) &&
         op.hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd);
}

HandOver::HandOver(const at::Tensor& out) noexcept {
  if (tls_slot != nullptr || !handover_available() || !out.has_storage() ||
      out.storage_offset() != 0) {
    return;
  }
  const c10::Storage& storage = out.storage();
  void* block = output_block(storage);
  if (block == nullptr || storage.nbytes() == 0) return;
  slot_.block = block;
  slot_.data = storage.data_ptr().get();
  slot_.nbytes = storage.nbytes();
  tls_slot = &slot_;
}

void HandOver::disarm() noexcept {
  if (tls_slot == &slot_) tls_slot = nullptr;
}

namespace {

void check_result(const at::Tensor& result, const at::Tensor& out, const std::string& op_name) {
  TORCH_CHECK(result.sizes() == out.sizes() && result.dtype() == out.dtype(),
              "streamrt.torch: ", op_name, " returned a result of sizes ", result.sizes(),
              " and dtype ", result.dtype(), " where its output known at the call has ",
              out.sizes(), " and ", out.dtype(),
              " (its meta kernel and its CPU kernel disagree in this torch): run it "
              "outside stream contexts");
}

}  // namespace

void copy_results(const std::vector<at::Tensor>& into, const std::vector<c10::IValue>& results,
                  const std::string& op_name) {
  for (std::size_t i = 0; i < into.size(); ++i) {
    const at::Tensor& result = results.at(i).toTensor();
    check_result(result, into[i], op_name);
    into[i].copy_(result);
  }
}

void HandOver::finish(at::Tensor result, const at::Tensor& out, const std::string& op_name) {
  disarm();
  check_result(result, out, op_name);
  if (slot_.taken) {
    if (lies_in_place(result, out, slot_.data)) {
      g_in_place.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    // The output's memory went to another tensor of the op: the result must not be copied from
    // it into itself, and nothing of the op's may still hold it.
    if (overlaps(result, slot_.data, slot_.nbytes)) result = result.clone();
    TORCH_CHECK(!is_live(slot_.data), "streamrt.torch: ", op_name,
                " kept a tensor of its own on memory it allocated while it ran on a stream, "
                "memory that is its output's: run it outside stream contexts");
  }
  out.copy_(result);
  g_copied.fetch_add(1, std::memory_order_relaxed);
}

HandOverStats handover_stats() noexcept {
  return {g_in_place.load(std::memory_order_relaxed), g_copied.load(std::memory_order_relaxed)};
}

}  // namespace streamrt::python::torch_runner
