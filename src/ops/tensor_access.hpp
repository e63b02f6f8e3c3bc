#pragma once
// detail::TensorAccess: how the library makes tensors and views over a storage and reaches a
// tensor's storage (Tensor befriends it).
#include <cstdint>
#include <memory>
#include <utility>

#include "streamrt/tensor.hpp"

namespace streamrt::detail {

// The library's access to Tensor internals.
struct TensorAccess {
  // A contiguous tensor at offset 0 of `storage`; `numel` is shape_numel(shape) (checked by the
  // caller).
  static Tensor make(std::shared_ptr<Storage> storage, Shape shape, std::int64_t numel,
                     DType dtype);
  // A view: `strides` and `offset` in elements, within the storage (checked by the caller).
  static Tensor make_view(std::shared_ptr<Storage> storage, Shape shape, Shape strides,
                          std::int64_t offset, DType dtype) {
    Tensor t;
    t.numel_ = shape_numel(shape);
    t.storage_ = std::move(storage);
    t.shape_ = std::move(shape);
    t.strides_ = std::move(strides);
    t.offset_ = offset;
    t.dtype_ = dtype;
    return t;
  }
  static const std::shared_ptr<Storage>& storage(const Tensor& t) noexcept { return t.storage_; }
};

}  // namespace streamrt::detail
