#pragma once
//! \file tensor.hpp
//! Tensors: strided arrays (views share their base's storage) whose work runs on streams. Every op
//! (creation ops included) is enqueued on the current stream and returns at once; host access
//! through data<T>() / item<T>() first waits for the work that writes the tensor (and only that
//! work). Storage is reference-counted and kept alive by queued work, so dropping a tensor while a
//! stream still uses it is safe. See <streamrt/ops.hpp> for arithmetic and dependency tracking.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "streamrt/device.hpp"
#include "streamrt/export.hpp"
#include "streamrt/shape.hpp"

namespace streamrt {

//! Element types a tensor can hold.
enum class DType : std::uint8_t { Float32 = 0, Float64 = 1, Int32 = 2, Int64 = 3, Bool = 4 };

//! Lower-case name of a dtype ("float32", "float64", "int32", "int64", "bool"). Never blocks.
STREAMRT_API std::string_view to_string(DType dtype) noexcept;

//! Bytes per element of `dtype`. Never blocks.
constexpr std::size_t element_size(DType dtype) noexcept {
  switch (dtype) {
    case DType::Float32:
    case DType::Int32:
      return 4;
    case DType::Bool:
      return 1;
    case DType::Float64:
    case DType::Int64:
      break;
  }
  return 8;
}

//! True for Float32 and Float64. Never blocks.
constexpr bool is_floating(DType dtype) noexcept {
  return dtype == DType::Float32 || dtype == DType::Float64;
}

//! The dtype of `a op b` for tensors of dtypes a and b (torch's rule: bool < integers < floating
//! kinds, the wider type within a kind; see docs/ops.md). Never blocks.
STREAMRT_API DType promote_types(DType a, DType b) noexcept;

//! The DType of C++ type T (float, double, std::int32_t, std::int64_t, bool).
template <class T>
inline constexpr DType kDTypeOf = [] {
  if constexpr (std::is_same_v<T, float>) {
    return DType::Float32;
  } else if constexpr (std::is_same_v<T, double>) {
    return DType::Float64;
  } else if constexpr (std::is_same_v<T, std::int32_t>) {
    return DType::Int32;
  } else if constexpr (std::is_same_v<T, bool>) {
    return DType::Bool;
  } else {
    static_assert(std::is_same_v<T, std::int64_t>,
                  "tensor element types are float, double, std::int32_t, std::int64_t and bool");
    return DType::Int64;
  }
}();

//! The most bytes one tensor may span: byte offsets within it must fit a signed 64-bit integer.
inline constexpr std::int64_t kMaxTensorBytes = std::numeric_limits<std::int64_t>::max();

//! Bytes of a compact tensor of `shape` and `dtype` (shape_numel(shape) * element_size(dtype)).
//! Throws Error as shape_numel does, or when the bytes exceed kMaxTensorBytes, naming the shape
//! and the limit. Never blocks.
STREAMRT_API std::size_t shape_nbytes(const Shape& shape, DType dtype);

namespace detail {
class Storage;
struct TensorAccess;
}  // namespace detail

//! A random-number stream for rand/randn: a seed plus an offset into a counter-based (Philox)
//! sequence. Each call that draws from it reserves the next numel() numbers at call time, so the
//! numbers depend only on the seed and the order of calls, never on streams or worker counts.
//! A copyable handle: copies share the offset. Thread-safe.
class STREAMRT_API Generator {
 public:
  //! A generator at offset 0 of `seed`'s sequence. Never blocks.
  explicit Generator(std::uint64_t seed = 0);
  //! The seed. Never blocks.
  std::uint64_t seed() const noexcept;
  //! How many numbers have been reserved so far. Never blocks.
  std::uint64_t offset() const noexcept;
  //! Restarts the sequence of `seed` at offset 0. Never blocks.
  void manual_seed(std::uint64_t seed) noexcept;
  //! Reserves `n` numbers and returns the offset of the first (for op authors). Never blocks.
  std::uint64_t reserve(std::uint64_t n) noexcept;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

//! A strided tensor of up to kMaxDims dimensions: element (i0, i1, ...) lives at storage offset
//! storage_offset() + sum(ik * strides()[k]) (in elements). Copies and views (transpose, slice,
//! expand, ...) share storage and its dependency tracking, like torch. Methods are thread-safe in
//! the sense that calls from several threads are well-defined; whether the results make sense is
//! ordered by streams and tracking (see <streamrt/ops.hpp>). A default-constructed Tensor is
//! undefined: most calls on it throw Error.
class STREAMRT_API Tensor {
 public:
  //! An undefined tensor (no storage). Never blocks.
  Tensor() noexcept = default;

