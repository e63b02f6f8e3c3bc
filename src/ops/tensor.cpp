// Tensor, storage, generators and the creation ops.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <optional>
#include <utility>
#include <vector>

#include "core/deadline.hpp"
#include "kernels.hpp"
#include "layout.hpp"
#include "random.hpp"
#include "simd_kernels.hpp"
#include "storage.hpp"
#include "streamrt/error.hpp"
#include "streamrt/ops.hpp"

namespace streamrt {

std::string_view to_string(DType dtype) noexcept {
  switch (dtype) {
    case DType::Float32:
      return "float32";
    case DType::Float64:
      return "float64";
    case DType::Int32:
      return "int32";
    case DType::Int64:
      return "int64";
    case DType::Bool:
      return "bool";
  }
  return "unknown";
}

DType promote_types(DType a, DType b) noexcept {
  if (a == b) return a;
  auto kind = [](DType d) { return d == DType::Bool ? 0 : is_floating(d) ? 2 : 1; };
  const int ka = kind(a), kb = kind(b);
  if (ka != kb) return ka > kb ? a : b;  // the higher kind's type, whatever its width (torch)
  return element_size(a) >= element_size(b) ? a : b;
}

Shape broadcast_shapes(const Shape& a, const Shape& b) {
  const std::size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (std::size_t i = 0; i < n; ++i) {
    // Aligned from the right: dimension i of the result is a's (a.size() - n + i), if any.
    const std::int64_t x = i + a.size() >= n ? a[i + a.size() - n] : 1;
    const std::int64_t y = i + b.size() >= n ? b[i + b.size() - n] : 1;
    if (x != y && x != 1 && y != 1) {
      throw Error("shapes " + to_string(a) + " and " + to_string(b) +
                  " cannot be broadcast together (dimension " + std::to_string(i) + ": " +
                  std::to_string(x) + " vs " + std::to_string(y) +
                  "; sizes must match or be 1, aligned from the right)");
    }
    out[i] = x == 1 ? y : x;
  }
  return out;
}

std::string to_string(const Shape& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

Shape contiguous_strides(const Shape& shape) {
  Shape s(shape.size());
  std::int64_t stride = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    s[i] = stride;
    stride *= std::max<std::int64_t>(shape[i], 1);
  }
  return s;
}

std::int64_t shape_numel(const Shape& shape) {
  if (shape.size() > static_cast<std::size_t>(kMaxDims)) {
    throw Error("shape " + to_string(shape) + " has " + std::to_string(shape.size()) +
                " dimensions; tensors have at most " + std::to_string(kMaxDims) +
                " (reshape to fewer)");
  }
  std::int64_t n = 1;
  for (auto d : shape) {
    if (d < 0) {
      throw Error("shape " + to_string(shape) + " has a negative size; sizes must be >= 0");
    }
    if (d != 0 && n > std::numeric_limits<std::int64_t>::max() / d) {
      throw Error("shape " + to_string(shape) + " has too many elements (overflows int64)");
    }
    n *= d;
  }
  return n;
}

std::size_t shape_nbytes(const Shape& shape, DType dtype) {
  const std::int64_t n = shape_numel(shape);
  const auto esize = static_cast<std::int64_t>(element_size(dtype));
  if (n > kMaxTensorBytes / esize) {
    throw Error("shape " + to_string(shape) + " of " + std::string(to_string(dtype)) + " needs " +
                std::to_string(n) + " x " + std::to_string(esize) + " bytes, more than the " +
                std::to_string(kMaxTensorBytes) + " a tensor can address (2^63 - 1)");
  }
  return static_cast<std::size_t>(n * esize);
}

// ---- Generator -------------------------------------------------------------------------------

struct Generator::State {
  std::atomic<std::uint64_t> seed;
  std::atomic<std::uint64_t> offset{0};
  explicit State(std::uint64_t s) : seed(s) {}
};

Generator::Generator(std::uint64_t seed) : state_(std::make_shared<State>(seed)) {}
// Relaxed throughout: the generator publishes no other memory; reserve() needs atomicity only.
std::uint64_t Generator::seed() const noexcept {
  return state_->seed.load(std::memory_order_relaxed);
}
std::uint64_t Generator::offset() const noexcept {
  return state_->offset.load(std::memory_order_relaxed);
}
void Generator::manual_seed(std::uint64_t seed) noexcept {
  state_->seed.store(seed, std::memory_order_relaxed);
  state_->offset.store(0, std::memory_order_relaxed);
}
std::uint64_t Generator::reserve(std::uint64_t n) noexcept {
  return state_->offset.fetch_add(n, std::memory_order_relaxed);
}

// ---- Storage (allocation: storage.cpp) --------------------------------------------------------

namespace detail {

Tensor TensorAccess::make(std::shared_ptr<Storage> storage, Shape shape, std::int64_t numel,
                          DType dtype) {
  Tensor t;
  // Row-major strides written in place (contiguous_strides would build and copy a second Shape).
  t.strides_.resize(shape.size());
  std::int64_t stride = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    t.strides_[i] = stride;
    stride *= std::max<std::int64_t>(shape[i], 1);
  }
  t.numel_ = numel;
  t.storage_ = std::move(storage);
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  return t;
}

}  // namespace detail

