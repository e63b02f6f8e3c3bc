// Views (transpose, permute, slicing, unsqueeze, expand): new shape, strides and offset over the
// same storage, so they share its dependency tracking; nothing is queued. Plus contiguous(), cat
// and stack, which copy on the current stream.
#include <algorithm>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "checks.hpp"
#include "creation.hpp"
#include "fill_copy.hpp"
#include "kernels.hpp"
#include "layout.hpp"
#include "storage.hpp"
#include "streamrt/error.hpp"
#include "streamrt/ops.hpp"
#include "tensor_access.hpp"
#include "tracking.hpp"

namespace streamrt {

using detail::TensorAccess;

Tensor Tensor::transpose(int d0, int d1) const {
  ops::check_defined(*this, "transpose");
  const int a = ops::wrap_dim(d0, dim(), "transpose");
  const int b = ops::wrap_dim(d1, dim(), "transpose");
  if (dim() == 0) return *this;
  Shape shape = shape_, strides = strides_;
  std::swap(shape[static_cast<std::size_t>(a)], shape[static_cast<std::size_t>(b)]);
  std::swap(strides[static_cast<std::size_t>(a)], strides[static_cast<std::size_t>(b)]);
  return TensorAccess::make_view(storage_, std::move(shape), std::move(strides), offset_, dtype_);
}

Tensor Tensor::permute(const std::vector<int>& dims) const {
  ops::check_defined(*this, "permute");
  std::string given = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) given += (i ? ", " : "") + std::to_string(dims[i]);
  given += "]";
  if (dims.size() != shape_.size()) {
    throw Error("permute: dims " + given + " has " + std::to_string(dims.size()) +
                " entries but the tensor " + to_string(shape_) + " has " + std::to_string(dim()) +
                " dimensions");
  }
  std::vector<bool> seen(dims.size(), false);
  Shape shape(dims.size()), strides(dims.size());
  for (std::size_t i = 0; i < dims.size(); ++i) {
    const int d = ops::wrap_dim(dims[i], dim(), "permute");
    if (seen[static_cast<std::size_t>(d)]) {
      throw Error("permute: dims " + given + " is not a permutation (dimension " +
                  std::to_string(d) + " repeats)");
    }
    seen[static_cast<std::size_t>(d)] = true;
    shape[i] = shape_[static_cast<std::size_t>(d)];
    strides[i] = strides_[static_cast<std::size_t>(d)];
  }
  return TensorAccess::make_view(storage_, std::move(shape), std::move(strides), offset_, dtype_);
}

Tensor Tensor::T() const {
  ops::check_defined(*this, "T");
  Shape shape(shape_.rbegin(), shape_.rend()), strides(strides_.rbegin(), strides_.rend());
  return TensorAccess::make_view(storage_, std::move(shape), std::move(strides), offset_, dtype_);
}

Tensor Tensor::unsqueeze(int d) const {
  ops::check_defined(*this, "unsqueeze");
  const int n = dim();
  if (d < -n - 1 || d > n) {
    throw Error("unsqueeze: dimension " + std::to_string(d) + " is out of range for shape " +
                to_string(shape_) + " (use " + std::to_string(-n - 1) + " to " + std::to_string(n) +
                ")");
  }
  if (n >= kMaxDims) {
    throw Error("unsqueeze: the tensor " + to_string(shape_) + " already has " +
                std::to_string(kMaxDims) + " dimensions, the most a tensor may have");
  }
  const auto at = static_cast<std::size_t>(d < 0 ? d + n + 1 : d);
  Shape shape = shape_, strides = strides_;
  // Any stride is right for a size-1 dimension; this one keeps a contiguous tensor contiguous.
  const std::int64_t stride = at < shape_.size() ? shape_[at] * strides_[at] : 1;
  shape.insert(shape.begin() + static_cast<std::ptrdiff_t>(at), 1);
  strides.insert(strides.begin() + static_cast<std::ptrdiff_t>(at), stride);
  return TensorAccess::make_view(storage_, std::move(shape), std::move(strides), offset_, dtype_);
}

