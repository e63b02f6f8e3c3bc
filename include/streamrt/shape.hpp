#pragma once
//! \file shape.hpp
//! streamrt::Shape: the sizes (or strides) of a tensor's dimensions, held inline. A tensor has at
//! most kMaxDims dimensions, so a shape of that many needs no heap memory: making, copying and
//! dropping a tensor then costs no allocation (c10 keeps sizes in a SmallVector for the same
//! reason). Longer lists (an invalid shape on its way to a clear error) spill to the heap. The
//! interface is std::vector's where shapes use it, and a Shape converts to and from
//! std::vector<std::int64_t>. Not thread-safe (a value type). The free functions below do the
//! shape arithmetic tensors share (element counts, strides, broadcasting).

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "streamrt/export.hpp"

namespace streamrt {

//! The most dimensions a tensor may have.
inline constexpr int kMaxDims = 8;

//! Sizes of each dimension, outermost first ({} is a 0-dim, scalar, tensor); also used for strides.
class STREAMRT_API Shape {
 public:
  using value_type = std::int64_t;
  using size_type = std::size_t;
  using difference_type = std::ptrdiff_t;
  using reference = std::int64_t&;
  using const_reference = const std::int64_t&;
  using pointer = std::int64_t*;
  using const_pointer = const std::int64_t*;
  using iterator = std::int64_t*;
  using const_iterator = const std::int64_t*;
  using reverse_iterator = std::reverse_iterator<iterator>;
  using const_reverse_iterator = std::reverse_iterator<const_iterator>;

  //! An empty shape (0 dimensions). Never blocks.
  Shape() noexcept = default;
  //! The sizes given, in order. Never blocks.
  Shape(std::initializer_list<std::int64_t> sizes) { assign(sizes.begin(), sizes.end()); }
  //! `n` entries equal to `value`. Never blocks.
  explicit Shape(size_type n, std::int64_t value = 0) { resize(n, value); }
  //! The entries of [first, last). Never blocks.
  template <std::input_iterator It>
  Shape(It first, It last) {
    for (; first != last; ++first) push_back(static_cast<std::int64_t>(*first));
  }
  //! The entries of `v` (implicit, as shapes were vectors). Never blocks.
  Shape(const std::vector<std::int64_t>& v) { assign(v.data(), v.data() + v.size()); }  // NOLINT
  //! Copies and moves keep the entries (inline ones are copied, spilled ones moved). Never block.
  Shape(const Shape& other) { copy_from(other); }
  Shape(Shape&& other) noexcept { take(other); }
  Shape& operator=(const Shape& other) {
    if (this != &other) copy_from(other);
    return *this;
  }
  Shape& operator=(Shape&& other) noexcept {
    if (this != &other) take(other);
    return *this;
  }
  Shape& operator=(std::initializer_list<std::int64_t> sizes) {
    assign(sizes.begin(), sizes.end());
    return *this;
  }
  ~Shape() = default;

  //! The entries as a std::vector. Never blocks.
  operator std::vector<std::int64_t>() const { return {begin(), end()}; }  // NOLINT: implicit

  //! std::vector's accessors; `data()` points into the object while size() <= kMaxDims. Never
  //! block.
  size_type size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  std::int64_t* data() noexcept { return heap_ ? heap_.get() : inline_; }
  const std::int64_t* data() const noexcept { return heap_ ? heap_.get() : inline_; }
  iterator begin() noexcept { return data(); }
  iterator end() noexcept { return data() + size_; }
  const_iterator begin() const noexcept { return data(); }
  const_iterator end() const noexcept { return data() + size_; }
  const_iterator cbegin() const noexcept { return begin(); }
  const_iterator cend() const noexcept { return end(); }
  reverse_iterator rbegin() noexcept { return reverse_iterator(end()); }
  reverse_iterator rend() noexcept { return reverse_iterator(begin()); }
  const_reverse_iterator rbegin() const noexcept { return const_reverse_iterator(end()); }
  const_reverse_iterator rend() const noexcept { return const_reverse_iterator(begin()); }
  std::int64_t& operator[](size_type i) noexcept { return data()[i]; }
  const std::int64_t& operator[](size_type i) const noexcept { return data()[i]; }
  std::int64_t& front() noexcept { return data()[0]; }
  const std::int64_t& front() const noexcept { return data()[0]; }
  std::int64_t& back() noexcept { return data()[size_ - 1]; }
  const std::int64_t& back() const noexcept { return data()[size_ - 1]; }