// ---- helpers ---------------------------------------------------------------------------------

namespace ops {

Shape broadcast_strides(const Shape& shape, const Shape& strides, const Shape& to) {
  Shape out(to.size(), 0);
  const std::size_t lead = to.size() - shape.size();
  for (std::size_t i = 0; i < shape.size(); ++i) {
    out[lead + i] = shape[i] == to[lead + i] ? strides[i] : 0;
  }
  return out;
}

void check_writable(const Tensor& t, const char* op) {
  for (int d = 0; d < t.dim(); ++d) {
    if (t.strides()[static_cast<std::size_t>(d)] == 0 &&
        t.shape()[static_cast<std::size_t>(d)] > 1) {
      throw Error(std::string(op) + ": the tensor " + to_string(t.shape()) +
                  " is an expanded view (stride 0 in dimension " + std::to_string(d) +
                  "): several of its elements share one memory location; write to a "
                  "contiguous() copy instead");
    }
  }
}

std::string describe(const Tensor& t) {
  return std::string(to_string(t.dtype())) + " " + to_string(t.shape());
}

void check_same_device(const char* op, const Tensor& a, const Tensor& b) {
  if (a.device() != b.device()) {
    throw Error(std::string(op) + ": tensors are on different devices (" + a.device().str() +
                " and " + b.device().str() + ")");
  }
}

Tensor as_dtype(const Tensor& t, DType dtype) {
  return t.dtype() == dtype ? t : t.to(dtype);
}

int wrap_dim(int d, int ndim, const char* op) {
  const int n = std::max(ndim, 1);  // a 0-d tensor accepts dim 0 and -1, as torch
  if (d < -n || d >= n) {
    throw Error(std::string(op) + ": dimension " + std::to_string(d) + " is out of range for a " +
                std::to_string(ndim) + "-d tensor (use " + std::to_string(-n) + " to " +
                std::to_string(n - 1) + ")");
  }
  return d < 0 ? d + n : d;
}

void check_defined(const Tensor& t, const char* op) {
  if (!t.defined()) {
    throw Error(std::string(op) +
                ": the tensor is undefined (default-constructed); create it with empty(), "
                "zeros(), from_blob() or an op first");
  }
}

void check_device(const Device& device) {
  // The CPU backend is made when the library loads and has device 0 (allocator.cpp): nothing to
  // look up for the device nearly every tensor is on.
  if (device == Device{}) return;
  if (device.type != DeviceType::CPU) {
    throw Error("tensors on " + device.str() +
                " are not supported in this build: only CPU tensors (" + api::device("cpu") + ")");
  }
  impl::backend_for(device);  // checks the index
}

Tensor new_tensor(Shape shape, DType dtype, Device device) {
  check_device(device);
  const std::size_t nbytes = shape_nbytes(shape, dtype);
  const std::int64_t n = shape_numel(shape);
  auto storage = Storage::allocate(nbytes, device);
  return detail::TensorAccess::make(std::move(storage), std::move(shape), n, dtype);
}

Tensor new_tensor(Shape shape, DType dtype, const Stream& stream) {
  check_device(stream.device());
  const std::size_t nbytes = shape_nbytes(shape, dtype);
  const std::int64_t n = shape_numel(shape);
  auto storage = Storage::allocate(nbytes, stream);
  return detail::TensorAccess::make(std::move(storage), std::move(shape), n, dtype);
}

namespace {

template <class D, class S>
D convert(S v) {
  if constexpr (std::is_same_v<D, bool>) {
    return v != S{0};
  } else if constexpr (std::is_integral_v<D> && std::is_floating_point_v<S>) {
    return from_double<D>(static_cast<double>(v));
  } else {
    return static_cast<D>(v);
  }
}

}  // namespace

void enqueue_fill(Tensor& t, double value) {
  // Kernels hold raw pointers (ops::submit's rule): a result dropped by the host goes back to
  // its stream's pool at once instead of when the kernel has run.
  void* pt = detail::TensorAccess::storage(t)->data();
  const DType dtype = t.dtype();
  const Shape shape = t.shape(), strides = t.strides();
  const std::int64_t offset = t.storage_offset();
  submit("fill", t.device(), {}, {&t}, [pt, dtype, shape, strides, offset, value] {
    dispatch_all(dtype, [&](auto tag) {
      using T = decltype(tag);
      const T v = from_double<T>(value);
      T* p = static_cast<T*>(pt) + offset;
      const auto loop = make_loop<1>(shape, {&strides});
      // Large fills bypass the cache (streaming stores): the data is not read back soon.
      const bool nt = loop.numel * static_cast<std::int64_t>(sizeof(T)) >= simd::kStreamBytes;
      parallel_runs(loop, [&](const auto& off, std::int64_t count, const auto& inc) {
        T* q = p + off[0];
        if constexpr (std::is_floating_point_v<T>) {
          if (inc[0] == 1) {
            simd::fill(q, v, count, nt);
            return;
          }
        }
        if (inc[0] == 1) {
          std::fill(q, q + count, v);
        } else {
          for (std::int64_t i = 0; i < count; ++i) q[i * inc[0]] = v;
        }
      });
    });
  });
}

void enqueue_copy(Tensor& dst, const Tensor& src, const char* label) {
  void* d = detail::TensorAccess::storage(dst)->data();
  const void* s = detail::TensorAccess::storage(src)->data();
  const DType dt = dst.dtype(), st = src.dtype();
  const Shape shape = dst.shape(), dst_strides = dst.strides();
  const Shape src_strides = broadcast_strides(src.shape(), src.strides(), shape);
  const std::int64_t d_off = dst.storage_offset(), s_off = src.storage_offset();
  submit(label, dst.device(), {&src}, {&dst},
         [d, s, dt, st, shape, dst_strides, src_strides, d_off, s_off] {
           // The same elements (x.copy_(x)): nothing to do.
           if (d == s && d_off == s_off && dt == st && dst_strides == src_strides) return;
           dispatch_all(dt, [&](auto dtag) {
             using D = decltype(dtag);
             dispatch_all(st, [&](auto stag) {
               using S = decltype(stag);
               D* out = static_cast<D*>(d) + d_off;
               const S* in = static_cast<const S*>(s) + s_off;
               const auto loop = make_loop<2>(shape, {&dst_strides, &src_strides});
               parallel_runs(loop, [&](const auto& off, std::int64_t count, const auto& inc) {
                 D* o = out + off[0];
                 const S* x = in + off[1];
                 if constexpr (std::is_same_v<D, S>) {
                   if (inc[0] == 1 && inc[1] == 1) {
                     std::memcpy(o, x, static_cast<std::size_t>(count) * sizeof(D));
                     return;
                   }
                 }
                 for (std::int64_t i = 0; i < count; ++i) o[i * inc[0]] = convert<D>(x[i * inc[1]]);
               });
             });
           });
         });
}

}  // namespace ops

