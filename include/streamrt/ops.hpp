#pragma once
//! \file ops.hpp
//! Operations on tensors. Every op is enqueued on the current stream of the tensors' device and
//! returns at once (allclose and equal wait for their answer). Argument errors (shape or dtype
//! mismatch) throw Error at the call, naming both shapes; errors found while running (integer
//! division by zero) fail the stream like any throwing work.
//!
//! Automatic dependency tracking (on by default): each storage remembers its last write and the
//! reads since. An op on stream S that reads a tensor last written on another stream makes S wait
//! for that write (a stream wait: the host is not blocked); an op that writes also waits for the
//! earlier readers. Work on one stream needs no wait; independent tensors never wait on each other.

#include <cstdint>

#include "streamrt/export.hpp"
#include "streamrt/tensor.hpp"

namespace streamrt {

//! Matrix product through OpenBLAS: [m,k]x[k,n] -> [m,n], or batched [b,m,k]x[b,k,n] -> [b,m,n]
//! ([b,m,k]x[k,n] broadcasts the right operand). Float32 and Float64. Large products are split
//! into row blocks across the worker pool. Returns at once.
STREAMRT_API Tensor matmul(const Tensor& a, const Tensor& b);

//! Element-wise a + b (same shape and dtype). Returns at once.
STREAMRT_API Tensor add(const Tensor& a, const Tensor& b);
//! Element-wise a + s. Returns at once.
STREAMRT_API Tensor add(const Tensor& a, double s);
//! Element-wise a - b (same shape and dtype). Returns at once.
STREAMRT_API Tensor sub(const Tensor& a, const Tensor& b);
//! Element-wise a - s. Returns at once.
STREAMRT_API Tensor sub(const Tensor& a, double s);
//! Element-wise a * b (same shape and dtype). Returns at once.
STREAMRT_API Tensor mul(const Tensor& a, const Tensor& b);
//! Element-wise a * s. Returns at once.
STREAMRT_API Tensor mul(const Tensor& a, double s);
//! Element-wise a / b (same shape and dtype); integer division truncates, and an integer division
//! by zero fails the stream with Error. Returns at once.
STREAMRT_API Tensor div(const Tensor& a, const Tensor& b);
//! Element-wise a / s; throws Error at the call for an integer tensor and s == 0. Returns at once.
STREAMRT_API Tensor div(const Tensor& a, double s);
//! Element-wise max(a, 0). Returns at once.
STREAMRT_API Tensor relu(const Tensor& a);
//! Sum of all elements as a 0-dim tensor: float64 accumulation for floating dtypes (result in the
//! input dtype), int64 for integer dtypes. Deterministic: the same whatever the worker count.
//! Returns at once.
STREAMRT_API Tensor sum(const Tensor& a);
//! Mean of all elements as a 0-dim tensor of the input dtype; floating dtypes only (Error
//! otherwise; convert with to()). NaN for an empty tensor, as torch. Returns at once.
STREAMRT_API Tensor mean(const Tensor& a);

//! True when |a - b| <= atol + rtol * |b| everywhere (NaN never close). Same shape and dtype, else
//! Error. Runs on the current stream, then blocks until the answer is known; rethrows a failure
//! of the work that produced a or b.
STREAMRT_API bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5,
                           double atol = 1e-8);
//! True when the shapes match and every element is equal; false for different shapes; Error for
//! different dtypes. Blocks like allclose.
STREAMRT_API bool equal(const Tensor& a, const Tensor& b);

//! add(a, b).
STREAMRT_API Tensor operator+(const Tensor& a, const Tensor& b);
//! add(a, s).
STREAMRT_API Tensor operator+(const Tensor& a, double s);
//! add(a, s).
STREAMRT_API Tensor operator+(double s, const Tensor& a);
//! sub(a, b).
STREAMRT_API Tensor operator-(const Tensor& a, const Tensor& b);
//! sub(a, s).
STREAMRT_API Tensor operator-(const Tensor& a, double s);
//! s - a, element-wise.
STREAMRT_API Tensor operator-(double s, const Tensor& a);
//! -a, element-wise.
STREAMRT_API Tensor operator-(const Tensor& a);
//! mul(a, b).
STREAMRT_API Tensor operator*(const Tensor& a, const Tensor& b);
//! mul(a, s).
STREAMRT_API Tensor operator*(const Tensor& a, double s);
//! mul(a, s).
STREAMRT_API Tensor operator*(double s, const Tensor& a);
//! div(a, b).
STREAMRT_API Tensor operator/(const Tensor& a, const Tensor& b);
//! div(a, s).
STREAMRT_API Tensor operator/(const Tensor& a, double s);
//! s / a, element-wise (integer division by zero fails the stream).
STREAMRT_API Tensor operator/(double s, const Tensor& a);

//! Sets the process-wide default of automatic dependency tracking (on at start). Off gives
//! CUDA-style manual ordering: ops then neither wait for other streams nor record their accesses,
//! so data<T>() does not wait for them either: order with events and synchronize yourself. Work
//! queued while tracking was off is never tracked later. Thread-safe; never blocks.
STREAMRT_API void set_dependency_tracking(bool on) noexcept;

//! Whether ops issued by this thread now are tracked (this thread's guard, else the process-wide
//! default). Never blocks.
STREAMRT_API bool dependency_tracking() noexcept;

//! Turns tracking on or off for ops issued by this thread in its scope (nests; restores on exit,
//! also by exception). Not copyable or movable; use on one thread.
class STREAMRT_API DependencyTrackingGuard {
 public:
  //! Sets this thread's tracking to `on` for the scope.
  explicit DependencyTrackingGuard(bool on) noexcept;
  //! Restores the previous setting.
  ~DependencyTrackingGuard();
  DependencyTrackingGuard(const DependencyTrackingGuard&) = delete;
  DependencyTrackingGuard& operator=(const DependencyTrackingGuard&) = delete;
  DependencyTrackingGuard(DependencyTrackingGuard&&) = delete;
  DependencyTrackingGuard& operator=(DependencyTrackingGuard&&) = delete;

 private:
  signed char previous_;
};

}  // namespace streamrt
