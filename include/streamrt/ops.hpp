#pragma once
//! \file ops.hpp
//! Operations on tensors. Every op is enqueued on the current stream of the tensors' device and
//! returns at once (allclose and equal wait for their answer). Argument errors (shapes that do
//! not broadcast, bad dims) throw Error at the call, naming both shapes; errors found while
//! running (integer division by zero) fail the stream like any throwing work. Inputs may be any
//! strided views; results are new tensors, contiguous except that an element-wise op whose
//! operands share one dense permuted layout (x.T() + y.T()) keeps that layout, as torch.
//! docs/ops.md lists the ops with their numpy and torch equivalents.
//!
//! Binary element-wise ops broadcast (numpy rules) and promote dtypes as torch does: bool <
//! integers < floating kinds, the wider type within a kind, so int32 + float32 is float32 and
//! int64 + float32 is float32 (numpy would give float64). See promote_types().
//!
//! Automatic dependency tracking (on by default): each storage remembers its last write and the
//! reads since. An op on stream S that reads a tensor last written on another stream makes S wait
//! for that write (a stream wait: the host is not blocked); an op that writes also waits for the
//! earlier readers. Work on one stream needs no wait; independent tensors never wait on each other.

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "streamrt/export.hpp"
#include "streamrt/stream.hpp"
#include "streamrt/tensor.hpp"

