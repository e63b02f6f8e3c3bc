// Whole-tensor comparisons, allclose and equal: each checks its arguments at the call, then runs
// one predicate over every pair of elements on the current stream through the tracker
// (tracking.cpp) and waits for the answer.
#include <atomic>
#include <cmath>
#include <memory>
#include <string>
#include <type_traits>

#include "checks.hpp"
#include "kernels.hpp"
#include "layout.hpp"
#include "storage.hpp"
#include "streamrt/error.hpp"
#include "streamrt/event.hpp"
#include "streamrt/ops.hpp"
#include "tensor_access.hpp"
#include "tracking.hpp"

namespace streamrt {
namespace ops {
namespace {

using detail::TensorAccess;

// The shape both operands of a whole-tensor comparison broadcast to (numpy rules), with the op's
// name in the error.
Shape broadcast_pair(const char* op, const Tensor& a, const Tensor& b) {
  check_defined(a, op);
  check_defined(b, op);
  check_same_device(op, a, b);
  try {
    return broadcast_shapes(a.shape(), b.shape());
  } catch (const Error& e) {
    throw Error(std::string(op) + ": " + e.what());
  }
}

// Runs `pred(x, y)` on every pair of elements of a and b broadcast to `shape` (each read as its
// own dtype, converted to double by the predicate's caller), on the current stream, and returns
// whether it held everywhere; waits for the answer. Views are walked with their strides, so
// nothing is copied, also for broadcast operands.
template <class Pred>
bool all_of_on_stream(const char* name, const Tensor& a, const Tensor& b, const Shape& shape,
                      Pred pred) {
  auto result = std::make_shared<bool>(false);
  const void* da = TensorAccess::storage(a)->data();
  const void* db = TensorAccess::storage(b)->data();
  const Shape a_strides = broadcast_strides(a.shape(), a.strides(), shape);
  const Shape b_strides = broadcast_strides(b.shape(), b.strides(), shape);
  const std::int64_t a_off = a.storage_offset(), b_off = b.storage_offset();
  const DType a_type = a.dtype(), b_type = b.dtype();
  Stream s =
      submit(name, a.device(), {&a, &b}, {},
             [da, db, shape, a_strides, b_strides, a_off, b_off, a_type, b_type, result, pred] {
               dispatch_all(a_type, [&](auto a_tag) {
                 using A = decltype(a_tag);
                 dispatch_all(b_type, [&](auto b_tag) {
                   using B = decltype(b_tag);
                   const A* pa = static_cast<const A*>(da) + a_off;
                   const B* pb = static_cast<const B*>(db) + b_off;
                   std::atomic<bool> ok{true};
                   const auto loop = make_loop<2>(shape, {&a_strides, &b_strides});
                   parallel_runs(loop, [&](const auto& off, std::int64_t count, const auto& inc) {
                     // Another chunk already found a pair: nothing left to learn.
                     if (!ok.load(std::memory_order_relaxed)) return;
                     const A* x = pa + off[0];
                     const B* y = pb + off[1];
                     for (std::int64_t i = 0; i < count; ++i) {
                       if (!pred(x[i * inc[0]], y[i * inc[1]])) {
                         // Read after the join, which orders it.
                         ok.store(false, std::memory_order_relaxed);
                         return;
                       }
                     }
                   });
                   *result = ok.load(std::memory_order_relaxed);
                 });
               });
             });
  // The answer is ready when the stream reaches this point; the event's completion publishes it.
  Event done;
  done.record(s);
  done.synchronize();
  return *result;
}
}  // namespace
}  // namespace ops

bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol) {
  const Shape shape = ops::broadcast_pair("allclose", a, b);
  if (!(rtol >= 0) || !(atol >= 0)) {
    throw Error("allclose: rtol and atol must be >= 0 (got rtol=" + std::to_string(rtol) +
                ", atol=" + std::to_string(atol) + ")");
  }
  // numpy's isclose (equal_nan=False): |a - b| <= atol + rtol * |b|, asymmetric in b; infinities
  // are close only to themselves (the x == y test), NaN to nothing.
  return ops::all_of_on_stream("allclose", a, b, shape, [rtol, atol](auto u, auto v) {
    const auto x = static_cast<double>(u), y = static_cast<double>(v);
    return x == y || std::fabs(x - y) <= atol + rtol * std::fabs(y);
  });
}

bool equal(const Tensor& a, const Tensor& b) {
  ops::check_defined(a, "equal");
  ops::check_defined(b, "equal");
  ops::check_same_device("equal", a, b);
  if (a.dtype() != b.dtype()) {
    throw Error("equal: dtypes differ: " + ops::describe(a) + " and " + ops::describe(b) +
                " (convert one with to())");
  }
  // numpy's array_equal and torch.equal: different shapes are simply not equal (no broadcasting).
  if (a.shape() != b.shape()) return false;
  return ops::all_of_on_stream("equal", a, b, a.shape(), [](auto u, auto v) {
    // Only equal dtypes reach the kernel (checked above).
    if constexpr (std::is_same_v<decltype(u), decltype(v)>) {
      return u == v;
    } else {
      return false;
    }
  });
}

}  // namespace streamrt
