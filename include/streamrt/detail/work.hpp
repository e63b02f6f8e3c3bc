#pragma once
//! \file work.hpp
//! detail: a move-only, type-erased `void()` callable with a small inline buffer, so that
//! launching a small lambda does not allocate. Not part of the stable API.

#include <cstddef>
#include <new>
#include <type_traits>
#include <utility>

#include "streamrt/detail/block_cache.hpp"

namespace streamrt::detail {

//! How a BasicWork handles the callable it holds; one table per callable type and storage kind,
//! shared by every inline size, so that a callable moves between sizes without re-wrapping.
struct WorkOps {
  void (*invoke)(void*);
  void (*move)(void* dst, void* src) noexcept;
  void (*destroy)(void*) noexcept;
  std::size_t size;   //!< bytes the callable takes in a buffer (a pointer when on the heap)
  std::size_t align;  //!< alignment it needs there
};

//! Callable D stored in the buffer.
template <class D>
inline constexpr WorkOps kInlineWorkOps{[](void* p) { (*static_cast<D*>(p))(); },
                                        [](void* dst, void* src) noexcept {
                                          ::new (dst) D(std::move(*static_cast<D*>(src)));
                                          static_cast<D*>(src)->~D();
                                        },
                                        [](void* p) noexcept { static_cast<D*>(p)->~D(); },
                                        sizeof(D), alignof(D)};

//! True when D's heap copy comes from the block cache (a queued callable is usually freed by the
//! worker that ran it, not by the thread that made it).
template <class D>
inline constexpr bool kCachedWork = sizeof(D) <= kMaxCachedBlock &&
                                    alignof(D) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__;

//! A heap copy of callable D.
template <class D, class F>
D* new_work(F&& fn) {
  if constexpr (kCachedWork<D>) {
    void* p = cached_alloc(sizeof(D));
    try {
      return ::new (p) D(std::forward<F>(fn));
    } catch (...) {
      cached_free(p, sizeof(D));
      throw;
    }
  } else {
    return new D(std::forward<F>(fn));
  }
}

//! Destroys a copy made by new_work.
template <class D>
void delete_work(D* d) noexcept {
  if constexpr (kCachedWork<D>) {
    d->~D();
    cached_free(d, sizeof(D));
  } else {
    delete d;
  }
}

//! Callable D on the heap, the buffer holding its pointer.
template <class D>
inline constexpr WorkOps kHeapWorkOps{[](void* p) { (**static_cast<D**>(p))(); },
                                      [](void* dst, void* src) noexcept {
                                        *static_cast<D**>(dst) = *static_cast<D**>(src);
                                        *static_cast<D**>(src) = nullptr;
                                      },
                                      [](void* p) noexcept { delete_work(*static_cast<D**>(p)); },
                                      sizeof(D*), alignof(D*)};

template <std::size_t N, std::size_t A>
class BasicWork;

template <class T>
struct IsBasicWork : std::false_type {};
template <std::size_t N, std::size_t A>
struct IsBasicWork<BasicWork<N, A>> : std::true_type {};

//! A move-only `void()` callable with `N` bytes of inline storage aligned to `A`. Not thread-safe
//! (owned by one queue entry at a time).
template <std::size_t N, std::size_t A>
class BasicWork {
  static_assert(N >= sizeof(void*) && A >= alignof(void*), "a heap pointer must fit inline");

 public:
  //! Bytes of callable stored inline; larger callables go to the heap.
  static constexpr std::size_t kInlineSize = N;
  //! True when a callable of type D is stored inline (no allocation): it fits, and moves
  //! without throwing.
  template <class D>
  static constexpr bool kStoresInline = sizeof(D) <= N &&
                                        alignof(D) <= A&& std::is_nothrow_move_constructible_v<D>;

  //! An empty Work (invoking it is a bug).
  BasicWork() noexcept = default;

  //! Wraps any callable `fn()`; stores it inline when it fits and is nothrow-movable.
  template <class F, class D = std::decay_t<F>,
            class = std::enable_if_t<!IsBasicWork<D>::value && std::is_invocable_v<D&>>>
  BasicWork(F&& fn) {  // NOLINT: implicit on purpose, like std::function
    if constexpr (kStoresInline<D>) {
      ::new (static_cast<void*>(buf_)) D(std::forward<F>(fn));
      ops_ = &kInlineWorkOps<D>;
    } else {
      *reinterpret_cast<D**>(buf_) = new_work<D>(std::forward<F>(fn));
      ops_ = &kHeapWorkOps<D>;
    }
  }

  //! Takes the callable of a Work with another inline size: moved into this buffer when it fits,
  //! else `other` itself is moved to the heap (one allocation). `other` becomes empty.
  template <std::size_t M, std::size_t B, class = std::enable_if_t<M != N || B != A>>
  BasicWork(BasicWork<M, B>&& other) {  // NOLINT: implicit, as between callables
    if (other.ops_ == nullptr) return;
    if (other.ops_->size <= N && other.ops_->align <= A) {
      ops_ = std::exchange(other.ops_, nullptr);
      ops_->move(buf_, other.buf_);
    } else {
      using Box = BasicWork<M, B>;
      *reinterpret_cast<Box**>(buf_) = new_work<Box>(std::move(other));
      ops_ = &kHeapWorkOps<Box>;
    }
  }

  //! Moves the callable; `other` becomes empty.
  BasicWork(BasicWork&& other) noexcept : ops_(other.ops_) {
    if (ops_ != nullptr) ops_->move(buf_, other.buf_);
    other.ops_ = nullptr;
  }

  //! Moves the callable; the old one is destroyed first.
  BasicWork& operator=(BasicWork&& other) noexcept {
    if (this != &other) {
      reset();
      ops_ = other.ops_;
      if (ops_ != nullptr) ops_->move(buf_, other.buf_);
      other.ops_ = nullptr;
    }
    return *this;
  }

  BasicWork(const BasicWork&) = delete;
  BasicWork& operator=(const BasicWork&) = delete;

  //! Destroys the callable (captured state is released here).
  ~BasicWork() { reset(); }

  //! True when a callable is held.
  explicit operator bool() const noexcept { return ops_ != nullptr; }

  //! Runs the callable; exceptions propagate to the caller.
  void operator()() { ops_->invoke(buf_); }

  //! Destroys the callable now, releasing what it captured.
  void reset() noexcept {
    if (ops_ != nullptr) {
      ops_->destroy(buf_);
      ops_ = nullptr;
    }
  }

 private:
  template <std::size_t, std::size_t>
  friend class BasicWork;

  alignas(A) unsigned char buf_[N];
  const WorkOps* ops_ = nullptr;
};

//! The callable a launch carries from the API to the backend.
using Work = BasicWork<48, alignof(std::max_align_t)>;

//! Bytes of callable a backend's queue entry holds inline: three pointers' worth of captures, so
//! that an entry stays one 64-byte block. Work this small is queued with no allocation of its
//! own; kernels launched on every op are shaped to fit (the ops' small dense binary kernel).
inline constexpr std::size_t kQueueInlineBytes = 24;

//! The callable a queue entry carries (see kQueueInlineBytes).
using QueueWork = BasicWork<kQueueInlineBytes, alignof(void*)>;

}  // namespace streamrt::detail
