// The read checker (read_check.hpp): the table of protected memory and its protection. The fault
// handler that judges an access is in read_check_fault.cpp.
#include "read_check.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "read_check_table.hpp"
#include "streamrt/error.hpp"
#include "streamrt/impl/launch_site.hpp"
#include "tensor_access.hpp"

namespace streamrt::ops::read_check {
namespace {

bool from_environment() {
  const char* text = std::getenv("STREAMRT_READ_CHECK");
  if (text == nullptr || *text == '\0' || std::strcmp(text, "0") == 0) return false;
  if (std::strcmp(text, "1") == 0) return true;
  throw Error(std::string("STREAMRT_READ_CHECK='") + text +
              "' is not a setting: use 1 to turn the read checker on, 0 (or leave it unset) "
              "to turn it off");
}

// Slots by storage, for note_writes and forget; the fault handler scans the table instead.
std::mutex g_slots_mutex;
std::unordered_map<const Storage*, std::size_t>& slots() {
  static auto* map = new std::unordered_map<const Storage*, std::size_t>();  // leaked: used at exit
  return *map;
}
std::vector<std::size_t>& free_slots() {
  static auto* list = new std::vector<std::size_t>();  // leaked: used at exit
  return *list;
}

// The slot of `storage` (made for the pages [begin, end) when new), or null when the table is
// full. Holds g_slots_mutex.
Entry* slot_for(const Storage& storage, std::uintptr_t begin, std::uintptr_t end) {
  std::lock_guard lock(g_slots_mutex);
  Table& table = the_table();
  auto it = slots().find(&storage);
  if (it != slots().end()) return &table.entries[it->second];
  std::size_t index;
  if (!free_slots().empty()) {
    index = free_slots().back();
    free_slots().pop_back();
  } else {
    // Relaxed: g_slots_mutex orders writers; the handler reads the count with acquire after the
    // slot's range is published (below, release).
    index = table.used.load(std::memory_order_relaxed);
    if (index == kMaxEntries) return nullptr;
  }
  Entry& e = table.entries[index];
  {
    std::lock_guard entry_lock(e.lock);
    e.key = &storage;
    // Release: a handler that sees the range (acquire) sees the slot's other fields.
    e.end.store(end, std::memory_order_release);
    e.begin.store(begin, std::memory_order_release);
  }
  if (index == table.used.load(std::memory_order_relaxed)) {
    table.used.store(index + 1, std::memory_order_release);
  }
  slots().emplace(&storage, index);
  return &e;
}

// What the report says of the write: its stream and tensor, formatted before the entry's lock is
// taken (formatting allocates, and nothing that allocates may run under it: see the handler).
struct Description {
  char stream[sizeof(Entry::stream)] = {};
  char tensor[sizeof(Entry::tensor)] = {};
};

Description describe(const Stream& stream, std::uint64_t stream_id, const Tensor& t) noexcept {
  Description d;
  try {
    std::snprintf(d.stream, sizeof d.stream, "%s stream %llu", stream.device().str().c_str(),
                  static_cast<unsigned long long>(stream_id));
    const std::string_view dtype = to_string(t.dtype());
    std::snprintf(d.tensor, sizeof d.tensor, "%.*s tensor of shape %s",
                  static_cast<int>(dtype.size()), dtype.data(), to_string(t.shape()).c_str());
  } catch (...) {
    std::snprintf(d.tensor, sizeof d.tensor, "tensor");
  }
  return d;
}

void note_write(const char* label, const Stream& stream, std::uint64_t stream_id,
                const std::shared_ptr<impl::EventImpl>& position, const Tensor& t) noexcept {
  const Storage& storage = *detail::TensorAccess::storage(t);
  const auto [begin, end] = whole_pages(storage.data(), storage.nbytes());
  if (begin >= end) return;  // less than a page of its own: not checked
  Entry* e = nullptr;
  try {
    e = slot_for(storage, begin, end);
  } catch (...) {
  }
  if (e == nullptr) return;
  install_fault_handler();
  const Description d = describe(stream, stream_id, t);
  std::shared_ptr<impl::EventImpl> previous;  // released after the lock
  std::lock_guard lock(e->lock);
  previous = std::exchange(e->writer, position);
  e->label = label;
  e->origin = impl::current_launch_origin();
  std::memcpy(e->stream, d.stream, sizeof d.stream);
  std::memcpy(e->tensor, d.tensor, sizeof d.tensor);
  set_access(begin, end, false);
}

}  // namespace

std::atomic<int> g_state{-1};

bool enabled_slow() {
  const bool on = from_environment();
  g_state.store(on ? 1 : 0, std::memory_order_relaxed);
  return on;
}

void note_writes(const char* label, const Stream& stream, std::uint64_t stream_id,
                 const std::shared_ptr<impl::EventImpl>& position,
                 std::span<const Tensor* const> writes) noexcept {
  for (const Tensor* t : writes) note_write(label, stream, stream_id, position, *t);
}

void forget(const Storage& storage) noexcept {
  // Relaxed: a table that was never used has nothing to forget.
  if (!table_made()) return;
  std::size_t index;
  {
    std::lock_guard lock(g_slots_mutex);
    auto it = slots().find(&storage);
    if (it == slots().end()) return;
    index = it->second;
    slots().erase(it);
  }
  release_slot(the_table().entries[index]);
  std::lock_guard lock(g_slots_mutex);
  try {
    free_slots().push_back(index);
  } catch (...) {
    // The slot stays unused: the table is one entry smaller.
  }
}

void set_enabled_for_testing(bool on) noexcept {
  g_state.store(on ? 1 : 0, std::memory_order_relaxed);
}

}  // namespace streamrt::ops::read_check