  //! True when the tensor has storage. Never blocks.
  bool defined() const noexcept { return static_cast<bool>(storage_); }
  //! Sizes of each dimension. Never blocks.
  const Shape& shape() const noexcept { return shape_; }
  //! Element type. Never blocks.
  DType dtype() const noexcept { return dtype_; }
  //! Device of the storage (CPU for undefined tensors). Never blocks.
  Device device() const noexcept;
  //! Number of elements. Never blocks.
  std::int64_t numel() const noexcept { return numel_; }
  //! Number of dimensions. Never blocks.
  int dim() const noexcept { return static_cast<int>(shape_.size()); }
  //! Size of dimension `d` (negative counts from the end). Throws Error when out of range.
  std::int64_t size(int d) const;
  //! Strides in elements (row-major for a new tensor; 0 along expanded dimensions). Never blocks.
  const Shape& strides() const noexcept { return strides_; }
  //! Offset of the first element in the storage, in elements. Never blocks.
  std::int64_t storage_offset() const noexcept { return offset_; }
  //! True when the elements are dense in row-major order (strides of size-1 dims ignored).
  //! Never blocks.
  bool is_contiguous() const noexcept;
  //! Bytes per element. Never blocks.
  std::size_t element_size() const noexcept { return streamrt::element_size(dtype_); }
  //! numel() * element_size(). Never blocks.
  std::size_t nbytes() const noexcept;

  //! Pointer to the first element (index with strides() for a non-contiguous view) for host reads
  //! and writes. Blocks until the queued work that writes this tensor, and the queued work that
  //! reads it (the host may write), has finished; rethrows that work's failure. Throws Error when T
  //! is not the dtype or the tensor is undefined, and when called from a stream's work that would
  //! wait for itself. Thread-safe.
  template <class T>
  T* data() {
    return static_cast<T*>(host_data(kDTypeOf<T>, /*for_write=*/true));
  }
  //! Pointer for host reads: blocks until the queued work that writes this tensor has finished
  //! (not the whole stream, not the readers); rethrows that work's failure. Throws as data().
  template <class T>
  const T* data() const {
    return static_cast<const T*>(host_data(kDTypeOf<T>, /*for_write=*/false));
  }
  //! Pointer without any wait (for experts who order work themselves). Throws Error on a dtype
  //! mismatch or an undefined tensor only. Never blocks.
  template <class T>
  T* data_unsafe() const {
    return static_cast<T*>(host_data_unsafe(kDTypeOf<T>));
  }
  //! The only element of a one-element tensor (e.g. sum()'s result). Blocks as const data();
  //! throws Error when numel() != 1 or T is not the dtype.
  template <class T>
  T item() const {
    check_item();
    return *data<T>();
  }

  //! Untyped data<T>() (waits for writers and readers). For bindings.
  void* data_ptr();
  //! Untyped const data<T>() (waits for writers). For bindings.
  const void* data_ptr() const;
  //! Untyped data_unsafe<T>() (no wait). Never blocks.
  void* data_ptr_unsafe() const;

