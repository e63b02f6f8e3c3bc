#pragma once
// How far a host thread may run ahead of a stream with torch ops (docs/torch.md, "Memory").

#include <cstdint>

#include "streamrt/stream.hpp"

namespace streamrt::python {

//! After the launch of a torch op on `s`: when more than queue_limit() items are queued on it,
//! waits until at most half of that are, so that the host runs ahead of the stream's work by a
//! bounded number of ops (and of their outputs' memory). A stream that finishes no item for a
//! while (held by a user event, behind a long op) is not waited for any longer, nor again by this
//! thread until it finished one: this never hangs. Never waits on a worker thread (stream work
//! launching ops). Releases the GIL while it waits, when the calling thread holds it. Blocks (see
//! above); thread-safe; never throws.
void limit_torch_queue(const Stream& s) noexcept;

//! Sets the most items a stream may have queued before a host thread launching a torch op on it
//! waits (at least 2; 0: no limit). Never blocks; thread-safe; throws Error for 1 or a negative
//! count.
void set_queue_limit(std::int64_t items);

//! The limit of set_queue_limit(). Never blocks; thread-safe.
std::int64_t queue_limit() noexcept;

//! How many times a host thread waited in limit_torch_queue() so far (a statistic for tests and
//! benchmarks). Never blocks; thread-safe.
std::uint64_t queue_limit_waits() noexcept;

}  // namespace streamrt::python
