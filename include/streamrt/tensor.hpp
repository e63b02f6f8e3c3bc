#pragma once
//! \file tensor.hpp
//! Tensors: dense, contiguous, row-major arrays whose work runs on streams. Every op (creation
//! ops included) is enqueued on the current stream and returns at once; host access through
//! data<T>() / item<T>() first waits for the work that writes the tensor (and only that work).
//! Storage is reference-counted and kept alive by queued work, so dropping a tensor while a
//! stream still uses it is safe. See <streamrt/ops.hpp> for arithmetic and dependency tracking.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "streamrt/device.hpp"
#include "streamrt/export.hpp"

namespace streamrt {

//! Element types a tensor can hold.
enum class DType : std::uint8_t { Float32 = 0, Float64 = 1, Int32 = 2, Int64 = 3 };

//! Lower-case name of a dtype ("float32", "float64", "int32", "int64"). Never blocks.
STREAMRT_API std::string_view to_string(DType dtype) noexcept;

//! Bytes per element of `dtype`. Never blocks.
STREAMRT_API std::size_t element_size(DType dtype) noexcept;

//! True for Float32 and Float64. Never blocks.
constexpr bool is_floating(DType dtype) noexcept {
  return dtype == DType::Float32 || dtype == DType::Float64;
}

//! The DType of C++ type T (float, double, std::int32_t, std::int64_t).
template <class T>
inline constexpr DType kDTypeOf = [] {
  if constexpr (std::is_same_v<T, float>) {
    return DType::Float32;
  } else if constexpr (std::is_same_v<T, double>) {
    return DType::Float64;
  } else if constexpr (std::is_same_v<T, std::int32_t>) {
    return DType::Int32;
  } else {
    static_assert(std::is_same_v<T, std::int64_t>,
                  "tensor element types are float, double, std::int32_t and std::int64_t");
    return DType::Int64;
  }
}();

//! A tensor shape: sizes of each dimension, outermost first. {} is a 0-dim (scalar) tensor.
using Shape = std::vector<std::int64_t>;

//! The most dimensions a tensor may have.
inline constexpr int kMaxDims = 8;

//! "[2, 3]" style text of a shape, for messages. Never blocks.
STREAMRT_API std::string to_string(const Shape& shape);

//! Product of the sizes (1 for {}). Throws Error for negative sizes, more than kMaxDims
//! dimensions or an element count that overflows. Never blocks.
STREAMRT_API std::int64_t shape_numel(const Shape& shape);

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

//! A dense, contiguous, row-major tensor of up to kMaxDims dimensions. Copies (and reshape views)
//! share storage, like torch. Methods are thread-safe in the sense that calls from several threads
//! are well-defined; whether the results make sense is ordered by streams and tracking (see
//! <streamrt/ops.hpp>). A default-constructed Tensor is undefined: most calls on it throw Error.
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
  //! Row-major strides in elements. Never blocks.
  Shape strides() const;
  //! Bytes per element. Never blocks.
  std::size_t element_size() const noexcept { return streamrt::element_size(dtype_); }
  //! numel() * element_size(). Never blocks.
  std::size_t nbytes() const noexcept;

  //! Pointer to the elements for host reads and writes. Blocks until the queued work that
  //! writes this tensor, and the queued work that reads it (the host may write), has finished;
  //! rethrows that work's failure. Throws Error when T is not the dtype or the tensor is
  //! undefined, and when called from a stream's work that would wait for itself. Thread-safe.
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

  //! A view with another shape and the same storage; one size may be -1 (inferred). Throws Error
  //! naming both shapes when the element counts differ. Never blocks.
  Tensor reshape(Shape shape) const;
  //! A new tensor with a copy of the elements, made on the current stream. Returns at once.
  Tensor clone() const;
  //! A new tensor converted to `dtype` on the current stream (a clone when the dtype is the same).
  //! Returns at once.
  Tensor to(DType dtype) const;
  //! Copies `src` into this tensor on the current stream, converting the dtype if needed. Throws
  //! Error naming both shapes when they differ. Returns at once.
  Tensor& copy_(const Tensor& src);
  //! Sets every element to `value` on the current stream. Returns at once.
  Tensor& fill_(double value);

  //! True when both tensors use the same storage (copies, reshape views). Never blocks.
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
//! Never blocks.
STREAMRT_API Tensor from_blob(void* data, Shape shape, DType dtype,
                              std::function<void(void*)> deleter = {}, Device device = {});

}  // namespace streamrt