Tensor Tensor::squeeze(int d) const {
  ops::check_defined(*this, "squeeze");
  if (dim() == 0) return *this;
  const auto at = static_cast<std::size_t>(ops::wrap_dim(d, dim(), "squeeze"));
  if (shape_[at] != 1) {
    throw Error("squeeze: dimension " + std::to_string(d) + " of shape " + to_string(shape_) +
                " has size " + std::to_string(shape_[at]) + ", not 1");
  }
  Shape shape = shape_, strides = strides_;
  shape.erase(shape.begin() + static_cast<std::ptrdiff_t>(at));
  strides.erase(strides.begin() + static_cast<std::ptrdiff_t>(at));
  return TensorAccess::make_view(storage_, std::move(shape), std::move(strides), offset_, dtype_);
}

Tensor Tensor::expand(const Shape& shape) const {
  ops::check_defined(*this, "expand");
  auto fail = [&] {
    throw Error("expand: the tensor " + to_string(shape_) + " cannot be expanded to " +
                to_string(shape) +
                " (numpy broadcasting: sizes aligned from the right must match or be 1; -1 "
                "keeps a size)");
  };
  if (shape.size() < shape_.size() || shape.size() > static_cast<std::size_t>(kMaxDims)) fail();
  const std::size_t lead = shape.size() - shape_.size();
  Shape out(shape.size()), strides(shape.size(), 0);
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i < lead) {
      if (shape[i] < 0) fail();
      out[i] = shape[i];
      continue;
    }
    const std::int64_t have = shape_[i - lead];
    const std::int64_t want = shape[i] == -1 ? have : shape[i];
    if (want != have && have != 1) fail();
    if (want < 0) fail();
    out[i] = want;
    strides[i] = want == have ? strides_[i - lead] : 0;
  }
  return TensorAccess::make_view(storage_, std::move(out), std::move(strides), offset_, dtype_);
}

Tensor Tensor::slice(int d, std::int64_t start, std::int64_t stop, std::int64_t step) const {
  ops::check_defined(*this, "slice");
  if (dim() == 0) throw Error("slice: a 0-d tensor has no dimension to slice");
  const auto at = static_cast<std::size_t>(ops::wrap_dim(d, dim(), "slice"));
  if (step == 0) {
    throw Error(
        "slice: step must not be zero (use a positive step, or a negative one to walk "
        "backwards)");
  }
  const std::int64_t n = shape_[at];
  // numpy's (Python's slice.indices) rules: negative indices count from the end, then indices
  // are clamped to [0, n] for a positive step and to [-1, n - 1] for a negative one, where -1
  // means "before the first element" (so a stop <= -n - 1 runs through index 0).
  const std::int64_t lo = step > 0 ? 0 : -1, hi = step > 0 ? n : n - 1;
  auto clamp = [n, lo, hi](std::int64_t i) {
    if (i < 0) i += n;  // n >= 0, so this cannot overflow
    return std::clamp<std::int64_t>(i, lo, hi);
  };
  const std::int64_t b = clamp(start), e = clamp(stop);
  // Written so that no step, however large either way, overflows.
  std::int64_t len = 0;
  if (step > 0 && e > b) len = (e - b - 1) / step + 1;
  if (step < 0 && b > e) {
    constexpr auto kMax = std::numeric_limits<std::int64_t>::max();
    len = (b - e - 1) / (step < -kMax ? kMax : -step) + 1;
  }
  Shape shape = shape_, strides = strides_;
  shape[at] = len;
  // With one element or none the stride is never used: keep the old one rather than overflow
  // multiplying by a huge step. A negative stride walks the storage backwards from `b`.
  if (len > 1) strides[at] = strides_[at] * step;
  const std::int64_t offset = len == 0 ? offset_ : offset_ + b * strides_[at];
  return TensorAccess::make_view(storage_, std::move(shape), std::move(strides), offset, dtype_);
}

