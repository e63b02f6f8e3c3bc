#pragma once
// Element-wise math: the per-element functions of each op, and the contiguous kernels (all
// operands dense and of the output's shape) that the ops call on their fast path. The strided and
// broadcasting paths (elementwise.cpp) use the same per-element functions; the contiguous kernels
// below use the SIMD kernels (simd_kernels.hpp) where there is one.
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

#include "kernels.hpp"
#include "op_list.hpp"
#include "simd_kernels.hpp"
#include "streamrt/error.hpp"
#include "streamrt/tensor.hpp"

namespace streamrt::ops {

#define STREAMRT_ENUMERATOR(Name, ...) k##Name,
// The arithmetic ops come first, in simd::Binary's order (a cast converts one to the other).
enum class BinaryOp {
  STREAMRT_ARITHMETIC_OPS(STREAMRT_ENUMERATOR) STREAMRT_OTHER_BINARY_OPS(STREAMRT_ENUMERATOR)
};
enum class UnaryOp { STREAMRT_UNARY_OPS(STREAMRT_ENUMERATOR) };
enum class CompareOp { STREAMRT_COMPARE_OPS(STREAMRT_ENUMERATOR) };
#undef STREAMRT_ENUMERATOR

// The ops (elementwise.cpp): argument checks at the call, then one queued kernel.
Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b);
// a (op) s, or s (op) a when `reversed`.
Tensor binary_scalar(BinaryOp op, const Tensor& a, double s, bool reversed);
Tensor unary(UnaryOp op, const Tensor& a);
Tensor compare(CompareOp op, const Tensor& a, const Tensor& b);
Tensor compare_scalar(CompareOp op, const Tensor& a, double s);

const char* op_name(BinaryOp op) noexcept;
const char* op_name(UnaryOp op) noexcept;
const char* op_name(CompareOp op) noexcept;

template <BinaryOp Op>
struct Binary {
  template <class T>
  T operator()(T x, T y) const {
    if constexpr (Op == BinaryOp::kMaximum || Op == BinaryOp::kMinimum) {
      if constexpr (std::is_floating_point_v<T>) {
        if (x != x) return x;  // NaN propagates, as numpy and torch
        if (y != y) return y;
      }
      if constexpr (Op == BinaryOp::kMaximum) {
        return x < y ? y : x;
      } else {
        return y < x ? y : x;
      }
    } else if constexpr (std::is_floating_point_v<T>) {
      if constexpr (Op == BinaryOp::kAdd) {
        return x + y;
      } else if constexpr (Op == BinaryOp::kSub) {
        return x - y;
      } else if constexpr (Op == BinaryOp::kMul) {
        return x * y;
      } else {
        return x / y;
      }
    } else {
      // Integers wrap on overflow (two's complement), as torch does; done in unsigned arithmetic
      // because signed overflow is undefined behaviour.
      using U = std::make_unsigned_t<T>;
      const U ux = static_cast<U>(x), uy = static_cast<U>(y);
      if constexpr (Op == BinaryOp::kAdd) {
        return static_cast<T>(static_cast<U>(ux + uy));
      } else if constexpr (Op == BinaryOp::kSub) {
        return static_cast<T>(static_cast<U>(ux - uy));
      } else if constexpr (Op == BinaryOp::kMul) {
        return static_cast<T>(static_cast<U>(ux * uy));
      } else {
        if (y == 0) {
          throw Error(
              "integer division by zero in div (the divisor tensor has a zero; use a floating "
              "dtype for inf/nan results)");
        }
        if (y == -1) return static_cast<T>(static_cast<U>(U{0} - ux));  // MIN / -1 wraps
        return static_cast<T>(x / y);
      }
    }
  }
};

