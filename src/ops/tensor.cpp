// Tensor's methods: sizes, host access (waiting for the tracked work first), reshape, copies and
// fills; and detail::TensorAccess::make.
#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <utility>

#include "checks.hpp"
#include "core/deadline.hpp"
#include "creation.hpp"
#include "fill_copy.hpp"
#include "storage.hpp"
#include "streamrt/error.hpp"
#include "streamrt/ops.hpp"
#include "tensor_access.hpp"
#include "tracking.hpp"

namespace streamrt {
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

bool Tensor::settled(bool for_write) const {
  ops::check_defined(*this, "Tensor::settled");
  for (const auto& pos : ops::pending_accesses(*storage_, for_write)) {
    // (a failed access stays listed until it is reported: the wait that reports it raises)
    if (impl::backend(pos->device().type).event_state(*pos) != EventState::Complete) return false;
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
  Shape strides = contiguous_strides(shape);
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

}  // namespace streamrt
