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
};

//! A new CPU tensor of this layout on the output cache's memory (the outputs of stream work: the
//! host allocates them at the call, a worker usually frees them). Blocks only briefly (a lock);
//! thread-safe; throws c10::Error when out of memory.
at::Tensor empty_output(at::IntArrayRef sizes, at::IntArrayRef strides, at::ScalarType dtype);

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