// Calls f(Binary<op>{}).
template <class F>
decltype(auto) with_binary(BinaryOp op, F&& f) {
#define STREAMRT_CASE(Name, ...) \
  case BinaryOp::k##Name:        \
    return f(Binary<BinaryOp::k##Name>{});
  switch (op) {
    STREAMRT_ARITHMETIC_OPS(STREAMRT_CASE)
    STREAMRT_OTHER_BINARY_OPS(STREAMRT_CASE)
  }
#undef STREAMRT_CASE
  throw Error("internal error: an unknown binary op");
}

template <UnaryOp Op>
struct Unary {
  template <class T>
  T operator()(T x) const {
    if constexpr (Op == UnaryOp::kNeg || Op == UnaryOp::kAbs) {
      if constexpr (std::is_floating_point_v<T>) {
        return Op == UnaryOp::kNeg ? -x : std::fabs(x);
      } else {
        // -MIN wraps to MIN, as torch (unsigned arithmetic: no undefined behaviour).
        using U = std::make_unsigned_t<T>;
        const T neg = static_cast<T>(static_cast<U>(U{0} - static_cast<U>(x)));
        if constexpr (Op == UnaryOp::kNeg) {
          return neg;
        } else {
          return x < 0 ? neg : x;
        }
      }
    } else if constexpr (Op == UnaryOp::kRelu) {
      return x < T{0} ? T{0} : x;  // keeps NaN as NaN, like torch
    } else {
      static_assert(std::is_floating_point_v<T>, "floating ops take floating dtypes");
      if constexpr (Op == UnaryOp::kExp) {
        return std::exp(x);
      } else if constexpr (Op == UnaryOp::kLog) {
        return std::log(x);
      } else if constexpr (Op == UnaryOp::kTanh) {
        return std::tanh(x);
      } else if constexpr (Op == UnaryOp::kSqrt) {
        return std::sqrt(x);
      } else {
        // Two forms so that exp never overflows: 1/(1+e^-x) for x >= 0, e^x/(1+e^x) below.
        if (x >= T{0}) return T{1} / (T{1} + std::exp(-x));
        const T e = std::exp(x);
        return e / (T{1} + e);
      }
    }
  }
};

// True for the ops that take and give floating dtypes only (ints are converted to float32).
constexpr bool is_floating_op(UnaryOp op) noexcept {
#define STREAMRT_CASE(Name, name, floating) \
  case UnaryOp::k##Name:                    \
    return floating;
  switch (op) { STREAMRT_UNARY_OPS(STREAMRT_CASE) }
#undef STREAMRT_CASE
  return false;
}

// Calls f(Unary<op>{}). T must be floating for the floating ops (callers convert first).
template <class T, class F>
void with_unary(UnaryOp op, F&& f) {
#define STREAMRT_CASE(Name, name, floating)                     \
  case UnaryOp::k##Name:                                        \
    if constexpr (!(floating) || std::is_floating_point_v<T>) { \
      return f(Unary<UnaryOp::k##Name>{});                      \
    }                                                           \
    break;
  switch (op) { STREAMRT_UNARY_OPS(STREAMRT_CASE) }
#undef STREAMRT_CASE
  throw Error(std::string("internal error: ") + op_name(op) + " on an integer kernel");
}

// ---- contiguous kernels (the fast path; all pointers dense, n elements) ------------------------

// The arithmetic ops on floats have SIMD kernels (simd_kernels.hpp, same order of enumerators).
constexpr bool has_simd(BinaryOp op) noexcept {
#define STREAMRT_CASE(Name, ...) \
  case BinaryOp::k##Name:        \
    return true;
  switch (op) {
    STREAMRT_ARITHMETIC_OPS(STREAMRT_CASE)
    default:
      break;
  }
#undef STREAMRT_CASE
  return false;
}
#define STREAMRT_SAME_ORDER(Name, ...) \
  static_assert(static_cast<int>(BinaryOp::k##Name) == static_cast<int>(simd::Binary::k##Name));
STREAMRT_ARITHMETIC_OPS(STREAMRT_SAME_ORDER)
#undef STREAMRT_SAME_ORDER

// Streaming stores for outputs that would not stay in the cache anyway (simd_kernels.hpp).
template <class T>
bool streams_output(std::int64_t n) noexcept {
  return n * static_cast<std::int64_t>(sizeof(T)) >= simd::kStreamBytes;
}

template <class T>
void binary_contiguous(BinaryOp op, const T* a, const T* b, T* out, std::int64_t n) {
  if constexpr (std::is_floating_point_v<T>) {
    if (has_simd(op)) {
      const bool nt = streams_output<T>(n);
      parallel_ranges(n, [&](std::int64_t i0, std::int64_t i1) {
        simd::binary(static_cast<simd::Binary>(op), a + i0, b + i0, out + i0, i1 - i0, nt);
      });
      return;
    }
  }
  with_binary(op, [&](auto f) {
    parallel_ranges(n, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t i = begin; i < end; ++i) out[i] = f(a[i], b[i]);
    });
  });
}

// out = a (op) s, or s (op) a when `reversed`.
template <class T>
void binary_scalar_contiguous(BinaryOp op, const T* a, T s, bool reversed, T* out, std::int64_t n) {
  if constexpr (std::is_floating_point_v<T>) {
    if (has_simd(op)) {
      const bool nt = streams_output<T>(n);
      parallel_ranges(n, [&](std::int64_t i0, std::int64_t i1) {
        simd::binary_scalar(static_cast<simd::Binary>(op), a + i0, s, reversed, out + i0, i1 - i0,
                            nt);
      });
      return;
    }
  }
  with_binary(op, [&](auto f) {
    parallel_ranges(n, [&](std::int64_t begin, std::int64_t end) {
      if (reversed) {
        for (std::int64_t i = begin; i < end; ++i) out[i] = f(s, a[i]);
      } else {
        for (std::int64_t i = begin; i < end; ++i) out[i] = f(a[i], s);
      }
    });
  });
}

template <class T>
void unary_contiguous(UnaryOp op, const T* a, T* out, std::int64_t n) {
  if constexpr (std::is_floating_point_v<T>) {
    if (op == UnaryOp::kRelu) {
      const bool nt = streams_output<T>(n);
      parallel_ranges(
          n, [&](std::int64_t i0, std::int64_t i1) { simd::relu(a + i0, out + i0, i1 - i0, nt); });
      return;
    }
  }
  with_unary<T>(op, [&](auto f) {
    parallel_ranges(n, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t i = begin; i < end; ++i) out[i] = f(a[i]);
    });
  });
}

}  // namespace streamrt::ops