  //! Blocks until the queued work that writes this tensor has finished; rethrows its failure.
  void wait() const;
  //! True when no queued work writes this tensor any more (the seed's poll()). Never blocks.
  bool ready() const;
  //! Waits at most `timeout` for the queued work that writes this tensor (and, when `for_write`,
  //! the work that reads it) without reporting a failure (a later data()/wait() does); true when
  //! that work has finished. Lets a binding wait in slices (Python's Ctrl-C). Blocks;
  //! thread-safe.
  bool wait_for(std::chrono::nanoseconds timeout, bool for_write = false) const;
  //! True when a host access (a read; a write too when `for_write`) would neither wait nor raise:
  //! no work on this tensor's memory that it must follow is queued or running, and none of it
  //! failed or was cancelled. Lets a binding skip its wait on the common path. Never blocks;
  //! thread-safe; throws Error only for an undefined tensor.
  bool settled(bool for_write = false) const;

  //! Another shape with the same elements; one size may be -1 (inferred). A view of the same
  //! storage when the tensor is contiguous, else a contiguous copy made on the current stream (as
  //! torch). Throws Error naming both shapes when the element counts differ. Returns at once.
  Tensor reshape(Shape shape) const;
  //! A view with dimensions d0 and d1 swapped (negative counts from the end). No copy; never
  //! blocks.
  Tensor transpose(int d0, int d1) const;
  //! A view with the dimensions reordered: dimension i of the result is `dims[i]` of this tensor.
  //! Throws Error unless `dims` is a permutation. No copy; never blocks.
  Tensor permute(const std::vector<int>& dims) const;
  //! The view with all dimensions reversed (numpy's .T; transpose for a matrix). Never blocks.
  Tensor T() const;
  //! A view with a size-1 dimension inserted at `d` (-dim()-1 <= d <= dim()). Never blocks.
  Tensor unsqueeze(int d) const;
  //! A view with size-1 dimension `d` removed (Error when its size is not 1). Never blocks.
  Tensor squeeze(int d) const;
  //! A view broadcast to `shape` (numpy rules; -1 keeps a size): expanded dimensions get stride 0,
  //! so every element there aliases one. Throws Error naming both shapes. Never blocks.
  Tensor expand(const Shape& shape) const;
  //! A view of indices start, start+step, ... up to (not including) stop along `d`, with numpy's
  //! slice semantics: negative indices count from the end, then are clamped to the dimension.
  //! A negative step walks backwards (a negative stride; still a view, no copy): for it, a start
  //! >= size() means the last element and a stop <= -size()-1 means "through the first", so
  //! `slice(d, INT64_MAX, INT64_MIN, -1)` is numpy's `[::-1]`. Throws Error for step 0 or a bad
  //! `d`. Never blocks; thread-safe.
  Tensor slice(int d, std::int64_t start, std::int64_t stop, std::int64_t step = 1) const;
  //! A view of index `i` along `d` (negative counts from the end), without that dimension.
  //! Throws Error when out of range. Never blocks.
  Tensor select(int d, std::int64_t i) const;
  //! This tensor when contiguous, else a contiguous copy made on the current stream.
  Tensor contiguous() const;
  //! A new contiguous tensor with a copy of the elements, made on the current stream. Returns at
  //! once.
  Tensor clone() const;
  //! A new tensor converted to `dtype` on the current stream (a clone when the dtype is the same).
  //! Returns at once.
  Tensor to(DType dtype) const;
  //! Copies `src` into this tensor (or view) on the current stream, converting the dtype and
  //! broadcasting `src` if needed. Throws Error naming both shapes when `src` does not broadcast
  //! to this shape. Returns at once.
  Tensor& copy_(const Tensor& src);
  //! Sets every element (of this view) to `value` on the current stream. Returns at once.
  Tensor& fill_(double value);

  //! True when both tensors use the same storage (copies and views). Never blocks.
  bool shares_storage(const Tensor& other) const noexcept { return storage_ == other.storage_; }
  //! "Tensor(shape=[2, 3], dtype=float32, device=cpu:0)". Never blocks.
  std::string str() const;

