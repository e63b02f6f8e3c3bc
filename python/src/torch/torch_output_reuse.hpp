#pragma once
// Stream-ordered reuse of outputs' memory: a new output of stream work takes the block of a
// storage that only ops queued earlier on the same stream still hold (docs/torch.md, "Memory").

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>

namespace streamrt::python::torch_runner {

//! The storages of one queued op whose blocks later outputs of its stream may take while it has
//! not started. Opaque; made by list_reusable(), given up by reusable_started() and
//! free_reusable().
struct ReuseTicket;

//! Lists the output-cache blocks of `storages` (those reusable_block() accepts) as reusable for
//! later outputs that this thread allocates for stream `stream_id` (empty_stream_output), on
//! behalf of the op that holds those storages and that this thread launches on that stream next:
//! call it before the launch. Null when none is listed (or `stream_id` is 0). Never blocks but
//! briefly (a lock); thread-safe; throws std::bad_alloc.
ReuseTicket* list_reusable(const c10::Storage* const* storages, std::size_t n,
                           std::uint64_t stream_id);

//! The op of `ticket` started (or will never run): its blocks are no longer listed. Call it
//! before the op drops a reference to its storages. Idempotent; null does nothing. Never blocks
//! but briefly; thread-safe.
void reusable_started(ReuseTicket* ticket) noexcept;

//! reusable_started(), then frees the ticket. Null does nothing. Never blocks but briefly;
//! thread-safe.
void free_reusable(ReuseTicket* ticket) noexcept;

//! A new output of this layout for an op this thread launches next on its current stream (as
//! empty_output): on the block of a storage listed for that stream by this thread when only the
//! queued ops that listed it still hold it (they run before this thread's next op there, and
//! nothing else can reach that memory), else on a block of the output cache. Blocks only briefly;
//! thread-safe; throws c10::Error when out of memory.
at::Tensor empty_stream_output(at::IntArrayRef sizes, at::IntArrayRef strides,
                               at::ScalarType dtype);

//! Turns reuse on (the default) or off, for measurements and tests. Never blocks; thread-safe.
void use_output_reuse(bool on) noexcept;

}  // namespace streamrt::python::torch_runner
