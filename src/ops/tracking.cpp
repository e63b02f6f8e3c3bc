// Automatic dependency tracking: the op submission path. See ops.hpp for the rules and
// docs/design.md ("Automatic dependency tracking") for why reads only wait for the last write.
#include "tracking.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <functional>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "checks.hpp"
#include "core/capture_state.hpp"
#include "memory_index.hpp"
#include "read_check.hpp"
#include "storage.hpp"
#include "streamrt/error.hpp"
#include "streamrt/ops.hpp"
#include "tensor_access.hpp"

namespace streamrt {
namespace {

// Relaxed: a plain on/off setting; ops issued after the call see it, and no other memory is
// published through it.
std::atomic<bool> g_tracking{true};
// -1: follow g_tracking; 0/1: this thread's guard.
thread_local signed char tls_tracking = -1;

// Relaxed: a test switch (set_kernel_references_for_testing), set while no op is submitted.
std::atomic<bool> g_kernel_references{true};

// Read entries kept per storage before complete ones are pruned.
constexpr std::size_t kPruneReadsAt = 4;

}  // namespace

void set_dependency_tracking(bool on) noexcept {
  g_tracking.store(on, std::memory_order_relaxed);
}

bool dependency_tracking() noexcept {
  return tls_tracking >= 0 ? tls_tracking != 0 : g_tracking.load(std::memory_order_relaxed);
}

DependencyTrackingGuard::DependencyTrackingGuard(bool on) noexcept : previous_(tls_tracking) {
  tls_tracking = on ? 1 : 0;
}

DependencyTrackingGuard::~DependencyTrackingGuard() {
  tls_tracking = previous_;
}

namespace ops {
namespace {

// The tracked submission shared by ops (`enqueue` launches one kernel) and enqueue_tracked
// (`enqueue` adds whatever an external op needs; its accesses are recorded after all of it).
using EnqueueFn = void (*)(void* ctx, Stream& s);

// The distinct storages an op uses (one both read and written counts as written), locked in a
// global order (by address) for the submission, so that concurrent submissions never lock in
// opposite orders; unlocked when the submission ends, however it ends.
class LockedUses {
 public:
  struct Use {
    Storage* storage;
    bool write;
  };
  // Distinct tracking roots: the public limit of 8 storages, each of which may join several.
  static constexpr std::size_t kMax = 8 * detail::kMaxTrackingRoots;

  [[gnu::always_inline]] LockedUses(const char* label, std::span<const Tensor* const> reads,
                                    std::span<const Tensor* const> writes) {
    for (const Tensor* t : writes) add(label, t, true);
    for (const Tensor* t : reads) add(label, t, false);
    // Insertion sort: at most kMax entries (and std::sort on a partial std::array trips g++ 12's
    // -Warray-bounds).
    for (std::size_t i = 1; i < count_; ++i) {
      for (std::size_t j = i; j > 0 && std::less<>()(uses_[j].storage, uses_[j - 1].storage); --j) {
        std::swap(uses_[j], uses_[j - 1]);
      }
    }
    for (; locked_ < count_; ++locked_) uses_[locked_].storage->mutex.lock();
  }
  ~LockedUses() {
    for (std::size_t i = locked_; i > 0; --i) uses_[i - 1].storage->mutex.unlock();
  }
  LockedUses(const LockedUses&) = delete;
  LockedUses& operator=(const LockedUses&) = delete;

  std::size_t size() const noexcept { return count_; }
  const Use& operator[](std::size_t i) const noexcept { return uses_[i]; }

 private:
  void add(const char* label, const Tensor* t, bool write) {
    Storage& own = *detail::TensorAccess::storage(*t);
    add_root(label, &own.tracking(), write);
    for (const auto& r : own.also_tracked_by) add_root(label, r.get(), write);
  }

