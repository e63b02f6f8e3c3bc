#pragma once
//! \file block_cache.hpp
//! detail: small memory blocks recycled through per-thread free lists, for objects that one
//! thread allocates and another frees (a queued callable, a tensor's storage record). Not part of
//! the stable API.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>

#include "streamrt/export.hpp"

namespace streamrt::detail {

//! Largest request served from the cache; larger ones go to operator new.
inline constexpr std::size_t kMaxCachedBlock = 504;

//! `bytes` of memory aligned for any object up to `__STDCPP_DEFAULT_NEW_ALIGNMENT__`. Never
//! blocks on other threads (the shared stock is only try-locked). Thread-safe. Throws
//! std::bad_alloc.
STREAMRT_API void* cached_alloc(std::size_t bytes);
//! Gives back a block from cached_alloc(bytes) (any thread may free it). Thread-safe.
STREAMRT_API void cached_free(void* p, std::size_t bytes) noexcept;

//! A standard allocator over cached_alloc, for std::allocate_shared. Over-aligned types (a
//! CpuStream's cache-line sections) take a block alignof(T) larger and are aligned inside it, the
//! offset kept just before the object: `operator new(size, align_val_t)` goes to posix_memalign,
//! which cuts an aligned chunk out of a larger one on every call, many times the cost.
template <class T>
struct CachedAllocator {
  using value_type = T;
  CachedAllocator() noexcept = default;
  template <class U>
  CachedAllocator(const CachedAllocator<U>&) noexcept {}  // NOLINT: converting, as std::allocator
  T* allocate(std::size_t n) {
    if (n > (static_cast<std::size_t>(-1) - alignof(T)) / sizeof(T)) throw std::bad_alloc();
    if constexpr (alignof(T) > __STDCPP_DEFAULT_NEW_ALIGNMENT__) {
      static_assert(__STDCPP_DEFAULT_NEW_ALIGNMENT__ >= sizeof(std::size_t),
                    "the offset is kept in the gap before the object");
      auto* raw = static_cast<unsigned char*>(cached_alloc(n * sizeof(T) + alignof(T)));
      // raw is aligned to the default alignment, so the object starts between that many and
      // alignof(T) bytes past it: the gap always holds the offset.
      const auto addr = reinterpret_cast<std::uintptr_t>(raw);
      const std::size_t offset = alignof(T) - addr % alignof(T);
      std::memcpy(raw + offset - sizeof offset, &offset, sizeof offset);
      return reinterpret_cast<T*>(raw + offset);
    } else {
      return static_cast<T*>(cached_alloc(n * sizeof(T)));
    }
  }
  void deallocate(T* p, std::size_t n) noexcept {
    if constexpr (alignof(T) > __STDCPP_DEFAULT_NEW_ALIGNMENT__) {
      auto* object = reinterpret_cast<unsigned char*>(p);
      std::size_t offset = 0;
      std::memcpy(&offset, object - sizeof offset, sizeof offset);
      cached_free(object - offset, n * sizeof(T) + alignof(T));
    } else {
      cached_free(p, n * sizeof(T));
    }
  }
  template <class U>
  bool operator==(const CachedAllocator<U>&) const noexcept {
    return true;
  }
};

}  // namespace streamrt::detail