namespace streamrt {

//! Matrix product through OpenBLAS: [m,k]x[k,n] -> [m,n], or batched [b,m,k]x[b,k,n] -> [b,m,n]
//! ([b,m,k]x[k,n] broadcasts the right operand). Float32 and Float64. Transposed views (x.T(),
//! transpose) are passed with BLAS's transpose flags, without a copy; other non-contiguous
//! layouts are copied first. Large products are split into row blocks across the worker pool.
//! Returns at once.
STREAMRT_API Tensor matmul(const Tensor& a, const Tensor& b);

//! Element-wise a + b (broadcast, promoted dtype). Returns at once.
STREAMRT_API Tensor add(const Tensor& a, const Tensor& b);
//! Element-wise a + s, in a's dtype (for an integer tensor, s must be an integer: Error otherwise;
//! convert the tensor first). The same holds for the other tensor-scalar ops. Returns at once.
STREAMRT_API Tensor add(const Tensor& a, double s);
//! Element-wise a - b (broadcast, promoted dtype). Returns at once.
STREAMRT_API Tensor sub(const Tensor& a, const Tensor& b);
//! Element-wise a - s. Returns at once.
STREAMRT_API Tensor sub(const Tensor& a, double s);
//! Element-wise a * b (broadcast, promoted dtype). Returns at once.
STREAMRT_API Tensor mul(const Tensor& a, const Tensor& b);
//! Element-wise a * s. Returns at once.
STREAMRT_API Tensor mul(const Tensor& a, double s);
//! Element-wise a / b (broadcast, promoted dtype); integer division truncates (unlike torch's
//! true division), and an integer division by zero fails the stream with Error. Returns at once.
STREAMRT_API Tensor div(const Tensor& a, const Tensor& b);
//! Element-wise a / s; throws Error at the call for an integer tensor and s == 0. Returns at once.
STREAMRT_API Tensor div(const Tensor& a, double s);
//! Element-wise larger of a and b (broadcast, promoted); NaN if either is NaN. Returns at once.
STREAMRT_API Tensor maximum(const Tensor& a, const Tensor& b);
//! Element-wise smaller of a and b (broadcast, promoted); NaN if either is NaN. Returns at once.
STREAMRT_API Tensor minimum(const Tensor& a, const Tensor& b);

//! Element-wise max(a, 0), NaN kept. Returns at once.
STREAMRT_API Tensor relu(const Tensor& a);
//! Element-wise -a (integers wrap). Returns at once.
STREAMRT_API Tensor neg(const Tensor& a);
//! Element-wise |a| (integers wrap for the minimum). Returns at once.
STREAMRT_API Tensor abs(const Tensor& a);
//! Element-wise e^a; integer tensors give float32 (as torch). Returns at once.
STREAMRT_API Tensor exp(const Tensor& a);
//! Element-wise natural log; integer tensors give float32. Returns at once.
STREAMRT_API Tensor log(const Tensor& a);
//! Element-wise tanh; integer tensors give float32. Returns at once.
STREAMRT_API Tensor tanh(const Tensor& a);
//! Element-wise 1 / (1 + e^-a), without overflow; integer tensors give float32. Returns at once.
STREAMRT_API Tensor sigmoid(const Tensor& a);
//! Element-wise square root; integer tensors give float32. Returns at once.
STREAMRT_API Tensor sqrt(const Tensor& a);
//! Element-wise a^exponent in a's dtype; an integer tensor needs an integral exponent >= 0
//! (Error otherwise; convert first). Returns at once.
STREAMRT_API Tensor pow(const Tensor& a, double exponent);
//! Element-wise min(max(a, lo), hi) with either bound optional; NaN kept; lo > hi gives hi (as
//! torch). Integer tensors need integral bounds. Returns at once.
STREAMRT_API Tensor clamp(const Tensor& a, std::optional<double> lo, std::optional<double> hi);

//! Element-wise a == b (broadcast; compared in the promoted dtype) as a bool tensor. Returns at
//! once. ne, lt, le, gt, ge likewise.
STREAMRT_API Tensor eq(const Tensor& a, const Tensor& b);
//! Element-wise a != b, bool. Returns at once.
STREAMRT_API Tensor ne(const Tensor& a, const Tensor& b);
//! Element-wise a < b, bool. Returns at once.
STREAMRT_API Tensor lt(const Tensor& a, const Tensor& b);
//! Element-wise a <= b, bool. Returns at once.
STREAMRT_API Tensor le(const Tensor& a, const Tensor& b);
//! Element-wise a > b, bool. Returns at once.
STREAMRT_API Tensor gt(const Tensor& a, const Tensor& b);
//! Element-wise a >= b, bool. Returns at once.
STREAMRT_API Tensor ge(const Tensor& a, const Tensor& b);
//! Element-wise a == s, bool (compared exactly, in double or int64). Returns at once.
STREAMRT_API Tensor eq(const Tensor& a, double s);
//! Element-wise a != s, bool. Returns at once.
STREAMRT_API Tensor ne(const Tensor& a, double s);
//! Element-wise a < s, bool. Returns at once.
STREAMRT_API Tensor lt(const Tensor& a, double s);
//! Element-wise a <= s, bool. Returns at once.
STREAMRT_API Tensor le(const Tensor& a, double s);
//! Element-wise a > s, bool. Returns at once.
STREAMRT_API Tensor gt(const Tensor& a, double s);
//! Element-wise a >= s, bool. Returns at once.
STREAMRT_API Tensor ge(const Tensor& a, double s);
//! Element-wise cond ? a : b; `cond` must be bool; all three broadcast; a and b promote.
//! Returns at once.
STREAMRT_API Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
//! Sum of all elements as a 0-dim tensor: float64 accumulation for floating dtypes (result in the
//! input dtype), int64 for integer dtypes. Deterministic: the same whatever the worker count.
//! Returns at once.
STREAMRT_API Tensor sum(const Tensor& a);
//! Mean of all elements as a 0-dim tensor of the input dtype; floating dtypes only (Error
//! otherwise; convert with to()). NaN for an empty tensor, as torch. Returns at once.
STREAMRT_API Tensor mean(const Tensor& a);
//! Sum over dimension `dim` (negative counts from the end), removed from the shape or kept with
//! size 1 when `keepdim`. Accumulates in double (floats, result in the input dtype) or int64
//! (integers and bool), in index order: deterministic. Returns at once.
STREAMRT_API Tensor sum(const Tensor& a, int dim, bool keepdim = false);
//! Mean over `dim` (floating dtypes; NaN over an empty dimension). Returns at once.
STREAMRT_API Tensor mean(const Tensor& a, int dim, bool keepdim = false);
//! Largest element as a 0-dim tensor (NaN if any is NaN); Error for an empty tensor.
STREAMRT_API Tensor max(const Tensor& a);
//! Largest element over `dim` (values only; argmax gives the indices). Returns at once.
STREAMRT_API Tensor max(const Tensor& a, int dim, bool keepdim = false);
//! Smallest element as a 0-dim tensor (NaN if any is NaN); Error for an empty tensor.
STREAMRT_API Tensor min(const Tensor& a);
//! Smallest element over `dim`. Returns at once.
STREAMRT_API Tensor min(const Tensor& a, int dim, bool keepdim = false);
//! Flat (row-major) index of the largest element, int64 0-dim; the first one on ties, the first
//! NaN if any (as numpy). Returns at once.
STREAMRT_API Tensor argmax(const Tensor& a);
//! Index of the largest element along `dim`, int64. Returns at once.
STREAMRT_API Tensor argmax(const Tensor& a, int dim, bool keepdim = false);
//! Flat index of the smallest element, int64 0-dim. Returns at once.
STREAMRT_API Tensor argmin(const Tensor& a);
//! Index of the smallest element along `dim`, int64. Returns at once.
STREAMRT_API Tensor argmin(const Tensor& a, int dim, bool keepdim = false);
//! exp(a) / sum(exp(a)) along `dim` (shifted by the maximum, summed in double); floating dtypes.
//! Returns at once.
STREAMRT_API Tensor softmax(const Tensor& a, int dim);
//! log(softmax(a, dim)), computed as a - max - log(sum(exp(a - max))). Returns at once.
STREAMRT_API Tensor log_softmax(const Tensor& a, int dim);

//! The tensors joined along `dim` (equal shapes elsewhere; dtypes promote). One tracked copy per
//! input on the current stream. Returns at once.
STREAMRT_API Tensor cat(const std::vector<Tensor>& tensors, int dim = 0);
//! The tensors (equal shapes) stacked along a new dimension `dim`. Returns at once.
STREAMRT_API Tensor stack(const std::vector<Tensor>& tensors, int dim = 0);

//! The slices of `a` at the positions `index` along `dim` (numpy's a.take(index, axis=dim),
//! torch.index_select; Python's t[index_tensor]): a new contiguous tensor whose dimension `dim`
//! has index.numel() entries, gathered on the current stream. `index` is a 1-D (or 0-d) int32 or
//! int64 tensor; negative entries count from the end. Throws Error for a bad dim or an index that
//! is not an integer tensor of at most one dimension; an entry out of range fails the stream with
//! an Error naming the entry, its position and the size (the entries are only known when the
//! gather runs). Returns at once; thread-safe.
STREAMRT_API Tensor index_select(const Tensor& a, int dim, const Tensor& index);

//! True when |a - b| <= atol + rtol * |b| everywhere (numpy's allclose: NaN never close,
//! infinities close only to themselves). a and b broadcast (numpy rules) and may have different
//! dtypes (compared as double); views are read in place, never copied. Throws Error naming both
//! shapes when they do not broadcast, and for negative rtol or atol. Runs on the current stream,
//! then blocks until the answer is known; rethrows a failure of the work that produced a or b.
//! Thread-safe.
STREAMRT_API bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5,
                           double atol = 1e-8);