  void add_root(const char* label, Storage* st, bool write) {
    for (std::size_t i = 0; i < count_; ++i) {
      if (uses_[i].storage == st) {
        uses_[i].write = uses_[i].write || write;
        return;
      }
    }
    if (count_ == kMax) throw Error(std::string(label) + ": too many operands for the tracker");
    uses_[count_++] = Use{st, write};
  }

  // Left uninitialised (only the first `count_` entries are read): zero-filling these arrays was
  // a visible part of a small op's host time.
  std::array<Use, kMax> uses_;
  std::size_t count_ = 0;
  std::size_t locked_ = 0;
};

// Makes `s` wait for the accesses on other streams that `uses` conflict with: the last writer of
// each storage (read-after-write, write-after-write) and, for written ones, the readers since
// (write-after-read). `sid` is the id accesses on `s` are tracked under.
[[gnu::always_inline]] inline void wait_for_conflicts(Stream& s, std::uint64_t sid,
                                                      const LockedUses& uses) {
  impl::Backend& backend = s.impl()->backend();
  std::array<const impl::EventImpl*, 2 * LockedUses::kMax> blocked;
  std::size_t num_blocked = 0;
  auto wait_for = [&](const std::shared_ptr<impl::EventImpl>& pos) {
    for (std::size_t i = 0; i < num_blocked; ++i) {
      if (blocked[i] == pos.get()) return;
    }
    // A stream wait, not a host wait: block() returns at once (and adds nothing when the write
    // has completed without failure).
    capture::block(backend, pos, s.impl());
    if (num_blocked < blocked.size()) blocked[num_blocked++] = pos.get();
  };
  for (std::size_t i = 0; i < uses.size(); ++i) {
    Storage& st = *uses[i].storage;
    // Waiting for the last writer inherits its failure (nothing runs on the results of failed
    // work).
    if (st.last_write.position && st.last_write.stream_id != sid) wait_for(st.last_write.position);
    if (uses[i].write) {
      // A finished reader is not waited for at all, so its stream's failure (not ours) is not
      // inherited.
      for (const auto& r : st.reads) {
        if (r.stream_id != sid && !capture::query(backend, r.position)) wait_for(r.position);
      }
    }
  }
}

// Records the position `si` has reached as the latest access of each of `uses`.
[[gnu::always_inline]] inline void record_accesses(impl::StreamImpl& si, std::uint64_t sid,
                                                   const LockedUses& uses) {
  impl::Backend& backend = si.backend();
  // During a capture the accesses are the capture's positions (graph nodes), not the backend's.
  auto pos = capture::record_position(si, EventOptions{});
  const std::size_t count = uses.size();
  for (std::size_t i = 0; i < count; ++i) {
    Storage& st = *uses[i].storage;
    if (uses[i].write) {
      st.last_write.stream_id = sid;
      // The last use can take the reference instead of copying it (one atomic pair fewer on the
      // common single-output path).
      if (i + 1 == count) {
        st.last_write.position = std::move(pos);
      } else {
        st.last_write.position = pos;
      }
      st.reads.clear();
      continue;
    }
    auto it = std::find_if(st.reads.begin(), st.reads.end(),
                           [&](const detail::Access& a) { return a.stream_id == sid; });
    if (it != st.reads.end()) {
      it->position = pos;
    } else {
      if (st.reads.size() >= kPruneReadsAt) {
        std::erase_if(st.reads,
                      [&](const detail::Access& a) { return capture::query(backend, a.position); });
      }
      st.reads.push_back(detail::Access{sid, pos});
    }
  }
}

// Hands the written memory to the read checker, with the position the writes were recorded at.
[[gnu::noinline]] void note_checked_writes(const Stream& s, const char* label, std::uint64_t sid,
                                           const LockedUses& uses,
                                           std::span<const Tensor* const> writes) {
  for (std::size_t i = 0; i < uses.size(); ++i) {
    if (!uses[i].write) continue;
    read_check::note_writes(label, s, sid, uses[i].storage->last_write.position, writes);
    return;
  }
}

void submit_on(Stream& s, const char* label, std::span<const Tensor* const> reads,
               std::span<const Tensor* const> writes, EnqueueFn enqueue, void* ctx) {
  // The locks are held until the new accesses are recorded, so two threads submitting ops on the
  // same storage see each other's accesses in the order the stream queues got them.
  const LockedUses uses(label, reads, writes);
  impl::StreamImpl& si = *s.impl();
  // During a capture, positions and ids are the capture's (src/core/capture_state.hpp): the waits
  // become graph edges.
  const std::uint64_t sid = capture::tracking_id(si);
  const bool check = !writes.empty() && read_check::enabled() && !capture::active();
  wait_for_conflicts(s, sid, uses);
  enqueue(ctx, s);
  record_accesses(si, sid, uses);
  if (check) note_checked_writes(s, label, sid, uses, writes);
}

// Whether the memory of the storages an op uses could be freed and reused while its kernel is
// queued if nothing but the tracker held it: untracked accesses are not in the free's list of
// pending uses, a captured kernel runs at every replay of its graph, and wrapped memory
// (from_blob) has a deleter that does not wait for streams.
bool needs_references(bool tracking, std::initializer_list<const Tensor*> reads,
                      std::initializer_list<const Tensor*> writes) {
  if (!g_kernel_references.load(std::memory_order_relaxed)) return false;
  if (!tracking || capture::active()) return true;
  auto ordered = [](const Tensor* t) {
    const auto& st = detail::TensorAccess::storage(*t);
    return st != nullptr && st->stream_ordered();
  };
  return !std::all_of(reads.begin(), reads.end(), ordered) ||
         !std::all_of(writes.begin(), writes.end(), ordered);
}

// `kernel` with references to the storages of `reads` and `writes`, released after it ran.
detail::Work with_references(detail::Work kernel, std::initializer_list<const Tensor*> reads,
                             std::initializer_list<const Tensor*> writes) {
  std::vector<std::shared_ptr<Storage>> refs;
  refs.reserve(reads.size() + writes.size());
  for (const Tensor* t : reads) refs.push_back(detail::TensorAccess::storage(*t));
  for (const Tensor* t : writes) refs.push_back(detail::TensorAccess::storage(*t));
  return detail::Work([k = std::move(kernel), refs = std::move(refs)]() mutable { k(); });
}

}  // namespace

void set_kernel_references_for_testing(bool on) noexcept {
  g_kernel_references.store(on, std::memory_order_relaxed);
}

Stream submit(const char* label, Device device, std::initializer_list<const Tensor*> reads,
              std::initializer_list<const Tensor*> writes, detail::Work kernel) {
  Stream s = current_stream(device);
  submit(s, label, reads, writes, std::move(kernel));
  return s;
}

void submit(Stream& s, const char* label, std::initializer_list<const Tensor*> reads,
            std::initializer_list<const Tensor*> writes, detail::Work kernel) {
  const bool tracking = dependency_tracking();
  if (needs_references(tracking, reads, writes)) {
    kernel = with_references(std::move(kernel), reads, writes);
  }
  if (!tracking) {
    s.launch_work(std::move(kernel), label);
    return;
  }
  struct Ctx {
    detail::Work* kernel;
    const char* label;
  } ctx{&kernel, label};
  submit_on(
      s, label, std::span(reads.begin(), reads.size()), std::span(writes.begin(), writes.size()),
      [](void* c, Stream& st) {
        auto* k = static_cast<Ctx*>(c);
        impl::StreamImpl& si = *st.impl();
        if (capture::active() && capture::launch(si, *k->kernel, k->label)) return;
        si.backend().enqueue(si, std::move(*k->kernel), k->label);
      },
      &ctx);
}

std::vector<std::shared_ptr<impl::EventImpl>> pending_accesses(Storage& own, bool for_write) {
  std::vector<std::shared_ptr<impl::EventImpl>> out;
  // A host access waits for real work only: a position recorded during a capture stands for the
  // graph's latest replay (none: nothing to wait for); during the capture it is refused.
  auto add = [&](const std::shared_ptr<impl::EventImpl>& p) {
    auto real = capture::resolve(
        p, [] { return ErrorText("a host access to a tensor used during the capture"); });
    if (real) out.push_back(std::move(real));
  };
  auto collect = [&](Storage& root) {
    std::lock_guard lock(root.mutex);
    if (root.last_write.position) add(root.last_write.position);
    if (for_write) {
      for (const auto& r : root.reads) add(r.position);
    }
  };
  collect(own.tracking());
  for (const auto& r : own.also_tracked_by) collect(*r);
  return out;
}

}  // namespace ops

void enqueue_tracked(const Stream& stream, const char* label, std::span<const Tensor* const> reads,
                     std::span<const Tensor* const> writes,
                     const std::function<void(Stream&)>& enqueue) {
  Stream s = stream;
  for (const Tensor* t : reads) ops::check_defined(*t, label);
  for (const Tensor* t : writes) ops::check_defined(*t, label);
  if (!dependency_tracking()) {
    enqueue(s);
    return;
  }
  auto call = [](void* c, Stream& st) {
    (*static_cast<const std::function<void(Stream&)>*>(c))(st);
  };
  ops::submit_on(s, label, reads, writes, call,
                 const_cast<void*>(static_cast<const void*>(&enqueue)));
}

namespace {

// Refuses to let `own` share another storage's tracking: only wrapped memory no op has used yet,
// which no other storage records its accesses in.
void check_can_share(const detail::Storage& own) {
  if (own.stream_ordered()) {
    // Its memory is freed in stream order after its own accesses, which would stay empty.
    throw Error(api::function("share_tracking") +
                ": the tensor's memory comes from streamrt's allocator; only "
                "wrapped memory (from_blob) can share another storage's tracking");
  }
  // Relaxed: see Storage::joined.
  if (own.joined.load(std::memory_order_relaxed)) {
    throw Error(api::function("share_tracking") +
                ": other tensors wrapped over the same memory already share this tensor's "
                "tracking; share it right after wrapping the memory, before wrapping it again");
  }
  std::lock_guard lock(const_cast<detail::Storage&>(own).mutex);
  if (own.last_write.position || !own.reads.empty()) {
    throw Error(api::function("share_tracking") +
                ": the tensor was already used by an op; share the tracking "
                "right after wrapping the memory");
  }
}

}  // namespace

void share_tracking(const Tensor& t, const Tensor& with) {
  ops::check_defined(t, "share_tracking");
  ops::check_defined(with, "share_tracking");
  if (t.device() != with.device()) {
    throw Error(api::function("share_tracking") + ": the tensors are on different devices (" +
                t.device().str() + " and " + with.device().str() + ")");
  }
  const auto& own = detail::TensorAccess::storage(t);
  std::vector<std::shared_ptr<detail::Storage>> mine, theirs;
  detail::add_tracking_roots(own, mine);
  detail::add_tracking_roots(detail::TensorAccess::storage(with), theirs);
  const bool already = std::all_of(theirs.begin(), theirs.end(), [&](const auto& r) {
    return std::find(mine.begin(), mine.end(), r) != mine.end();
  });
  if (already) return;
  check_can_share(*own);
  // Joined at the wrap (overlapping memory): keeps those and adds `with`'s; else only `with`'s.
  if (!own->tracked_by) mine.clear();
  for (auto& r : theirs) {
    if (std::find(mine.begin(), mine.end(), r) == mine.end()) mine.push_back(std::move(r));
  }
  if (mine.size() > detail::kMaxTrackingRoots) {
    throw Error(api::function("share_tracking") + ": the tensor would share the tracking of " +
                std::to_string(mine.size()) + " buffers tracked apart (at most " +
                std::to_string(detail::kMaxTrackingRoots) + ")");
  }
  detail::join_tracking(*own, mine);
}

}  // namespace streamrt
