#pragma once
// The read checker's table of protected memory (read_check.hpp), shared by the code that protects
// memory (read_check.cpp) and the fault handler that judges accesses to it (read_check_fault.cpp).
// The handler runs in a signal handler: it reads the table through atomics and per-entry spin
// locks only (no allocation, no mutex that a faulting thread could hold).
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>

#include "core/spin_mutex.hpp"
#include "storage.hpp"
#include "streamrt/impl/backend.hpp"

namespace streamrt::ops::read_check {

// Storages whose memory can be protected at once; more are left unchecked.
inline constexpr std::size_t kMaxEntries = 4096;
// Ranges recently given back (release_slot), for a handler that faulted just before.
inline constexpr std::size_t kRecent = 64;

// One storage's protected pages and the op that last queued a write to them.
struct Entry {
  // The pages [begin, end); both 0 while the slot is free. Written under `lock`; the handler
  // reads them first without it (acquire) to find its slot, then again under it.
  std::atomic<std::uintptr_t> begin{0};
  std::atomic<std::uintptr_t> end{0};
  core::SpinMutex lock;
  // Guarded by lock.
  const Storage* key = nullptr;
  std::shared_ptr<impl::EventImpl> writer;  // the last queued write's position
  const char* label = nullptr;              // its op (static storage)
  const char* origin = nullptr;             // where it was queued (static storage), or null
  char stream[48] = {};
  char tensor[96] = {};
};

struct Table {
  std::array<Entry, kMaxEntries> entries;
  // Slots in use are below `used` (acquire/release with the slot's range).
  std::atomic<std::size_t> used{0};
  // Ranges given back lately, a ring written at `recent_next`.
  std::array<std::atomic<std::uintptr_t>, kRecent> recent_begin{};
  std::array<std::atomic<std::uintptr_t>, kRecent> recent_end{};
  std::atomic<std::size_t> recent_next{0};
};

// The table (made on first use, never freed: the handler may read it until the process ends).
Table& the_table();
// Whether the_table() was ever made. Never blocks.
bool table_made() noexcept;

// The whole pages inside [data, data + nbytes), as [begin, end) (begin >= end: none).
std::pair<std::uintptr_t, std::uintptr_t> whole_pages(const void* data,
                                                      std::size_t nbytes) noexcept;

// Protects the pages [begin, end) (`accessible` false) or gives their access back. False when
// mprotect refused. Safe in a signal handler.
bool set_access(std::uintptr_t begin, std::uintptr_t end, bool accessible) noexcept;

// Gives `e`'s pages their access back, remembers them as recently given back, and frees the slot.
void release_slot(Entry& e) noexcept;

// Installs the fault handler, again if another handler replaced it since (it chains to that one
// for faults that are not the checker's). Never throws.
void install_fault_handler() noexcept;

}  // namespace streamrt::ops::read_check