// ---- Tensor ----------------------------------------------------------------------------------

Device Tensor::device() const noexcept {
  return storage_ ? storage_->device() : Device{};
}

std::int64_t Tensor::size(int d) const {
  const int n = dim();
  const int i = d < 0 ? d + n : d;
  if (i < 0 || i >= n) {
    throw Error(api::member("Tensor", "size") + "(" + std::to_string(d) +
                "): dimension out of range for shape " + to_string(shape_) + " (use -" +
                std::to_string(n) + " to " + std::to_string(n - 1) + ")");
  }
  return shape_[static_cast<std::size_t>(i)];
}

bool Tensor::is_contiguous() const noexcept {
  std::int64_t expected = 1;
  for (std::size_t i = shape_.size(); i-- > 0;) {
    if (shape_[i] == 1) continue;
    if (shape_[i] == 0) return true;
    if (strides_[i] != expected) return false;
    expected *= shape_[i];
  }
  return true;
}

std::size_t Tensor::nbytes() const noexcept {
  return static_cast<std::size_t>(numel_) * streamrt::element_size(dtype_);
}

void* Tensor::host_data_unsafe(DType want) const {
  ops::check_defined(*this, "Tensor::data");
  if (want != dtype_) [[unlikely]] {
    throw Error("Tensor::data<T>(): T is " + std::string(to_string(want)) + " but the tensor " +
                to_string(shape_) + " holds " + std::string(to_string(dtype_)) + "; use data<" +
                (dtype_ == DType::Float32   ? "float"
                 : dtype_ == DType::Float64 ? "double"
                 : dtype_ == DType::Int32   ? "std::int32_t"
                 : dtype_ == DType::Bool    ? "bool"
                                            : "std::int64_t") +
                ">() or convert with to()");
  }
  return static_cast<char*>(storage_->data()) +
         offset_ * static_cast<std::int64_t>(streamrt::element_size(dtype_));
}

