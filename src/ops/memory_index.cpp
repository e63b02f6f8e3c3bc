// The index of wrapped and exposed memory (memory_index.hpp): storages by start address, searched
// for overlaps in the window that the longest indexed storage could reach back from.
#include "memory_index.hpp"

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "checks.hpp"
#include "streamrt/error.hpp"
#include "streamrt/ops.hpp"
#include "tensor_access.hpp"

namespace streamrt::detail {
namespace {

struct Indexed {
  Storage* raw;                // identity, for the destructor's removal
  std::weak_ptr<Storage> ref;  // locked to join its tracking (fails while it is being destroyed)
  std::uintptr_t end;
};

struct Index {
  std::mutex mutex;
  std::multimap<std::uintptr_t, Indexed> by_start;  // guarded by mutex
  std::size_t longest = 0;  // guarded by mutex; the most bytes one entry ever spanned
};

Index& index() {
  static auto* ix = new Index;  // leaked: storages may be destroyed during process exit
  return *ix;
}

std::uintptr_t start_of(const Storage& s) {
  return reinterpret_cast<std::uintptr_t>(s.data());
}

// Calls f(iterator) for each entry overlapping [b, e) (mutex held).
template <class F>
void for_each_overlap(Index& ix, std::uintptr_t b, std::uintptr_t e, F f) {
  auto it = ix.by_start.lower_bound(b > ix.longest ? b - ix.longest : 0);
  const auto stop = ix.by_start.lower_bound(e);
  while (it != stop) {
    auto next = std::next(it);
    if (it->second.end > b) f(it);
    it = next;
  }
}

void insert_locked(Index& ix, const std::shared_ptr<Storage>& s) {
  const std::uintptr_t b = start_of(*s);
  ix.by_start.emplace(b, Indexed{s.get(), s, b + s->nbytes()});
  ix.longest = std::max(ix.longest, s->nbytes());
  // Relaxed: the flag only tells the destructor to look; the entry itself is read under mutex.
  s->indexed.store(true, std::memory_order_relaxed);
}

// Drops every entry overlapping [b, e) but `keep` (they stand for memory freed since).
void evict_locked(Index& ix, std::uintptr_t b, std::uintptr_t e, const Storage* keep) noexcept {
  for_each_overlap(ix, b, e, [&](auto it) {
    if (it->second.raw == keep) return;
    it->second.raw->indexed.store(false, std::memory_order_relaxed);
    ix.by_start.erase(it);
  });
}

}  // namespace

void add_tracking_roots(const std::shared_ptr<Storage>& x,
                        std::vector<std::shared_ptr<Storage>>& roots) {
  auto add = [&](const std::shared_ptr<Storage>& r) {
    if (std::find(roots.begin(), roots.end(), r) == roots.end()) roots.push_back(r);
  };
  if (!x->tracked_by) {
    add(x);
    return;
  }
  add(x->tracked_by);
  for (const auto& r : x->also_tracked_by) add(r);
}

void join_tracking(Storage& s, const std::vector<std::shared_ptr<Storage>>& roots) {
  if (roots.empty()) return;
  for (const auto& r : roots) r->joined.store(true, std::memory_order_relaxed);  // see joined
  s.tracked_by = roots.front();
  s.also_tracked_by.assign(roots.begin() + 1, roots.end());
}

void index_wrapped(const std::shared_ptr<Storage>& s) {
  if (s->nbytes() == 0) return;
  // Declared before the lock: a storage whose last reference goes here is destroyed, and its
  // destructor takes the index's lock, only once the lock is released.
  std::vector<std::shared_ptr<Storage>> found, roots;
  Index& ix = index();
  std::lock_guard lock(ix.mutex);
  const std::uintptr_t b = start_of(*s);
  for_each_overlap(ix, b, b + s->nbytes(),
                   [&](auto it) { found.push_back(it->second.ref.lock()); });
  for (const auto& x : found) {
    if (x && x->device() == s->device()) add_tracking_roots(x, roots);
  }
  if (roots.size() > kMaxTrackingRoots) {
    throw Error(api::function("from_blob") + ": the memory overlaps " +
                std::to_string(roots.size()) +
                " buffers that were wrapped separately and are tracked apart (at most " +
                std::to_string(kMaxTrackingRoots) +
                "); wrap the whole buffer once and take views of it, or synchronize and drop the "
                "other wrappers first");
  }
  join_tracking(*s, roots);
  insert_locked(ix, s);
}

void index_exposed(const std::shared_ptr<Storage>& s) {
  // Relaxed: a hint that skips the lock on every later export; checked again under it.
  if (s->nbytes() == 0 || s->indexed.load(std::memory_order_relaxed)) return;
  Index& ix = index();
  std::lock_guard lock(ix.mutex);
  if (s->indexed.load(std::memory_order_relaxed)) return;
  const std::uintptr_t b = start_of(*s);
  evict_locked(ix, b, b + s->nbytes(), s.get());
  insert_locked(ix, s);
}

void unindex_range(const void* data, std::size_t nbytes) noexcept {
  if (nbytes == 0) return;
  Index& ix = index();
  std::lock_guard lock(ix.mutex);
  const auto b = reinterpret_cast<std::uintptr_t>(data);
  evict_locked(ix, b, b + nbytes, nullptr);
}

void unindex(Storage& s) noexcept {
  if (!s.indexed.load(std::memory_order_relaxed)) return;
  Index& ix = index();
  std::lock_guard lock(ix.mutex);
  auto [first, last] = ix.by_start.equal_range(start_of(s));
  for (auto it = first; it != last; ++it) {
    if (it->second.raw == &s) {
      ix.by_start.erase(it);
      break;
    }
  }
  s.indexed.store(false, std::memory_order_relaxed);
}

bool indexed_overlap(const void* data, std::size_t nbytes) {
  if (nbytes == 0) return false;
  Index& ix = index();
  std::lock_guard lock(ix.mutex);
  if (ix.by_start.empty()) return false;
  const auto b = reinterpret_cast<std::uintptr_t>(data);
  bool any = false;
  for_each_overlap(ix, b, b + nbytes, [&](auto it) { any = any || !it->second.ref.expired(); });
  return any;
}

}  // namespace streamrt::detail

namespace streamrt {

void expose_memory(const Tensor& t) {
  ops::check_defined(t, "expose_memory");
  detail::index_exposed(detail::TensorAccess::storage(t));
}

void claim_memory(const void* data, std::size_t nbytes) noexcept {
  detail::unindex_range(data, nbytes);
}

void release_memory(const Tensor& t) noexcept {
  if (t.defined()) detail::unindex(*detail::TensorAccess::storage(t));
}

bool memory_tracked(const void* data, std::size_t nbytes) {
  return detail::indexed_overlap(data, nbytes);
}

}  // namespace streamrt