Tensor Tensor::select(int d, std::int64_t i) const {
  ops::check_defined(*this, "select");
  if (dim() == 0) throw Error("select: a 0-d tensor has no dimension to index");
  const auto at = static_cast<std::size_t>(ops::wrap_dim(d, dim(), "select"));
  const std::int64_t n = shape_[at];
  if (i < -n || i >= n) {
    throw Error("select: index " + std::to_string(i) + " is out of range for dimension " +
                std::to_string(d) + " of size " + std::to_string(n) + " (shape " +
                to_string(shape_) + ")");
  }
  if (i < 0) i += n;
  Shape shape = shape_, strides = strides_;
  shape.erase(shape.begin() + static_cast<std::ptrdiff_t>(at));
  strides.erase(strides.begin() + static_cast<std::ptrdiff_t>(at));
  return TensorAccess::make_view(storage_, std::move(shape), std::move(strides),
                                 offset_ + i * strides_[at], dtype_);
}

Tensor Tensor::contiguous() const {
  ops::check_defined(*this, "contiguous");
  return is_contiguous() ? *this : clone();
}

Tensor cat(const std::vector<Tensor>& tensors, int dim) {
  if (tensors.empty()) throw Error("cat: needs at least one tensor");
  for (const auto& t : tensors) ops::check_defined(t, "cat");
  const Tensor& first = tensors.front();
  if (first.dim() == 0) throw Error("cat: 0-d tensors cannot be concatenated (use stack)");
  const int d = ops::wrap_dim(dim, first.dim(), "cat");
  DType dtype = first.dtype();
  std::int64_t total = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    ops::check_same_device("cat", first, t);
    bool ok = t.dim() == first.dim();
    for (int k = 0; ok && k < t.dim(); ++k) {
      if (k != d &&
          t.shape()[static_cast<std::size_t>(k)] != first.shape()[static_cast<std::size_t>(k)])
        ok = false;
    }
    if (!ok) {
      throw Error("cat: shapes " + to_string(first.shape()) + " and " + to_string(t.shape()) +
                  " (tensor " + std::to_string(i) + ") differ outside dimension " +
                  std::to_string(d));
    }
    dtype = promote_types(dtype, t.dtype());
    total += t.shape()[static_cast<std::size_t>(d)];
  }
  Shape shape = first.shape();
  shape[static_cast<std::size_t>(d)] = total;
  Tensor out = ops::new_tensor(std::move(shape), dtype, first.device());
  // One tracked copy per input into its slice of the output, all on the current stream.
  std::int64_t at = 0;
  for (const auto& t : tensors) {
    const std::int64_t n = t.shape()[static_cast<std::size_t>(d)];
    if (n > 0) {
      Tensor part = out.slice(d, at, at + n);
      ops::enqueue_copy(part, t, "cat");
    }
    at += n;
  }
  return out;
}

