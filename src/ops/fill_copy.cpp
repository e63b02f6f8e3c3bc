// The fill and copy kernels, with dtype conversion and broadcasting of the source.
#include "fill_copy.hpp"

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "kernels.hpp"
#include "layout.hpp"
#include "simd_kernels.hpp"
#include "storage.hpp"
#include "tensor_access.hpp"
#include "tracking.hpp"

namespace streamrt::ops {

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

Tensor as_dtype(const Tensor& t, DType dtype) {
  return t.dtype() == dtype ? t : t.to(dtype);
}

}  // namespace streamrt::ops