void* Tensor::host_data(DType want, bool for_write) const {
  void* p = host_data_unsafe(want);
  for (const auto& pos : ops::pending_accesses(*storage_, for_write)) {
    impl::backend(pos->device().type).synchronize_event(*pos, std::nullopt);
  }
  return p;
}

void* Tensor::data_ptr() {
  return host_data(dtype_, true);
}
const void* Tensor::data_ptr() const {
  return host_data(dtype_, false);
}
void* Tensor::data_ptr_unsafe() const {
  return host_data_unsafe(dtype_);
}

void Tensor::wait() const {
  host_data(dtype_, false);
}

bool Tensor::ready() const {
  ops::check_defined(*this, "Tensor::ready");
  for (const auto& pos : ops::pending_accesses(*storage_, false)) {
    if (!impl::backend(pos->device().type).query_event(*pos)) return false;
  }
  return true;
}

bool Tensor::wait_for(std::chrono::nanoseconds timeout, bool for_write) const {
  ops::check_defined(*this, "Tensor::wait_for");
  const auto deadline = detail::deadline_after(timeout);
  for (const auto& pos : ops::pending_accesses(*storage_, for_write)) {
    const auto left = std::max(deadline - std::chrono::steady_clock::now(),
                               std::chrono::steady_clock::duration::zero());
    if (!impl::backend(pos->device().type).wait_event(*pos, left)) return false;
  }
  return true;
}

void Tensor::check_item() const {
  ops::check_defined(*this, "Tensor::item");
  if (numel_ != 1) {
    throw Error(api::member("Tensor", "item") + "(): the tensor " + to_string(shape_) + " has " +
                std::to_string(numel_) + " elements; item() needs exactly one (use data<T>())");
  }
}

