#pragma once
// A hint to fetch a cache line that this thread is about to write: a queue node or a free block
// last written on another core arrives in the modified state, so the write that follows neither
// misses nor needs a second round trip to take the line over (docs/performance.md, "Figures behind
// constants").

namespace streamrt::core {

inline void prefetch_for_write(const void* p) noexcept {
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
  // PREFETCHW directly: without -mprfchw the builtin falls back to a read prefetch, which brings
  // the line in shared. Every x86-64 CPU decodes it (older Intel ones as a no-op).
  asm volatile("prefetchw %0" : : "m"(*static_cast<const char*>(p)));
#elif defined(__GNUC__) || defined(__clang__)
  __builtin_prefetch(p, 1);
#else
  (void)p;
#endif
}

}  // namespace streamrt::core
