#pragma once
//! \file work.hpp
//! detail: a move-only, type-erased `void()` callable with a small inline buffer, so that
//! launching a small lambda does not allocate. Not part of the stable API.

#include <cstddef>
#include <new>
#include <type_traits>
#include <utility>

namespace streamrt::detail {

//! A move-only `void()` callable. Not thread-safe (owned by one queue entry at a time).
class Work {
 public:
  //! Bytes of callable stored inline; larger callables go to the heap.
  static constexpr std::size_t kInlineSize = 48;

  //! An empty Work (invoking it is a bug).
  Work() noexcept = default;

  //! Wraps any callable `fn()`; stores it inline when it fits and is nothrow-movable.
  template <class F, class D = std::decay_t<F>,
            class = std::enable_if_t<!std::is_same_v<D, Work> && std::is_invocable_v<D&>>>
  Work(F&& fn) {  // NOLINT: implicit on purpose, like std::function
    if constexpr (sizeof(D) <= kInlineSize && alignof(D) <= alignof(std::max_align_t) &&
                  std::is_nothrow_move_constructible_v<D>) {
      ::new (static_cast<void*>(buf_)) D(std::forward<F>(fn));
      ops_ = &kInlineOps<D>;
    } else {
      *reinterpret_cast<D**>(buf_) = new D(std::forward<F>(fn));
      ops_ = &kHeapOps<D>;
    }
  }

  //! Moves the callable; `other` becomes empty.
  Work(Work&& other) noexcept : ops_(other.ops_) {
    if (ops_ != nullptr) ops_->move(buf_, other.buf_);
    other.ops_ = nullptr;
  }

  //! Moves the callable; the old one is destroyed first.
  Work& operator=(Work&& other) noexcept {
    if (this != &other) {
      reset();
      ops_ = other.ops_;
      if (ops_ != nullptr) ops_->move(buf_, other.buf_);
      other.ops_ = nullptr;
    }
    return *this;
  }

  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;

  //! Destroys the callable (captured state is released here).
  ~Work() { reset(); }

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
  struct Ops {
    void (*invoke)(void*);
    void (*move)(void* dst, void* src) noexcept;
    void (*destroy)(void*) noexcept;
  };

  template <class D>
  static constexpr Ops kInlineOps{
      [](void* p) { (*static_cast<D*>(p))(); },
      [](void* dst, void* src) noexcept {
        ::new (dst) D(std::move(*static_cast<D*>(src)));
        static_cast<D*>(src)->~D();
      },
      [](void* p) noexcept { static_cast<D*>(p)->~D(); }};

  template <class D>
  static constexpr Ops kHeapOps{
      [](void* p) { (**static_cast<D**>(p))(); },
      [](void* dst, void* src) noexcept {
        *static_cast<D**>(dst) = *static_cast<D**>(src);
        *static_cast<D**>(src) = nullptr;
      },
      [](void* p) noexcept { delete *static_cast<D**>(p); }};

  alignas(std::max_align_t) unsigned char buf_[kInlineSize];
  const Ops* ops_ = nullptr;
};

}  // namespace streamrt::detail
