// Reductions (sum, mean, max, min, argmax, argmin; all elements or over one dimension) and
// softmax / log_softmax. Over a dimension, each output element reduces one strided line of the
// input, in order, so results do not depend on the worker count.
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "checks.hpp"
#include "creation.hpp"
#include "kernels.hpp"
#include "layout.hpp"
#include "op_list.hpp"
#include "reduce_kernels.hpp"
#include "storage.hpp"
#include "streamrt/error.hpp"
#include "streamrt/ops.hpp"
#include "tensor_access.hpp"
#include "tracking.hpp"

namespace streamrt {
namespace ops {
namespace {

using detail::TensorAccess;

DType sum_dtype(DType d) {
  return is_floating(d) ? d : DType::Int64;
}

void check_mean(const Tensor& a) {
  if (!is_floating(a.dtype())) {
    throw Error(std::string("mean: the tensor is ") + describe(a) +
                "; mean needs a floating dtype (convert with to(" +
                api::enumerator("DType", "Float64") + "))");
  }
}

Tensor reduce_all(const char* name, const Tensor& input, bool mean) {
  check_defined(input, name);
  if (mean) check_mean(input);
  const Tensor a = input.contiguous();
  Tensor out = new_tensor({}, sum_dtype(a.dtype()), a.device());
  const void* pa = TensorAccess::storage(a)->data();
  void* po = TensorAccess::storage(out)->data();
  const DType dtype = a.dtype();
  const std::int64_t n = a.numel(), offset = a.storage_offset();
  submit(name, a.device(), {&a}, {&out}, [pa, po, dtype, n, offset, mean] {
    dispatch_all(dtype, [&](auto tag) {
      using T = decltype(tag);
      const T* p = static_cast<const T*>(pa) + offset;
      if constexpr (std::is_floating_point_v<T>) {
        double total = sum_contiguous<T, double>(p, n);
        if (mean) total = n == 0 ? std::numeric_limits<double>::quiet_NaN() : total / n;
        *static_cast<T*>(po) = static_cast<T>(total);
      } else {
        *static_cast<std::int64_t*>(po) = sum_contiguous<T, std::int64_t>(p, n);
      }
    });
  });
  return out;
}

// ---- over one dimension ------------------------------------------------------------------------

// Lines of `shape` along `dim`, a run of `count` lines at a time: for each run, fn(in_offset,
// out_offset, count, in_step, out_step), the lines' starts being in_offset + i * in_step
// (i < count) with offsets relative to each tensor's first element. `out_strides` are the
// output's strides over `shape`'s dimensions (any value at `dim`).
template <class Fn>
void for_each_line_run(const Shape& shape, const Shape& in_strides, const Shape& out_strides,
                       int dim, Fn&& fn) {
  Shape outer = shape;
  const std::int64_t len = shape[static_cast<std::size_t>(dim)];
  outer[static_cast<std::size_t>(dim)] = 1;
  const auto loop = make_loop<2>(outer, {&in_strides, &out_strides});
  const std::int64_t grain =
      std::max<std::int64_t>(1, kElementGrain / std::max<std::int64_t>(len, 1));
  parallel_runs(
      loop,
      [&](const auto& off, std::int64_t count, const auto& inc) {
        fn(off[0], off[1], count, inc[0], inc[1]);
      },
      grain);
}

// As for_each_line_run, one line at a time: fn(in_offset, out_offset).
template <class Fn>
void for_each_line(const Shape& shape, const Shape& in_strides, const Shape& out_strides, int dim,
                   Fn&& fn) {
  for_each_line_run(shape, in_strides, out_strides, dim,
                    [&](std::int64_t in, std::int64_t out, std::int64_t count, std::int64_t in_step,
                        std::int64_t out_step) {
                      for (std::int64_t i = 0; i < count; ++i) {
                        fn(in + i * in_step, out + i * out_step);
                      }
                    });
}

// Sums (or means) along `dim`, in index order per output (deterministic). When the lines lie
// side by side in memory (reducing an outer dimension, e.g. dim 0 of a matrix), a run of lines
// is summed row by row into a buffer, so the reads are sequential instead of one stride-`step`
// walk per line. Acc: double for floats, uint64 (wrapping, as torch) for integers and bool.
template <class T, class Acc, class Out>
void sum_lines(const T* in, Out* o, const Shape& shape, const Shape& strides,
               const Shape& out_strides, int dim, bool mean) {
  const std::int64_t len = shape[static_cast<std::size_t>(dim)];
  const std::int64_t step = strides[static_cast<std::size_t>(dim)];
  auto finish = [&](Acc acc) -> Out {
    if constexpr (std::is_floating_point_v<Acc>) {
      if (mean) acc = len == 0 ? std::numeric_limits<Acc>::quiet_NaN() : acc / len;
    }
    return static_cast<Out>(acc);
  };
  for_each_line_run(
      shape, strides, out_strides, dim,
      [&](std::int64_t io, std::int64_t oo, std::int64_t count, std::int64_t ii, std::int64_t oi) {
        if (count > 1 && len > 1 && std::abs(ii) < std::abs(step)) {
          std::vector<Acc> acc(static_cast<std::size_t>(count), Acc{0});
          for (std::int64_t k = 0; k < len; ++k) {
            const T* row = in + io + k * step;
            for (std::int64_t i = 0; i < count; ++i) {
              acc[static_cast<std::size_t>(i)] += static_cast<Acc>(row[i * ii]);
            }
          }
          for (std::int64_t i = 0; i < count; ++i) {
            o[oo + i * oi] = finish(acc[static_cast<std::size_t>(i)]);
          }
          return;
        }
        for (std::int64_t i = 0; i < count; ++i) {
          Acc acc{0};
          const T* line = in + io + i * ii;
          for (std::int64_t k = 0; k < len; ++k) acc += static_cast<Acc>(line[k * step]);
          o[oo + i * oi] = finish(acc);
        }
      });
}

#define STREAMRT_ENUMERATOR(Name, name) k##Name,
enum class Reduce {
  STREAMRT_SUM_REDUCTIONS(STREAMRT_ENUMERATOR) STREAMRT_SELECT_REDUCTIONS(STREAMRT_ENUMERATOR)
};
#undef STREAMRT_ENUMERATOR

const char* reduce_name(Reduce r) {
#define STREAMRT_CASE(Name, name) \
  case Reduce::k##Name:           \
    return #name;
  switch (r) { STREAMRT_SUM_REDUCTIONS(STREAMRT_CASE) STREAMRT_SELECT_REDUCTIONS(STREAMRT_CASE) }
#undef STREAMRT_CASE
  return "unknown";
}

// The reduced shape: `dim` removed, or kept with size 1.
Shape reduced_shape(const Shape& shape, int dim, bool keepdim) {
  Shape out = shape;
  if (keepdim) {
    out[static_cast<std::size_t>(dim)] = 1;
  } else {
    out.erase(out.begin() + dim);
  }
  return out;
}

// Index of the largest (kMax/kArgmax) or smallest element of a line; the first NaN wins (NaN
// propagates, as numpy and torch), else the first of equal extremes.
template <class T>
std::int64_t extreme_index(const T* p, std::int64_t len, std::int64_t stride, bool largest) {
  std::int64_t best = 0;
  T v = p[0];
  if constexpr (std::is_floating_point_v<T>) {
    if (v != v) return 0;
  }
  for (std::int64_t i = 1; i < len; ++i) {
    const T x = p[i * stride];
    if constexpr (std::is_floating_point_v<T>) {
      if (x != x) return i;
    }
    if (largest ? x > v : x < v) {
      v = x;
      best = i;
    }
  }
  return best;
}

Tensor reduce_dim(Reduce r, const Tensor& a, int dim_arg, bool keepdim) {
  const char* name = reduce_name(r);
  check_defined(a, name);
  if (r == Reduce::kMean) check_mean(a);
  const bool arg = r == Reduce::kArgmax || r == Reduce::kArgmin;
  if ((r != Reduce::kSum) && a.dtype() == DType::Bool) {
    throw Error(std::string(name) + ": the tensor is " + describe(a) +
                "; convert it to a numeric dtype with to()");
  }
  if (a.dim() == 0) {
    // A 0-d tensor reduces over its only element (dim 0 or -1), as torch.
    wrap_dim(dim_arg, 0, name);
    return reduce_dim(r, a.reshape({1}), 0, false);
  }
  const int dim = wrap_dim(dim_arg, a.dim(), name);
  const std::int64_t len = a.shape()[static_cast<std::size_t>(dim)];
  if (len == 0 && r != Reduce::kSum && r != Reduce::kMean) {
    throw Error(std::string(name) + ": dimension " + std::to_string(dim_arg) + " of shape " +
                to_string(a.shape()) + " is empty; " + name + " needs at least one element");
  }
  const DType out_dtype = arg ? DType::Int64 : r == Reduce::kSum ? sum_dtype(a.dtype()) : a.dtype();
  Tensor out = new_tensor(reduced_shape(a.shape(), dim, keepdim), out_dtype, a.device());
  // Output strides over a's dimensions: those of the keepdim shape (contiguous).
  const Shape out_strides = contiguous_strides(reduced_shape(a.shape(), dim, true));
  const void* pa = TensorAccess::storage(a)->data();
  void* po = TensorAccess::storage(out)->data();
  submit(
      name, a.device(), {&a}, {&out},
      [pa, po, r, dim, len, out_strides, shape = a.shape(), strides = a.strides(),
       offset = a.storage_offset(), dtype = a.dtype()] {
        const std::int64_t step = strides[static_cast<std::size_t>(dim)];
        dispatch_all(dtype, [&](auto tag) {
          using T = decltype(tag);
          const T* in = static_cast<const T*>(pa) + offset;
          if (r == Reduce::kSum || r == Reduce::kMean) {
            if constexpr (std::is_floating_point_v<T>) {
              sum_lines<T, double>(in, static_cast<T*>(po), shape, strides, out_strides, dim,
                                   r == Reduce::kMean);
            } else {
              sum_lines<T, std::uint64_t>(in, static_cast<std::int64_t*>(po), shape, strides,
                                          out_strides, dim, false);
            }
            return;
          }
          if constexpr (!std::is_same_v<T, bool>) {
            const bool largest = r == Reduce::kMax || r == Reduce::kArgmax;
            if (r == Reduce::kArgmax || r == Reduce::kArgmin) {
              auto* o = static_cast<std::int64_t*>(po);
              for_each_line(shape, strides, out_strides, dim, [&](std::int64_t i, std::int64_t j) {
                o[j] = extreme_index(in + i, len, step, largest);
              });
            } else {
              T* o = static_cast<T*>(po);
              for_each_line(shape, strides, out_strides, dim, [&](std::int64_t i, std::int64_t j) {
                o[j] = in[i + extreme_index(in + i, len, step, largest) * step];
              });
            }
          }
        });
      });
  return out;
}

// Over all elements: the flattened tensor's dimension 0.
Tensor reduce_flat(Reduce r, const Tensor& a) {
  check_defined(a, reduce_name(r));
  if (a.numel() == 0) {
    throw Error(std::string(reduce_name(r)) + ": the tensor " + to_string(a.shape()) +
                " is empty; " + reduce_name(r) + " needs at least one element");
  }
  return reduce_dim(r, a.reshape({-1}), 0, false);
}

Tensor softmax_impl(const char* name, const Tensor& a, int dim_arg, bool log) {
  check_defined(a, name);
  if (!is_floating(a.dtype())) {
    throw Error(std::string(name) + ": the tensor is " + describe(a) +
                "; it needs a floating dtype (convert with to(" +
                api::enumerator("DType", "Float32") + "))");
  }
  if (a.dim() == 0) {
    wrap_dim(dim_arg, 0, name);
    return softmax_impl(name, a.reshape({1}), 0, log).reshape({});
  }
  const int dim = wrap_dim(dim_arg, a.dim(), name);
  Tensor out = new_tensor(a.shape(), a.dtype(), a.device());
  const void* pa = TensorAccess::storage(a)->data();
  void* po = TensorAccess::storage(out)->data();
  submit(name, a.device(), {&a}, {&out},
         [pa, po, dim, log, shape = a.shape(), strides = a.strides(), offset = a.storage_offset(),
          out_strides = out.strides(), dtype = a.dtype()] {
           const std::int64_t len = shape[static_cast<std::size_t>(dim)];
           const std::int64_t si = strides[static_cast<std::size_t>(dim)];
           const std::int64_t so_step = out_strides[static_cast<std::size_t>(dim)];
           dispatch_floating(dtype, [&](auto tag) {
             using T = decltype(tag);
             const T* in = static_cast<const T*>(pa) + offset;
             T* o = static_cast<T*>(po);
             for_each_line(shape, strides, out_strides, dim, [&](std::int64_t i, std::int64_t j) {
               if (len == 0) return;
               // Shift by the largest element so exp never overflows.
               T m = in[i];
               for (std::int64_t k = 1; k < len; ++k) {
                 const T x = in[i + k * si];
                 if (x > m || x != x) m = x;
                 if (m != m) break;
               }
               if (std::isinf(m) && m < 0) m = 0;  // all -inf: avoid inf - inf
               // One exp per element, in T (float32 exp is accurate to an ulp or so); the sum in
               // double. softmax keeps the exps in the output and scales them in a last pass.
               double total = 0;
               if (log) {
                 for (std::int64_t k = 0; k < len; ++k) total += std::exp(in[i + k * si] - m);
                 const double shift = static_cast<double>(m) + std::log(total);
                 for (std::int64_t k = 0; k < len; ++k) {
                   o[j + k * so_step] = static_cast<T>(static_cast<double>(in[i + k * si]) - shift);
                 }
               } else {
                 for (std::int64_t k = 0; k < len; ++k) {
                   const T e = std::exp(in[i + k * si] - m);
                   o[j + k * so_step] = e;
                   total += e;
                 }
                 const T scale = static_cast<T>(1.0 / total);
                 for (std::int64_t k = 0; k < len; ++k) o[j + k * so_step] *= scale;
               }
             });
           });
         });
  return out;
}

}  // namespace
}  // namespace ops

using ops::Reduce;

#define STREAMRT_SUM(Name, name)                                        \
  Tensor name(const Tensor& a) {                                        \
    return ops::reduce_all(#name, a, Reduce::k##Name == Reduce::kMean); \
  }
#define STREAMRT_SELECT(Name, name)              \
  Tensor name(const Tensor& a) {                 \
    return ops::reduce_flat(Reduce::k##Name, a); \
  }
#define STREAMRT_DIM(Name, name)                              \
  Tensor name(const Tensor& a, int dim, bool keepdim) {       \
    return ops::reduce_dim(Reduce::k##Name, a, dim, keepdim); \
  }
STREAMRT_SUM_REDUCTIONS(STREAMRT_SUM)
STREAMRT_SELECT_REDUCTIONS(STREAMRT_SELECT)
STREAMRT_SUM_REDUCTIONS(STREAMRT_DIM)
STREAMRT_SELECT_REDUCTIONS(STREAMRT_DIM)
#undef STREAMRT_SUM
#undef STREAMRT_SELECT
#undef STREAMRT_DIM

Tensor softmax(const Tensor& a, int dim) {
  return ops::softmax_impl("softmax", a, dim, false);
}
Tensor log_softmax(const Tensor& a, int dim) {
  return ops::softmax_impl("log_softmax", a, dim, true);
}

}  // namespace streamrt