Tensor Tensor::reshape(Shape shape) const {
  ops::check_defined(*this, "reshape");
  int infer = -1;
  std::int64_t known = 1;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (infer >= 0) {
        throw Error("reshape " + to_string(shape_) + " -> " + to_string(shape) +
                    ": only one size may be -1");
      }
      infer = static_cast<int>(i);
    } else if (shape[i] < 0) {
      throw Error("reshape " + to_string(shape_) + " -> " + to_string(shape) +
                  ": sizes must be >= 0 (or -1 for one inferred size)");
    } else {
      known *= shape[i];
    }
  }
  if (infer >= 0) {
    if (known == 0 || numel_ % known != 0) {
      throw Error("reshape " + to_string(shape_) + " -> " + to_string(shape) + ": " +
                  std::to_string(numel_) + " elements cannot be split that way");
    }
    shape[static_cast<std::size_t>(infer)] = numel_ / known;
  }
  if (shape_numel(shape) != numel_) {
    throw Error("reshape " + to_string(shape_) + " -> " + to_string(shape) +
                ": element counts differ (" + std::to_string(numel_) + " vs " +
                std::to_string(shape_numel(shape)) + ")");
  }
  if (!is_contiguous()) return contiguous().reshape(std::move(shape));
  Shape strides = ops::contiguous_strides(shape);
  return detail::TensorAccess::make_view(storage_, std::move(shape), std::move(strides), offset_,
                                         dtype_);
}

Tensor Tensor::clone() const {
  return to(dtype_);
}

Tensor Tensor::to(DType dtype) const {
  ops::check_defined(*this, "to");
  Tensor out = ops::new_tensor(shape_, dtype, device());
  ops::enqueue_copy(out, *this, dtype == dtype_ ? "clone" : "to");
  return out;
}

Tensor& Tensor::copy_(const Tensor& src) {
  ops::check_defined(*this, "copy_");
  ops::check_defined(src, "copy_");
  bool fits = src.dim() <= dim();
  if (fits) {
    try {
      fits = broadcast_shapes(src.shape_, shape_) == shape_;
    } catch (const Error&) {
      fits = false;
    }
  }
  if (!fits) {
    throw Error("copy_: shapes differ: destination " + to_string(shape_) + ", source " +
                to_string(src.shape_) + " (the source must broadcast to the destination's shape)");
  }
  if (src.device() != device()) {
    throw Error("copy_: devices differ: destination " + device().str() + ", source " +
                src.device().str());
  }
  ops::check_writable(*this, "copy_");
  const bool same_view = src.storage_offset() == offset_ && src.shape_ == shape_ &&
                         src.strides_ == strides_ && src.dtype_ == dtype_;
  if (shares_storage(src) && !same_view) {
    // The source may overlap the destination (x[1:].copy_(x[:-1])): read it from a copy, so
    // no element is overwritten before it is read (and the parallel chunks do not race).
    ops::enqueue_copy(*this, src.clone(), "copy_");
  } else {
    ops::enqueue_copy(*this, src, "copy_");
  }
  return *this;
}

Tensor& Tensor::fill_(double value) {
  ops::check_defined(*this, "fill_");
  ops::check_writable(*this, "fill_");
  ops::enqueue_fill(*this, value);
  return *this;
}

std::string Tensor::str() const {
  if (!defined()) return "Tensor(undefined)";
  return "Tensor(shape=" + to_string(shape_) + ", dtype=" + std::string(to_string(dtype_)) +
         ", device=" + device().str() + ")";
}

// ---- creation ops ----------------------------------------------------------------------------

Tensor empty(Shape shape, DType dtype, Device device) {
  return ops::new_tensor(std::move(shape), dtype, device);
}

Tensor full(Shape shape, double value, DType dtype, Device device) {
  Tensor t = ops::new_tensor(std::move(shape), dtype, device);
  ops::enqueue_fill(t, value);
  return t;
}

Tensor zeros(Shape shape, DType dtype, Device device) {
  return full(std::move(shape), 0.0, dtype, device);
}

Tensor ones(Shape shape, DType dtype, Device device) {
  return full(std::move(shape), 1.0, dtype, device);
}

