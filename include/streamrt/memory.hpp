#pragma once
//! \file memory.hpp
//! The stream-ordered caching allocator behind tensor storage (the CPU counterpart of
//! cudaMallocAsync / torch.cuda's caching allocator). Freed blocks stay cached, pages warm, and are
//! handed out again by size class; a block freed while work on some stream may still use it goes
//! only to that stream (whose later work runs after it) until that work is done. See docs/ops.md,
//! "The stream-ordered caching allocator".

#include <cstddef>
#include <cstdint>

#include "streamrt/device.hpp"
#include "streamrt/export.hpp"

namespace streamrt {

//! Counters of the caching allocator of one device (as torch.cuda.memory_stats()).
struct STREAMRT_API MemoryStats {
  std::size_t bytes_in_use = 0;       //!< held by live tensor storage (size-class bytes)
  std::size_t bytes_cached = 0;       //!< freed blocks kept for reuse (not returned to the OS)
  std::size_t peak_bytes_in_use = 0;  //!< highest bytes_in_use since start or the last reset
  std::uint64_t allocations = 0;      //!< storage allocations served (cache hits included)
  std::uint64_t cache_hits = 0;       //!< allocations served from a cached block
  std::uint64_t releases = 0;         //!< cached blocks returned to the OS (limit, empty_cache)
  std::size_t cache_limit = 0;        //!< cached bytes beyond which blocks are released
};

//! A snapshot of the allocator's counters for `device`. Never blocks (takes a short lock);
//! thread-safe. Throws Error for a device without tensor support.
STREAMRT_API MemoryStats memory_stats(Device device = {});

//! Returns every cached block that no queued work may still use to the OS (as
//! torch.cuda.empty_cache()). Blocks still waited on stay cached. Never blocks on work;
//! thread-safe.
STREAMRT_API void empty_cache(Device device = {});

//! Sets peak_bytes_in_use to the current bytes_in_use. Thread-safe.
STREAMRT_API void reset_peak_memory_stats(Device device = {});

//! Caps the cached (free, kept) bytes of `device`: past it, cached blocks that no work may still
//! use are returned to the OS, largest first. The default is 1 GiB or the environment variable
//! STREAMRT_CACHE_LIMIT (bytes, or a number with K, M or G, e.g. "512M"; 0 caches nothing),
//! read when the library is loaded (a bad value makes every allocation throw Error naming it).
//! Thread-safe; takes effect at once.
STREAMRT_API void set_memory_cache_limit(std::size_t bytes, Device device = {});

}  // namespace streamrt
