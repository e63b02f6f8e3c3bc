#pragma once
// The memory of the outputs that ops on streams hand out at their call.

#include <ATen/core/Tensor.h>
#include <c10/core/Allocator.h>

#include <cstddef>
#include <cstdint>

namespace streamrt::python::torch_runner {

//! What the output cache holds and did.
struct OutputCacheStats {
  std::size_t cached_bytes;  //!< freed blocks kept for reuse
  std::size_t limit_bytes;   //!< most it keeps (set_output_cache_limit)
  std::uint64_t hits;        //!< allocations served by a kept block
  std::uint64_t misses;      //!< allocations that took new memory
  std::uint64_t reused;      //!< outputs handed the block of a queued op's (output_on_block)
};

//! A new CPU tensor of this layout on the output cache's memory (the outputs of stream work: the
//! host allocates them at the call, a worker usually frees them). Blocks only briefly (a lock);
//! thread-safe; throws c10::Error when out of memory.
at::Tensor empty_output(at::IntArrayRef sizes, at::IntArrayRef strides, at::ScalarType dtype);

//! The smallest block reusable_block() hands on: smaller outputs cost little memory in a queue.
inline constexpr std::size_t kReusableBlock = std::size_t{256} << 10;

//! Whether empty_output() allocates on the output cache now (use_output_cache()). Never blocks.
bool output_cache_on() noexcept;

//! The bytes of the block an output of `nbytes` gets (rounded up to its size class). Never
//! blocks.
std::size_t output_block_size(std::size_t nbytes) noexcept;

//! The block under `storage`'s memory when the output cache allocated it and it is large enough
//! to be handed on to a later output (torch_output_reuse.hpp); null otherwise. Read the storage
//! only where nothing changes its memory meanwhile. Never blocks.
void* reusable_block(const c10::Storage& storage) noexcept;

//! The bytes of a block of reusable_block() (those of output_block_size()). Never blocks.
std::size_t block_bytes(const void* block) noexcept;

//! One more holder of a block while another holder keeps it alive, to be taken over by
//! output_on_block(). Never blocks; thread-safe.
void hold_block(void* block) noexcept;

//! The block under `storage`'s memory when the output cache allocated it, whatever its size; null
//! otherwise. Read the storage only where nothing changes its memory meanwhile. Never blocks.
void* output_block(const c10::Storage& storage) noexcept;

//! A new hold of `block` (of output_block()) as a DataPtr on its data whose context is the data
//! itself (as c10's CPU allocator makes them, so that Allocator::raw_allocate() takes it too);
//! `deleter` gets the data and must end with release_block_data(). Never blocks; thread-safe.
c10::DataPtr block_data_ptr(void* block, c10::DeleterFnPtr deleter) noexcept;

//! Drops the hold of a DataPtr of block_data_ptr(), given its data. Never blocks; thread-safe.
void release_block_data(void* data) noexcept;

//! A new CPU tensor of this layout on `block`, taking over one hold of it (hold_block), for an
//! output whose size class is the block's. The block's other holder must not touch its memory
//! once this tensor's work may run. Blocks only briefly; thread-safe; throws c10::Error.
at::Tensor output_on_block(void* block, at::IntArrayRef sizes, at::IntArrayRef strides,
                           at::ScalarType dtype);

//! Outputs on the output cache's memory (true, the default) or on torch's CPU allocator (false),
//! from the next empty_output() on: for measuring what the cache changes. Never blocks;
//! thread-safe.
void use_output_cache(bool on) noexcept;

//! The allocator behind empty_output(): the allocator of those tensors' storages (a resize of
//! one reallocates through it). Never blocks; thread-safe.
c10::Allocator* output_allocator() noexcept;

//! Sets how many bytes of freed blocks the cache keeps (0: none, every block freed at once);
//! shrinks it at once when it holds more. Blocks only briefly; thread-safe; never throws.
void set_output_cache_limit(std::size_t bytes) noexcept;

//! Frees every kept block (blocks in use stay until freed). Blocks only briefly; thread-safe.
void empty_output_cache() noexcept;

//! The figures of the cache now. Blocks only briefly; thread-safe.
OutputCacheStats output_cache_stats() noexcept;

}  // namespace streamrt::python::torch_runner
