#pragma once
// The element-wise ops, each written once. Every list calls X once per op, in enumerator order;
// the enums, the names, the dispatch switches, the SIMD kernels' enum and the public functions
// are all generated from these lists, so an op added here is added everywhere (the compiler then
// asks for its per-element function in elementwise.hpp).

// The four arithmetic ops: X(Enumerator, name, Highway function, C++ operator). Each has a SIMD
// kernel (simd::Binary, in this order) and a tensor-scalar overload.
#define STREAMRT_ARITHMETIC_OPS(X) \
  X(Add, add, Add, +)              \
  X(Sub, sub, Sub, -)              \
  X(Mul, mul, Mul, *)              \
  X(Div, div, Div, /)

// Binary ops without a SIMD kernel or a scalar overload: X(Enumerator, name).
#define STREAMRT_OTHER_BINARY_OPS(X) \
  X(Maximum, maximum)                \
  X(Minimum, minimum)

// Unary ops: X(Enumerator, name, floating): floating ops take and give floating dtypes only
// (integer inputs are converted to float32 first).
#define STREAMRT_UNARY_OPS(X) \
  X(Neg, neg, false)          \
  X(Abs, abs, false)          \
  X(Exp, exp, true)           \
  X(Log, log, true)           \
  X(Tanh, tanh, true)         \
  X(Sigmoid, sigmoid, true)   \
  X(Sqrt, sqrt, true)         \
  X(Relu, relu, false)

// Comparisons, giving bool: X(Enumerator, name, C++ operator).
#define STREAMRT_COMPARE_OPS(X) \
  X(Eq, eq, ==)                 \
  X(Ne, ne, !=)                 \
  X(Lt, lt, <)                  \
  X(Le, le, <=)                 \
  X(Gt, gt, >)                  \
  X(Ge, ge, >=)

// Reductions: X(Enumerator, name). Sum and mean reduce everything to a double-precision total
// (reduce_all); the others select an element (reduce_flat).
#define STREAMRT_SUM_REDUCTIONS(X) \
  X(Sum, sum)                      \
  X(Mean, mean)
#define STREAMRT_SELECT_REDUCTIONS(X) \
  X(Max, max)                         \
  X(Min, min)                         \
  X(Argmax, argmax)                   \
  X(Argmin, argmin)