Tensor index_select(const Tensor& a, int dim, const Tensor& index) {
  ops::check_defined(a, "index_select");
  ops::check_defined(index, "index_select");
  ops::check_same_device("index_select", a, index);
  if (a.dim() == 0) throw Error("index_select: a 0-d tensor has no dimension to index");
  const int d = ops::wrap_dim(dim, a.dim(), "index_select");
  if ((index.dtype() != DType::Int64 && index.dtype() != DType::Int32) || index.dim() > 1) {
    throw Error("index_select: the index is " + ops::describe(index) +
                "; it must be a 1-D int64 or int32 tensor (convert with to(" +
                api::enumerator("DType", "Int64") + "))");
  }
  const auto at = static_cast<std::size_t>(d);
  const std::int64_t count = index.numel(), size = a.shape()[at];
  Shape shape = a.shape();
  shape[at] = count;
  Tensor out = ops::new_tensor(shape, a.dtype(), a.device());
  if (count == 0) return out;
  // One slice per index entry: the other dimensions, walked with each tensor's strides.
  Shape slice_shape = a.shape(), a_strides = a.strides(), out_strides = out.strides();
  const std::int64_t a_step = a_strides[at], out_step = out_strides[at];
  slice_shape.erase(slice_shape.begin() + d);
  a_strides.erase(a_strides.begin() + d);
  out_strides.erase(out_strides.begin() + d);
  const void* pa = TensorAccess::storage(a)->data();
  const void* pi = TensorAccess::storage(index)->data();
  void* po = TensorAccess::storage(out)->data();
  const std::int64_t a_off = a.storage_offset(), i_off = index.storage_offset();
  const std::int64_t i_stride = index.dim() == 1 ? index.strides()[0] : 0;
  const DType dtype = a.dtype(), i_type = index.dtype();
  ops::submit("index_select", a.device(), {&a, &index}, {&out},
              [pa, pi, po, a_off, i_off, i_stride, dtype, i_type, count, size, a_step, out_step,
               slice_shape, a_strides, out_strides] {
                // The positions, checked before anything is written.
                std::vector<std::int64_t> pos(static_cast<std::size_t>(count));
                for (std::int64_t k = 0; k < count; ++k) {
                  const std::int64_t at_k = i_off + k * i_stride;
                  std::int64_t v = i_type == DType::Int64
                                       ? static_cast<const std::int64_t*>(pi)[at_k]
                                       : static_cast<const std::int32_t*>(pi)[at_k];
                  if (v < -size || v >= size) {
                    throw Error("index_select: index " + std::to_string(v) + " (entry " +
                                std::to_string(k) + ") is out of range for a dimension of size " +
                                std::to_string(size) + " (use -" + std::to_string(size) + " to " +
                                std::to_string(size - 1) + ")");
                  }
                  pos[static_cast<std::size_t>(k)] = v < 0 ? v + size : v;
                }
                ops::dispatch_all(dtype, [&](auto tag) {
                  using T = decltype(tag);
                  const T* in = static_cast<const T*>(pa) + a_off;
                  T* o = static_cast<T*>(po);
                  const auto loop = ops::make_loop<2>(slice_shape, {&out_strides, &a_strides});
                  auto gather = [&](std::int64_t k0, std::int64_t k1) {
                    for (std::int64_t k = k0; k < k1; ++k) {
                      T* dst = o + k * out_step;
                      const T* src = in + pos[static_cast<std::size_t>(k)] * a_step;
                      ops::for_each_run(loop, 0, loop.numel,
                                        [&](const auto& off, std::int64_t n, const auto& inc) {
                                          for (std::int64_t i = 0; i < n; ++i)
                                            dst[off[0] + i * inc[0]] = src[off[1] + i * inc[1]];
                                        });
                    }
                  };
                  const std::int64_t grain = std::max<std::int64_t>(
                      1, ops::kElementGrain / std::max<std::int64_t>(loop.numel, 1));
                  if (count <= grain) {
                    gather(0, count);
                  } else {
                    runtime::parallel_for(0, count, grain, gather);
                  }
                });
              });
  return out;
}

Tensor stack(const std::vector<Tensor>& tensors, int dim) {
  if (tensors.empty()) throw Error("stack: needs at least one tensor");
  for (const auto& t : tensors) ops::check_defined(t, "stack");
  const Tensor& first = tensors.front();
  for (std::size_t i = 1; i < tensors.size(); ++i) {
    if (tensors[i].shape() != first.shape()) {
      throw Error("stack: shapes " + to_string(first.shape()) + " and " +
                  to_string(tensors[i].shape()) + " (tensor " + std::to_string(i) +
                  ") differ; stack needs equal shapes");
    }
  }
  const int n = first.dim() + 1;
  if (dim < -n || dim >= n) {
    throw Error("stack: dimension " + std::to_string(dim) + " is out of range for " +
                std::to_string(first.dim()) + "-d tensors (use " + std::to_string(-n) + " to " +
                std::to_string(n - 1) + ")");
  }
  std::vector<Tensor> parts;
  parts.reserve(tensors.size());
  for (const auto& t : tensors) parts.push_back(t.unsqueeze(dim));
  return cat(parts, dim);
}

}  // namespace streamrt
