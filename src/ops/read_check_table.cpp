// The read checker's table and page protection (read_check_table.hpp).
#include "read_check_table.hpp"

#include <sys/mman.h>
#include <unistd.h>

namespace streamrt::ops::read_check {
namespace {

// Release/acquire: a table seen by table_made() is fully constructed.
std::atomic<Table*> g_table{nullptr};

std::uintptr_t page_size() noexcept {
  static const auto size = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  return size;
}

}  // namespace

Table& the_table() {
  static Table* table = [] {
    auto* t = new Table();  // leaked: the fault handler may read it until the process ends
    g_table.store(t, std::memory_order_release);
    return t;
  }();
  return *table;
}

bool table_made() noexcept {
  return g_table.load(std::memory_order_acquire) != nullptr;
}

std::pair<std::uintptr_t, std::uintptr_t> whole_pages(const void* data,
                                                      std::size_t nbytes) noexcept {
  const std::uintptr_t page = page_size();
  const auto first = reinterpret_cast<std::uintptr_t>(data);
  const std::uintptr_t begin = (first + page - 1) / page * page;
  const std::uintptr_t end = (first + nbytes) / page * page;
  return {begin, end};
}

bool set_access(std::uintptr_t begin, std::uintptr_t end, bool accessible) noexcept {
  if (begin >= end) return true;
  const int prot = accessible ? PROT_READ | PROT_WRITE : PROT_NONE;
  return ::mprotect(reinterpret_cast<void*>(begin), end - begin, prot) == 0;
}

void release_slot(Entry& e) noexcept {
  std::shared_ptr<impl::EventImpl> writer;
  Table& table = the_table();
  std::lock_guard lock(e.lock);
  // Relaxed loads: written under this lock only.
  const std::uintptr_t begin = e.begin.load(std::memory_order_relaxed);
  const std::uintptr_t end = e.end.load(std::memory_order_relaxed);
  set_access(begin, end, true);
  // The ring before the slot is cleared: a handler that no longer finds the slot finds the range
  // there (seq_cst on both sides).
  const std::size_t at = table.recent_next.fetch_add(1) % kRecent;
  table.recent_end[at].store(0);
  table.recent_begin[at].store(begin);
  table.recent_end[at].store(end);
  e.begin.store(0);
  e.end.store(0);
  e.key = nullptr;
  writer = std::move(e.writer);
}

}  // namespace streamrt::ops::read_check