Tensor arange(std::int64_t n, DType dtype, Device device) {
  if (n < 0) throw Error("arange(" + std::to_string(n) + "): n must be >= 0");
  if (dtype == DType::Bool) throw Error("arange: dtype bool is not supported; use a numeric dtype");
  Tensor t = ops::new_tensor({n}, dtype, device);
  void* pt = detail::TensorAccess::storage(t)->data();
  ops::submit("arange", device, {}, {&t}, [pt, dtype, n] {
    ops::dispatch(dtype, [&](auto tag) {
      using T = decltype(tag);
      T* p = static_cast<T*>(pt);
      ops::parallel_elements(n, [&](std::int64_t i) { p[i] = static_cast<T>(i); });
    });
  });
  return t;
}

namespace {

Tensor random_tensor(const char* op, Shape shape, std::uint64_t seed, std::uint64_t offset,
                     bool normal, DType dtype, Device device) {
  if (!is_floating(dtype)) {
    throw Error(std::string(op) + ": dtype " + std::string(to_string(dtype)) +
                " is not a floating type; use " + api::enumerator("DType", "Float32") + " or " +
                api::enumerator("DType", "Float64"));
  }
  Tensor t = ops::new_tensor(std::move(shape), dtype, device);
  void* pt = detail::TensorAccess::storage(t)->data();
  const std::int64_t n = t.numel();
  ops::submit(op, device, {}, {&t}, [pt, n, seed, offset, normal, dtype] {
    ops::dispatch_floating(dtype, [&](auto tag) {
      using T = decltype(tag);
      T* p = static_cast<T*>(pt);
      ops::parallel_ranges(n, [&](std::int64_t begin, std::int64_t end) {
        const auto first = offset + static_cast<std::uint64_t>(begin);
        if (normal) {
          ops::simd::fill_normal(p + begin, first, end - begin, seed);
        } else {
          ops::simd::fill_uniform(p + begin, first, end - begin, seed);
        }
      });
    });
  });
  return t;
}

}  // namespace

Tensor rand(Shape shape, std::uint64_t seed, DType dtype, Device device) {
  return random_tensor("rand", std::move(shape), seed, 0, false, dtype, device);
}

Tensor rand(Shape shape, Generator& gen, DType dtype, Device device) {
  const auto n = static_cast<std::uint64_t>(shape_numel(shape));
  return random_tensor("rand", std::move(shape), gen.seed(), gen.reserve(n), false, dtype, device);
}

Tensor randn(Shape shape, std::uint64_t seed, DType dtype, Device device) {
  return random_tensor("randn", std::move(shape), seed, 0, true, dtype, device);
}

Tensor randn(Shape shape, Generator& gen, DType dtype, Device device) {
  const auto n = static_cast<std::uint64_t>(shape_numel(shape));
  return random_tensor("randn", std::move(shape), gen.seed(), gen.reserve(n), true, dtype, device);
}

Tensor from_blob(void* data, Shape shape, DType dtype, std::function<void(void*)> deleter,
                 Device device) {
  ops::check_device(device);
  const std::size_t nbytes = shape_nbytes(shape, dtype);
  const std::int64_t n = shape_numel(shape);
  if (data == nullptr && n > 0) {
    throw Error("from_blob: data is null for a tensor of shape " + to_string(shape));
  }
  if (reinterpret_cast<std::uintptr_t>(data) % element_size(dtype) != 0) {
    throw Error("from_blob: data is not aligned for " + std::string(to_string(dtype)) + " (needs " +
                std::to_string(element_size(dtype)) + "-byte alignment)");
  }
  auto storage =
      std::make_shared<detail::Storage>(data, nbytes, device, std::move(deleter), false);
  return detail::TensorAccess::make(std::move(storage), std::move(shape), n, dtype);
}

namespace {

constexpr std::int64_t kMaxI64 = std::numeric_limits<std::int64_t>::max();

// a * b + c without overflow, or nullopt.
std::optional<std::int64_t> mul_add(std::int64_t a, std::int64_t b, std::int64_t c) {
  std::int64_t p = 0, r = 0;
  if (__builtin_mul_overflow(a, b, &p) || __builtin_add_overflow(p, c, &r)) return std::nullopt;
  return r;
}

}  // namespace