//! True when the shapes match and every element is equal (numpy's array_equal, torch.equal: no
//! broadcasting, so different shapes give false); Error for different dtypes. Blocks like
//! allclose; thread-safe.
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
//! lt(a, b).
STREAMRT_API Tensor operator<(const Tensor& a, const Tensor& b);
//! le(a, b).
STREAMRT_API Tensor operator<=(const Tensor& a, const Tensor& b);
//! gt(a, b).
STREAMRT_API Tensor operator>(const Tensor& a, const Tensor& b);
//! ge(a, b).
STREAMRT_API Tensor operator>=(const Tensor& a, const Tensor& b);
//! lt(a, s).
STREAMRT_API Tensor operator<(const Tensor& a, double s);
//! le(a, s).
STREAMRT_API Tensor operator<=(const Tensor& a, double s);
//! gt(a, s).
STREAMRT_API Tensor operator>(const Tensor& a, double s);
//! ge(a, s).
STREAMRT_API Tensor operator>=(const Tensor& a, double s);

//! Sets the process-wide default of automatic dependency tracking (on at start). Off gives
//! CUDA-style manual ordering: ops then neither wait for other streams nor record their accesses,
//! so data<T>() does not wait for them either: order with events and synchronize yourself. Work
//! queued while tracking was off is never tracked later. Thread-safe; never blocks.
STREAMRT_API void set_dependency_tracking(bool on) noexcept;

