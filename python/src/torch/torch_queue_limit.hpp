#pragma once
// How far a host thread may run ahead of a stream with torch ops (docs/torch.md, "Memory").

#include <cstddef>
#include <cstdint>
#include <utility>

#include "streamrt/stream.hpp"

namespace streamrt::python {

//! The bytes of new outputs held by the torch ops queued on one stream.
struct QueuedBytes;

//! `s`'s count (made on first use, kept for the process: work may outlive the stream's handle).
//! Never blocks but briefly (a lock, unless `s` is the stream this thread asked for last);
//! thread-safe; throws std::bad_alloc.
QueuedBytes* queued_bytes_of(const Stream& s);

//! Counts `n` more bytes of outputs queued on the stream of `q`. Never blocks; thread-safe.
void add_queued_bytes(QueuedBytes* q, std::size_t n) noexcept;

//! Counts `n` bytes less and one torch op more gone from the queue (it finished, was skipped or
//! dropped). Never blocks; thread-safe.
void finish_queued(QueuedBytes* q, std::size_t n) noexcept;

//! `n` bytes of new outputs counted on a stream (add_queued_bytes) for as long as it lives, and
//! its op as gone (finish_queued) then: a work item holds it. Move-only. Never blocks.
class QueuedOutputs {
 public:
  QueuedOutputs(QueuedBytes* q, std::size_t n) noexcept : q_(q), n_(n) { add_queued_bytes(q, n); }
  QueuedOutputs(QueuedOutputs&& other) noexcept
      : q_(std::exchange(other.q_, nullptr)), n_(other.n_) {}
  QueuedOutputs& operator=(QueuedOutputs&&) = delete;
  QueuedOutputs(const QueuedOutputs&) = delete;
  QueuedOutputs& operator=(const QueuedOutputs&) = delete;
  ~QueuedOutputs() {
    if (q_ != nullptr) finish_queued(q_, n_);
  }

 private:
  QueuedBytes* q_;
  std::size_t n_;
};

//! After the launch of a torch op on `s`, whose count is `q` (queued_bytes_of): when more than
//! queue_limit() items, or more than queue_bytes_limit() bytes of outputs, are queued on it,
//! waits until at most half of each are, so that the host runs ahead of the stream's work by a
//! bounded number of ops and bytes. A
//! stream that finishes no torch op for a while (held by a user event, behind a long op) is not
//! waited for any longer, nor again by any thread until it finished one: this never hangs.
//! Never waits on a worker thread (stream work launching ops). Releases the GIL while it waits,
//! when the calling thread holds it. Blocks (see above); thread-safe; never throws.
void limit_torch_queue(const Stream& s, QueuedBytes& q) noexcept;

//! Sets the most items a stream may have queued before a host thread launching a torch op on it
//! waits (at least 2; 0: no limit). Never blocks; thread-safe; throws Error for 1 or a negative
//! count.
void set_queue_limit(std::int64_t items);

//! Sets the most bytes of queued ops' new outputs a stream may have before a host thread
//! launching a torch op on it waits (0: no limit). Never blocks; thread-safe; throws Error for a
//! negative count.
void set_queue_bytes_limit(std::int64_t bytes);

//! The limits of set_queue_limit() and set_queue_bytes_limit(). Never block; thread-safe.
std::int64_t queue_limit() noexcept;
std::int64_t queue_bytes_limit() noexcept;

//! How many times a host thread waited in limit_torch_queue() so far (a statistic for tests and
//! benchmarks). Never blocks; thread-safe.
std::uint64_t queue_limit_waits() noexcept;

}  // namespace streamrt::python
