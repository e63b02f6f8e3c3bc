#pragma once
// The read checker (STREAMRT_READ_CHECK=1): memory that queued stream work will write is made
// inaccessible (mprotect) from the moment the write is queued, so a host thread that touches it
// through an alias the tracker cannot see (a numpy array, a DLPack capsule, ctypes) faults, and
// the fault is reported with the tensor, the op, its stream and the line that queued it, before
// the process aborts. Workers (and host threads helping a wait) that fault on such memory get
// their access back at once. See docs/reliability.md, "The read checker".
#include <atomic>
#include <cstdint>
#include <memory>
#include <span>

#include "storage.hpp"
#include "streamrt/impl/backend.hpp"
#include "streamrt/stream.hpp"
#include "streamrt/tensor.hpp"

namespace streamrt::ops::read_check {

// 1 on, 0 off, -1 not read yet (enabled_slow reads it). Relaxed: a setting, publishing nothing.
extern std::atomic<int> g_state;
// Reads STREAMRT_READ_CHECK and sets g_state. Throws Error naming the variable when its value is
// not a setting.
bool enabled_slow();

// Whether the checker is on: STREAMRT_READ_CHECK ("1" on, "0" or unset off), read once, or the
// test switch. Throws Error naming the variable when its value is neither. Never blocks.
inline bool enabled() {
  const int state = g_state.load(std::memory_order_relaxed);
  return state >= 0 ? state != 0 : enabled_slow();
}

// Records that the op `label`, queued on `stream` (tracked there as `stream_id`) at `position`,
// writes the memory of `writes`, and protects the whole pages of that memory until a worker runs
// the op (or a host thread touches it after the op ran). Call it with the storages' tracking
// locks held, after the accesses are recorded. Never throws: memory it cannot protect (the table
// is full, mprotect refuses) is left unchecked.
void note_writes(const char* label, const Stream& stream, std::uint64_t stream_id,
                 const std::shared_ptr<impl::EventImpl>& position,
                 std::span<const Tensor* const> writes) noexcept;

// Gives `storage`'s memory its access back and forgets it (the storage is going away, and its
// memory with it). Cheap when the checker is off or never saw the storage. Never throws.
void forget(const Storage& storage) noexcept;

// Test switch: turns the checker on or off in this process whatever the environment says.
// Set it while no op is queued on checked memory.
void set_enabled_for_testing(bool on) noexcept;

}  // namespace streamrt::ops::read_check