  //! std::vector's edits (iterators and references are invalidated as by std::vector's). Never
  //! block.
  void clear() noexcept { size_ = 0; }
  void reserve(size_type n) { grow_to(n); }
  void push_back(std::int64_t v) {
    grow_to(size_ + 1);
    data()[size_++] = v;
  }
  std::int64_t& emplace_back(std::int64_t v) {
    push_back(v);
    return back();
  }
  void pop_back() noexcept { --size_; }
  void resize(size_type n, std::int64_t value = 0) {
    grow_to(n);
    if (n > size_) std::fill(data() + size_, data() + n, value);
    size_ = static_cast<std::uint32_t>(n);
  }
  //! Inserts `v` before `pos`; returns an iterator to it.
  iterator insert(const_iterator pos, std::int64_t v) {
    const auto at = static_cast<size_type>(pos - begin());
    grow_to(size_ + 1);
    std::int64_t* d = data();
    std::copy_backward(d + at, d + size_, d + size_ + 1);
    d[at] = v;
    ++size_;
    return d + at;
  }
  //! Inserts the entries of [first, last) (not from this shape) before `pos`.
  template <std::input_iterator It>
  iterator insert(const_iterator pos, It first, It last) {
    auto at = static_cast<size_type>(pos - begin());
    const size_type start = at;
    for (; first != last; ++first) insert(begin() + at++, static_cast<std::int64_t>(*first));
    return begin() + start;
  }
  //! Removes the entry at `pos`; returns an iterator to the one after it.
  iterator erase(const_iterator pos) noexcept {
    const auto at = static_cast<size_type>(pos - begin());
    std::int64_t* d = data();
    std::copy(d + at + 1, d + size_, d + at);
    --size_;
    return d + at;
  }
  template <std::input_iterator It>
  void assign(It first, It last) {
    clear();
    for (; first != last; ++first) push_back(static_cast<std::int64_t>(*first));
  }
  void assign(const std::int64_t* first, const std::int64_t* last) {
    const auto n = static_cast<size_type>(last - first);
    grow_to(n);
    std::copy(first, last, data());
    size_ = static_cast<std::uint32_t>(n);
  }

  //! Same entries in the same order. Never blocks. (A plain loop: std::equal calls memcmp, which
  //! costs more than these few entries.)
  friend bool operator==(const Shape& a, const Shape& b) noexcept {
    return a.size_ == b.size_ && same_entries(a.data(), b.data(), a.size_);
  }
  friend bool operator==(const Shape& a, const std::vector<std::int64_t>& b) noexcept {
    return a.size_ == b.size() && same_entries(a.data(), b.data(), a.size_);
  }

 private:
  // Room for `n` entries, keeping the current ones. Past kMaxDims the entries move to the heap.
  void grow_to(size_type n) {
    if (n <= capacity()) return;
    const size_type cap = std::max<size_type>(n, 2 * capacity());
    auto bigger = std::make_unique<std::int64_t[]>(cap);
    std::copy(begin(), end(), bigger.get());
    heap_ = std::move(bigger);
    heap_cap_ = static_cast<std::uint32_t>(cap);
  }
  size_type capacity() const noexcept { return heap_ ? heap_cap_ : kMaxDims; }
  static bool same_entries(const std::int64_t* a, const std::int64_t* b, size_type n) noexcept {
    for (size_type i = 0; i < n; ++i) {
      if (a[i] != b[i]) return false;
    }
    return true;
  }
  // Inline entries are copied as the whole fixed array: a few vector moves, where copying only
  // size() entries is a call to memmove. As bytes (memcpy), since entries past size() are
  // indeterminate: the array is not zero-filled, because a new tensor holds two shapes and
  // zero-filling them (a rep stos) was a visible part of a small op's host time.
  void copy_from(const Shape& other) {
    if (other.heap_) {
      assign(other.begin(), other.end());
      return;
    }
    heap_.reset();
    std::memcpy(inline_, other.inline_, sizeof inline_);
    size_ = other.size_;
  }
  void take(Shape& other) noexcept {
    if (other.heap_) {
      heap_ = std::move(other.heap_);
      heap_cap_ = other.heap_cap_;
    } else {
      heap_.reset();
      std::memcpy(inline_, other.inline_, sizeof inline_);
    }
    size_ = other.size_;
    other.size_ = 0;
  }

  std::uint32_t size_ = 0;
  std::uint32_t heap_cap_ = 0;            // entries heap_ holds room for
  std::unique_ptr<std::int64_t[]> heap_;  // null while the entries fit inline
  std::int64_t inline_[kMaxDims];  // NOLINT: entries past size_ are indeterminate (never read)
};

// ---- Shape arithmetic: element counts, strides, broadcasting ---------------------------------

//! "[2, 3]" style text of a shape, for messages. Never blocks.
STREAMRT_API std::string to_string(const Shape& shape);

//! The shape of broadcasting `a` with `b` (numpy rules: sizes aligned from the right, equal or 1).
//! Throws Error naming both shapes when they cannot be broadcast. Never blocks.
STREAMRT_API Shape broadcast_shapes(const Shape& a, const Shape& b);

//! Element strides of a compact row-major tensor of `shape` (what new tensors have; a size of 0
//! counts as 1). Never blocks.
STREAMRT_API Shape contiguous_strides(const Shape& shape);

//! Product of the sizes (1 for {}). Throws Error for negative sizes, more than kMaxDims
//! dimensions or an element count that overflows. Never blocks.
STREAMRT_API std::int64_t shape_numel(const Shape& shape);

}  // namespace streamrt
