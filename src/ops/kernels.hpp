#pragma once
// Kernel helpers shared by the op files: dtype dispatch and the parallel element loop.
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

#include "core/intra_op.hpp"
#include "streamrt/error.hpp"
#include "streamrt/tensor.hpp"

namespace streamrt::ops {

// Elements per chunk of element-wise loops: big enough that a chunk takes far longer than handing
// it to another worker (figures: docs/performance.md, "Figures behind constants").
inline constexpr std::int64_t kElementGrain = std::int64_t{1} << 15;

// Calls f(T{}) with T the C++ type of `dtype`, for the numeric dtypes. Ops reject Bool before
// they get here (arithmetic on bool is not defined); reaching it is a bug, reported as Error.
template <class F>
decltype(auto) dispatch(DType dtype, F&& f) {
  switch (dtype) {
    case DType::Float32:
      return f(float{});
    case DType::Float64:
      return f(double{});
    case DType::Int32:
      return f(std::int32_t{});
    case DType::Int64:
      break;
    case DType::Bool:
      throw Error("internal error: a bool tensor reached a numeric kernel");
  }
  return f(std::int64_t{});
}

// As dispatch, with bool for DType::Bool (copies, fills, comparisons, where).
template <class F>
decltype(auto) dispatch_all(DType dtype, F&& f) {
  if (dtype == DType::Bool) return f(bool{});
  return dispatch(dtype, std::forward<F>(f));
}

// Calls f(T{}) for the floating dtypes (the caller has checked that `dtype` is one).
template <class F>
decltype(auto) dispatch_floating(DType dtype, F&& f) {
  if (dtype == DType::Float32) return f(float{});
  return f(double{});
}

// fn(begin, end) over sub-ranges of [0, n), split across the pool when n is large.
template <class Fn>
void parallel_ranges(std::int64_t n, Fn&& fn) {
  if (n <= kElementGrain) {
    if (n > 0) fn(std::int64_t{0}, n);
    return;
  }
  runtime::parallel_for(0, n, kElementGrain, fn);
}

// for i in [0, n): body(i), split across the pool when n is large.
template <class Body>
void parallel_elements(std::int64_t n, Body&& body) {
  if (n <= kElementGrain) {
    for (std::int64_t i = 0; i < n; ++i) body(i);
    return;
  }
  runtime::parallel_for(0, n, kElementGrain, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) body(i);
  });
}

// Converts a double to T: plain conversion for floats; for integers, truncation toward zero with
// out-of-range values saturated (a bare cast would be undefined behaviour).
template <class T>
T from_double(double v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v != 0;  // NaN is true, as in C++ and numpy
  } else if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(v);
  } else {
    if (v != v) return 0;
    constexpr double kLo = static_cast<double>(std::numeric_limits<T>::min());
    constexpr double kHi = static_cast<double>(std::numeric_limits<T>::max());
    if (v <= kLo) return std::numeric_limits<T>::min();
    if (v >= kHi) return std::numeric_limits<T>::max();
    return static_cast<T>(v);
  }
}

}  // namespace streamrt::ops
