// The tracker registry of streamrt._streamrt_torch (torch_runner_internal.hpp): torch storages'
// trackers by start address, for the fast path (no GIL) and for streamrt.torch's Python code
// alike, so both find the same tracker for the same memory.
#include <utility>

#include "torch_runner_internal.hpp"

namespace streamrt::python::torch_runner {

std::uintptr_t storage_base(const at::Tensor& t) noexcept {
  if (!t.has_storage()) return 0;
  return reinterpret_cast<std::uintptr_t>(t.storage().unsafeGetStorageImpl()->data());
}

Registry& registry() {
  static auto* r = new Registry;  // leaked: trackers may be looked up during process exit
  return *r;
}

bool Registry::Entry::alive() const noexcept {
  for (const auto& w : weak) {
    if (!w.expired()) return true;
  }
  return false;
}

bool Registry::Entry::freed() const noexcept {
  return !alive() && host()->tracker_idle(tracker->get());
}

Registry::Entry* Registry::live(std::uintptr_t base) {
  auto it = entries_.find(base);
  if (it == entries_.end()) return nullptr;
  Entry& e = it->second;
  // Pending work keeps the memory it uses alive, so the address still means this memory.
  if (!e.freed()) return &e;
  return nullptr;
}

Registry::Found Registry::tracker(const at::Tensor& t, TrackerPtr* out) {
  const std::uintptr_t base = storage_base(t);
  if (base == 0) return Found::kNoMemory;
  std::vector<TrackerPtr> dropped;  // freed after the lock is released
  std::lock_guard lock(mutex_);
  auto it = entries_.find(base);
  if (it != entries_.end() && !it->second.weak.empty() && !it->second.weak.front().expired()) {
    *out = it->second.tracker;  // the common case: the storage that made the entry lives
    return Found::kTracker;
  }
  if (Entry* e = live(base)) {
    e->weak.push_back(t.storage().getWeakStorageImpl());
    *out = e->tracker;
    return Found::kTracker;
  }
  const auto nbytes = static_cast<std::int64_t>(t.storage().nbytes());
  if (nbytes <= 0) return Found::kNoMemory;
  drop_dead_overlaps_locked(base, base + static_cast<std::uintptr_t>(nbytes), dropped);
  void* handle = host()->tracker_new(base, nbytes, /*fresh=*/false);
  if (handle == nullptr) return Found::kFailed;
  auto tracker = std::make_shared<Tracker>(handle);
  file_locked(base, t, tracker, /*wrapped=*/true, dropped);
  *out = std::move(tracker);
  return Found::kTracker;
}

void Registry::drop_locked(Entry& e, std::vector<TrackerPtr>& dropped) {
  // A tracker made for the memory stands for memory freed now: later trackers made over it must
  // not join it, even while something still holds it (a queued work item, a Python object).
  if (e.wrapped) host()->tracker_release(e.tracker->get());
  dropped.push_back(std::move(e.tracker));
}

void Registry::drop_dead_overlaps_locked(std::uintptr_t base, std::uintptr_t end,
                                         std::vector<TrackerPtr>& dropped) {
  // A walk of every entry: only when a storage no stream work made is first used.
  for (auto it = entries_.begin(); it != entries_.end();) {
    Entry& e = it->second;
    const bool overlaps = it->first < end && e.end > base;
    if (overlaps && e.freed()) {
      drop_locked(e, dropped);
      it = entries_.erase(it);
    } else {
      ++it;
    }
  }
}

TrackerPtr Registry::find(const at::Tensor& t) {
  const std::uintptr_t base = storage_base(t);
  if (base == 0 || empty()) return nullptr;
  std::lock_guard lock(mutex_);
  Entry* e = live(base);
  return e == nullptr ? nullptr : e->tracker;
}

TrackerPtr Registry::fresh(const at::Tensor& t) {
  const std::uintptr_t base = storage_base(t);
  const auto nbytes = static_cast<std::int64_t>(t.storage().nbytes());
  void* handle = host()->tracker_new(base, nbytes, /*fresh=*/true);
  if (handle == nullptr) return nullptr;
  auto tracker = std::make_shared<Tracker>(handle);
  std::vector<TrackerPtr> dropped;
  std::lock_guard lock(mutex_);
  file_locked(base, t, tracker, /*wrapped=*/true, dropped);
  return tracker;
}

void Registry::share(const at::Tensor& t, TrackerPtr with) {
  const std::uintptr_t base = storage_base(t);
  if (base == 0) return;
  std::vector<TrackerPtr> dropped;
  std::lock_guard lock(mutex_);
  if (Entry* e = live(base)) {
    e->weak.push_back(t.storage().getWeakStorageImpl());
    return;
  }
  file_locked(base, t, std::move(with), /*wrapped=*/false, dropped);
}

void Registry::file_locked(std::uintptr_t base, const at::Tensor& t, TrackerPtr tracker,
                           bool wrapped, std::vector<TrackerPtr>& dropped) {
  Entry& e = entries_[base];
  if (e.tracker) drop_locked(e, dropped);  // memory freed since (else the entry was live)
  e.tracker = std::move(tracker);
  e.weak.clear();
  e.weak.push_back(t.storage().getWeakStorageImpl());
  e.end = base + t.storage().nbytes();
  e.wrapped = wrapped;
  maybe_sweep(dropped);
  update_count();
}

void Registry::maybe_sweep(std::vector<TrackerPtr>& dropped) {
  // Amortised over the insertions: the threshold doubles with what stays.
  if (entries_.size() < sweep_at_) return;
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (it->second.freed()) {
      drop_locked(it->second, dropped);
      it = entries_.erase(it);
    } else {
      ++it;
    }
  }
  sweep_at_ = std::max<std::size_t>(1024, 2 * entries_.size());
}

void Registry::sweep() {
  std::vector<TrackerPtr> dropped;
  std::lock_guard lock(mutex_);
  sweep_at_ = 0;
  maybe_sweep(dropped);
  update_count();
}

std::size_t Registry::size() {
  std::lock_guard lock(mutex_);
  return entries_.size();
}

std::vector<Registry::Exported> Registry::take_all() {
  std::vector<Exported> out;
  std::lock_guard lock(mutex_);
  out.reserve(entries_.size());
  for (auto& [base, e] : entries_) {
    Exported x{base, std::move(e.tracker), {}, e.end, e.wrapped};
    for (auto& w : e.weak) x.weak.push_back(w.release());
    out.push_back(std::move(x));
  }
  entries_.clear();
  sweep_at_ = 1024;
  update_count();
  return out;
}

void Registry::put(std::vector<Exported> entries) {
  std::vector<TrackerPtr> dropped;
  std::lock_guard lock(mutex_);
  for (auto& x : entries) {
    Entry& e = entries_[x.base];
    if (e.tracker) dropped.push_back(std::move(e.tracker));
    e.tracker = std::move(x.tracker);
    e.end = x.end;
    e.wrapped = x.wrapped;
    e.weak.clear();
    for (c10::StorageImpl* w : x.weak) {
      e.weak.push_back(c10::weak_intrusive_ptr<c10::StorageImpl>::reclaim(w));
    }
  }
  sweep_at_ = std::max<std::size_t>(1024, 2 * entries_.size());
  update_count();
}

}  // namespace streamrt::python::torch_runner