Tensor from_blob(void* data, Shape shape, Shape strides, DType dtype,
                 std::function<void(void*)> deleter, Device device) {
  ops::check_device(device);
  const std::int64_t n = shape_numel(shape);
  if (strides.size() != shape.size()) {
    throw Error("from_blob: " + std::to_string(strides.size()) + " strides " + to_string(strides) +
                " for the " + std::to_string(shape.size()) + "-d shape " + to_string(shape) +
                "; give one stride per dimension");
  }
  if (data == nullptr && n > 0) {
    throw Error("from_blob: data is null for a tensor of shape " + to_string(shape));
  }
  const auto esize = static_cast<std::int64_t>(element_size(dtype));
  if (reinterpret_cast<std::uintptr_t>(data) % static_cast<std::uintptr_t>(esize) != 0) {
    throw Error("from_blob: data is not aligned for " + std::string(to_string(dtype)) + " (needs " +
                std::to_string(esize) + "-byte alignment)");
  }
  auto describe_layout = [&] {
    return "shape " + to_string(shape) + ", strides " + to_string(strides);
  };
  // The lowest and highest element offsets reached, relative to `data`; the storage spans them.
  std::int64_t lo = 0, hi = 0;
  // Non-overlap: with the dimensions ordered by |stride|, each stride must step past everything
  // the smaller ones reach (sufficient, and it holds for every layout numpy, torch and streamrt
  // views make). Stride-0 dimensions alias on purpose (broadcasts) and are left out: writes to
  // them are refused elsewhere (check_writable).
  std::vector<std::pair<std::int64_t, std::int64_t>> dims;  // (|stride|, size)
  if (n > 0) {
    for (std::size_t d = 0; d < shape.size(); ++d) {
      if (shape[d] == 1) continue;
      const auto reach = mul_add(strides[d], shape[d] - 1, 0);
      const auto next =
          reach ? (*reach < 0 ? mul_add(1, lo, *reach) : mul_add(1, hi, *reach)) : std::nullopt;
      if (!next || strides[d] == std::numeric_limits<std::int64_t>::min()) {
        throw Error("from_blob: the layout (" + describe_layout() +
                    ") spans more memory than can be addressed");
      }
      (*reach < 0 ? lo : hi) = *next;
      if (strides[d] != 0) dims.emplace_back(std::abs(strides[d]), shape[d]);
    }
  }
  // Elements from the lowest to the highest address, and their bytes.
  const auto extent = mul_add(-1, lo, hi);
  const auto span = extent && *extent < kMaxI64 ? mul_add(*extent + 1, esize, 0) : std::nullopt;
  if (!span) {
    throw Error("from_blob: the layout (" + describe_layout() +
                ") spans more memory than can be addressed");
  }
  std::sort(dims.begin(), dims.end());
  std::int64_t covered = 1;  // how far (in elements) the smaller dimensions reach, + 1
  for (const auto& [stride, size] : dims) {
    if (stride < covered) {
      throw Error("from_blob: distinct elements of the layout (" + describe_layout() +
                  ") share memory, so writes to them would race; copy the data into a "
                  "contiguous buffer first");
    }
    covered += stride * (size - 1);  // the sum stays <= *extent + 1: no overflow
  }
  char* first = static_cast<char*>(data);
  void* base = first + lo * esize;
  const std::size_t nbytes = n == 0 ? 0 : static_cast<std::size_t>(*span);
  // The storage starts at the lowest address (a reversed view's last element); the deleter
  // still gets the pointer it was given.
  std::function<void(void*)> release;
  if (deleter) release = [deleter = std::move(deleter), data](void*) { deleter(data); };
  auto storage = std::make_shared<detail::Storage>(n == 0 ? data : base, nbytes, device,
                                                   std::move(release), false);
  return detail::TensorAccess::make_view(std::move(storage), std::move(shape), std::move(strides),
                                         n == 0 ? 0 : -lo, dtype);
}

}  // namespace streamrt