 private:
  friend struct detail::TensorAccess;
  void* host_data(DType want, bool for_write) const;
  void* host_data_unsafe(DType want) const;
  void check_item() const;

  std::shared_ptr<detail::Storage> storage_;
  Shape shape_;
  Shape strides_;
  std::int64_t offset_ = 0;
  std::int64_t numel_ = 0;
  DType dtype_ = DType::Float32;
};

//! An uninitialised tensor. Allocates at once (64-byte aligned); no work is queued.
//! Throws Error for bad shapes and for devices without tensor support (CPU only in this build).
STREAMRT_API Tensor empty(Shape shape, DType dtype = DType::Float32, Device device = {});
//! A tensor of zeros, filled on the current stream. Returns at once.
STREAMRT_API Tensor zeros(Shape shape, DType dtype = DType::Float32, Device device = {});
//! A tensor of ones, filled on the current stream. Returns at once.
STREAMRT_API Tensor ones(Shape shape, DType dtype = DType::Float32, Device device = {});
//! A tensor filled with `value` on the current stream. Returns at once.
STREAMRT_API Tensor full(Shape shape, double value, DType dtype = DType::Float32,
                         Device device = {});
//! 0, 1, ..., n-1 as a 1-D tensor, on the current stream. Throws Error when n < 0.
STREAMRT_API Tensor arange(std::int64_t n, DType dtype = DType::Int64, Device device = {});
//! Uniform numbers in [0, 1) from `seed` (Philox counter-based: element i is number i of the
//! seed's sequence, whatever the stream or worker count). Floating dtypes only. Returns at once.
STREAMRT_API Tensor rand(Shape shape, std::uint64_t seed, DType dtype = DType::Float32,
                         Device device = {});
//! As rand(shape, seed), drawing the next numel() numbers of `gen`.
STREAMRT_API Tensor rand(Shape shape, Generator& gen, DType dtype = DType::Float32,
                         Device device = {});
//! Standard normal numbers from `seed` (Box-Muller on the Philox sequence). Returns at once.
STREAMRT_API Tensor randn(Shape shape, std::uint64_t seed, DType dtype = DType::Float32,
                          Device device = {});
//! As randn(shape, seed), drawing the next numel() numbers of `gen`.
STREAMRT_API Tensor randn(Shape shape, Generator& gen, DType dtype = DType::Float32,
                          Device device = {});
//! Wraps external memory without copying. `data` must be aligned for `dtype` and stay valid
//! until `deleter(data)` is called (after the last tensor and the last queued work using it are
//! gone; it may run on a worker thread), or, without a deleter, as long as the tensor is used.
//! Memory reached twice is tracked once: a tensor wrapped over memory that overlaps other wrapped
//! tensors (or exposed ones: expose_memory) joins their dependency tracking, whatever start
//! address and size each has, so ops and host reads through either are ordered. Throws Error when
//! the memory overlaps more than 4 buffers tracked apart (wrap the whole buffer once instead).
//! Never blocks.
STREAMRT_API Tensor from_blob(void* data, Shape shape, DType dtype,
                              std::function<void(void*)> deleter = {}, Device device = {});
//! As from_blob() above, for a strided layout (a numpy or DLPack view): element (i0, i1, ...) is
//! at `data` + sum(ik * strides[k]) elements, so `data` is the first element and strides may be
//! negative (a reversed view) or 0 (a broadcast one: such a tensor cannot be written). `deleter`
//! gets `data`. Throws Error when strides.size() != shape.size(), when `data` is misaligned, and
//! when distinct elements would share memory through nonzero strides (writes to them would race;
//! copy such data instead). Never blocks; thread-safe.
STREAMRT_API Tensor from_blob(void* data, Shape shape, Shape strides, DType dtype,
                              std::function<void(void*)> deleter = {}, Device device = {});

}  // namespace streamrt