//! Whether ops issued by this thread now are tracked (this thread's guard, else the process-wide
//! default). Never blocks.
STREAMRT_API bool dependency_tracking() noexcept;

//! For authors of ops outside the library (streamrt::mpi): makes `stream` wait for the tracked
//! writers of `reads`, and the tracked writers and readers of `writes`, on other streams; calls
//! `enqueue(stream)`, which must only enqueue (launch, wait_event, record; never wait: the tensors'
//! tracking locks are held); then records the accesses at the new end of `stream`, so later ops
//! and host reads wait for everything `enqueue` added. With tracking off it only calls `enqueue`.
//! Throws Error for an undefined tensor or more than 8 distinct storages (`label` names the op;
//! 8 always fit, each wrapped over at most 4 buffers tracked apart: see from_blob).
//! Returns at once; thread-safe.
STREAMRT_API void enqueue_tracked(const Stream& stream, const char* label,
                                  std::span<const Tensor* const> reads,
                                  std::span<const Tensor* const> writes,
                                  const std::function<void(Stream&)>& enqueue);

//! For bindings that import memory another framework also tracks (the same buffer reached through
//! two imports, e.g. a torch tensor shared through DLPack): from now on `t`'s storage uses the
//! dependency tracking of `with`'s storage, so accesses through either are ordered as accesses to
//! one storage (read-after-write, write-after-read, write-after-write, and host waits). `t` must
//! wrap external memory (from_blob) that no op has used yet; `with` may be any tensor (sharing is
//! transitive: `t` joins the storage `with` shares with) and is kept alive by `t`'s storage. Throws
//! Error for an undefined tensor, a `t` from the caching allocator, a `t` already used or already
//! sharing with another storage, or tensors on different devices. Call it before `t` is visible
//! to other threads (not thread-safe with ops on `t`). Never blocks.
STREAMRT_API void share_tracking(const Tensor& t, const Tensor& with);

//! For bindings that hand a tensor's memory to other code (numpy, DLPack, the buffer protocol):
//! tensors wrapped later over any part of that memory (from_blob) join its dependency tracking, so
//! accesses through either are ordered. from_blob does the same for the memory it wraps; this is
//! for the allocator's memory. Idempotent. Thread-safe; never blocks; throws Error for an
//! undefined tensor.
STREAMRT_API void expose_memory(const Tensor& t);

//! For bindings about to wrap memory its owner has just allocated (a new torch tensor): tensors
//! still registered over any part of the `nbytes` bytes at `data` stand for memory freed since, so
//! wraps made from now on do not join their tracking (they keep their own). Call it before
//! from_blob. Thread-safe; never blocks; never throws.
STREAMRT_API void claim_memory(const void* data, std::size_t nbytes) noexcept;

//! For bindings whose wrapped memory was freed by its owner while `t` lives on: later wraps over
//! that memory no longer join `t`'s tracking. Thread-safe; never blocks; never throws.
STREAMRT_API void release_memory(const Tensor& t) noexcept;

//! Whether memory wrapped (from_blob) or exposed, and not released, overlaps the `nbytes` bytes
//! at `data`: a tensor wrapped there would join their tracking. Thread-safe; never blocks.
STREAMRT_API bool memory_tracked(const void* data, std::size_t nbytes);

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
