#pragma once
//! \file block_cache.hpp
//! detail: small memory blocks recycled through per-thread free lists, for objects that one
//! thread allocates and another frees (a queued callable, a tensor's storage record). Not part of
//! the stable API.

#include <cstddef>
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

//! A standard allocator over cached_alloc, for std::allocate_shared.
template <class T>
struct CachedAllocator {
  using value_type = T;
  CachedAllocator() noexcept = default;
  template <class U>
  CachedAllocator(const CachedAllocator<U>&) noexcept {}  // NOLINT: converting, as std::allocator
  T* allocate(std::size_t n) {
    if constexpr (alignof(T) > __STDCPP_DEFAULT_NEW_ALIGNMENT__) {
      return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t{alignof(T)}));
    } else {
      return static_cast<T*>(cached_alloc(n * sizeof(T)));
    }
  }
  void deallocate(T* p, std::size_t n) noexcept {
    if constexpr (alignof(T) > __STDCPP_DEFAULT_NEW_ALIGNMENT__) {
      ::operator delete(p, std::align_val_t{alignof(T)});
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
