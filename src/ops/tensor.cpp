// Tensor, storage, generators and the creation ops.
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>

#include "kernels.hpp"
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
  }
  return "unknown";
}

std::size_t element_size(DType dtype) noexcept {
  return dtype == DType::Float32 || dtype == DType::Int32 ? 4 : 8;
}

std::string to_string(const Shape& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
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

// ---- helpers ---------------------------------------------------------------------------------

namespace ops {

void check_defined(const Tensor& t, const char* op) {
  if (!t.defined()) {
    throw Error(std::string(op) +
                ": the tensor is undefined (default-constructed); create it with empty(), "
                "zeros(), from_blob() or an op first");
  }
}

void check_device(const Device& device) {
  if (device.type != DeviceType::CPU) {
    throw Error("tensors on " + device.str() +
                " are not supported in this build: only CPU tensors (Device{} or "
                "Device::parse(\"cpu\"))");
  }
  impl::backend_for(device);  // checks the index
}

Tensor new_tensor(Shape shape, DType dtype, Device device) {
  check_device(device);
  const std::int64_t n = shape_numel(shape);
  auto storage = Storage::allocate(static_cast<std::size_t>(n) * element_size(dtype), device);
  return detail::TensorAccess::make(std::move(storage), std::move(shape), dtype);
}

namespace {

void fill_kernel(void* data, DType dtype, std::int64_t n, double value) {
  dispatch(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T v = from_double<T>(value);
    T* p = static_cast<T*>(data);
    if constexpr (std::is_floating_point_v<T>) {
      const bool nt = n * static_cast<std::int64_t>(sizeof(T)) >= simd::kStreamBytes;
      parallel_ranges(n, [&](std::int64_t i0, std::int64_t i1) {
        simd::fill(p + i0, v, i1 - i0, nt);
      });
    } else {
      parallel_elements(n, [&](std::int64_t i) { p[i] = v; });
    }
  });
}

}  // namespace

void enqueue_fill(Tensor& t, double value) {
  auto st = detail::TensorAccess::storage(t);
  const DType dtype = t.dtype();
  const std::int64_t n = t.numel();
  submit("fill", t.device(), {}, {&t},
         [st, dtype, n, value] { fill_kernel(st->data(), dtype, n, value); });
}

void enqueue_copy(Tensor& dst, const Tensor& src, const char* label) {
  auto d = detail::TensorAccess::storage(dst);
  auto s = detail::TensorAccess::storage(src);
  const DType dt = dst.dtype(), st = src.dtype();
  const std::int64_t n = dst.numel();
  submit(label, dst.device(), {&src}, {&dst}, [d, s, dt, st, n] {
    if (dt == st) {
      // Same storage (x.copy_(x)) is a no-op; memmove would do, but skip the work.
      if (d != s) std::memcpy(d->data(), s->data(), static_cast<std::size_t>(n) * element_size(dt));
      return;
    }
    dispatch(dt, [&](auto dtag) {
      using D = decltype(dtag);
      dispatch(st, [&](auto stag) {
        using S = decltype(stag);
        D* out = static_cast<D*>(d->data());
        const S* in = static_cast<const S*>(s->data());
        parallel_elements(n, [&](std::int64_t i) {
          if constexpr (std::is_integral_v<D> && std::is_floating_point_v<S>) {
            out[i] = from_double<D>(static_cast<double>(in[i]));
          } else {
            out[i] = static_cast<D>(in[i]);
          }
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
    throw Error("Tensor::size(" + std::to_string(d) + "): dimension out of range for shape " +
                to_string(shape_) + " (use -" + std::to_string(n) + " to " + std::to_string(n - 1) +
                ")");
  }
  return shape_[static_cast<std::size_t>(i)];
}

Shape Tensor::strides() const {
  Shape s(shape_.size());
  std::int64_t stride = 1;
  for (std::size_t i = shape_.size(); i-- > 0;) {
    s[i] = stride;
    stride *= shape_[i];
  }
  return s;
}

std::size_t Tensor::nbytes() const noexcept {
  return static_cast<std::size_t>(numel_) * streamrt::element_size(dtype_);
}

void* Tensor::host_data_unsafe(DType want) const {
  ops::check_defined(*this, "Tensor::data");
  if (want != dtype_) {
    throw Error("Tensor::data<T>(): T is " + std::string(to_string(want)) + " but the tensor " +
                to_string(shape_) + " holds " + std::string(to_string(dtype_)) + "; use data<" +
                (dtype_ == DType::Float32   ? "float"
                 : dtype_ == DType::Float64 ? "double"
                 : dtype_ == DType::Int32   ? "std::int32_t"
                                            : "std::int64_t") +
                ">() or convert with to()");
  }
  return storage_->data();
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

void Tensor::check_item() const {
  ops::check_defined(*this, "Tensor::item");
  if (numel_ != 1) {
    throw Error("Tensor::item(): the tensor " + to_string(shape_) + " has " +
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
  return detail::TensorAccess::make(storage_, std::move(shape), dtype_);
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
  if (src.shape_ != shape_) {
    throw Error("copy_: shapes differ: destination " + to_string(shape_) + ", source " +
                to_string(src.shape_) + " (reshape the source first)");
  }
  if (src.device() != device()) {
    throw Error("copy_: devices differ: destination " + device().str() + ", source " +
                src.device().str());
  }
  ops::enqueue_copy(*this, src, "copy_");
  return *this;
}

Tensor& Tensor::fill_(double value) {
  ops::check_defined(*this, "fill_");
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
  Tensor t = ops::new_tensor({n}, dtype, device);
  auto st = detail::TensorAccess::storage(t);
  ops::submit("arange", device, {}, {&t}, [st, dtype, n] {
    ops::dispatch(dtype, [&](auto tag) {
      using T = decltype(tag);
      T* p = static_cast<T*>(st->data());
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
                " is not a floating type; use DType::Float32 or DType::Float64");
  }
  Tensor t = ops::new_tensor(std::move(shape), dtype, device);
  auto st = detail::TensorAccess::storage(t);
  const std::int64_t n = t.numel();
  ops::submit(op, device, {}, {&t}, [st, n, seed, offset, normal, dtype] {
    ops::dispatch_floating(dtype, [&](auto tag) {
      using T = decltype(tag);
      T* p = static_cast<T*>(st->data());
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
  const std::int64_t n = shape_numel(shape);
  if (data == nullptr && n > 0) {
    throw Error("from_blob: data is null for a tensor of shape " + to_string(shape));
  }
  if (reinterpret_cast<std::uintptr_t>(data) % element_size(dtype) != 0) {
    throw Error("from_blob: data is not aligned for " + std::string(to_string(dtype)) + " (needs " +
                std::to_string(element_size(dtype)) + "-byte alignment)");
  }
  auto storage = std::make_shared<detail::Storage>(
      data, static_cast<std::size_t>(n) * element_size(dtype), device, std::move(deleter), false);
  return detail::TensorAccess::make(std::move(storage), std::move(shape), dtype);
}

}  // namespace streamrt
