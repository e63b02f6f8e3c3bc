// Arithmetic, reductions and comparisons. Each op checks its arguments at the call (Error naming
// both shapes), then submits a kernel on the current stream through the tracker (tracking.cpp).
#include "streamrt/ops.hpp"

#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <mutex>
#include <string>
#include <type_traits>

#include "kernels.hpp"
#include "simd_kernels.hpp"
#include "storage.hpp"
#include "streamrt/error.hpp"
#include "streamrt/event.hpp"

namespace streamrt {
namespace ops {
namespace {

using detail::TensorAccess;

std::string describe(const Tensor& t) {
  return std::string(to_string(t.dtype())) + " " + to_string(t.shape());
}

void check_same_device(const char* op, const Tensor& a, const Tensor& b) {
  if (a.device() != b.device()) {
    throw Error(std::string(op) + ": tensors are on different devices (" + a.device().str() +
                " and " + b.device().str() + ")");
  }
}

void check_same_dtype(const char* op, const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype()) {
    throw Error(std::string(op) + ": dtypes differ: " + describe(a) + " and " + describe(b) +
                " (convert one with to())");
  }
}

void check_binary(const char* op, const Tensor& a, const Tensor& b) {
  check_defined(a, op);
  check_defined(b, op);
  check_same_device(op, a, b);
  if (a.shape() != b.shape()) {
    throw Error(std::string(op) + ": shapes differ: " + to_string(a.shape()) + " and " +
                to_string(b.shape()) + " (element-wise ops need equal shapes; reshape first)");
  }
  check_same_dtype(op, a, b);
}

// ---- element-wise ------------------------------------------------------------------------------

enum class BinOp { kAdd, kSub, kMul, kDiv };

template <class T>
T apply(BinOp op, T x, T y) {
  if constexpr (std::is_floating_point_v<T>) {
    switch (op) {
      case BinOp::kAdd:
        return x + y;
      case BinOp::kSub:
        return x - y;
      case BinOp::kMul:
        return x * y;
      case BinOp::kDiv:
        break;
    }
    return x / y;
  } else {
    // Integers wrap on overflow (two's complement), as torch does; done in unsigned arithmetic
    // because signed overflow is undefined behaviour.
    using U = std::make_unsigned_t<T>;
    const U ux = static_cast<U>(x), uy = static_cast<U>(y);
    switch (op) {
      case BinOp::kAdd:
        return static_cast<T>(static_cast<U>(ux + uy));
      case BinOp::kSub:
        return static_cast<T>(static_cast<U>(ux - uy));
      case BinOp::kMul:
        return static_cast<T>(static_cast<U>(ux * uy));
      case BinOp::kDiv:
        break;
    }
    if (y == 0) {
      throw Error(
          "integer division by zero in div (the divisor tensor has a zero; use a floating "
          "dtype for inf/nan results)");
    }
    if (y == -1) return static_cast<T>(static_cast<U>(U{0} - ux));  // MIN / -1 wraps
    return static_cast<T>(x / y);
  }
}

const char* bin_name(BinOp op) {
  switch (op) {
    case BinOp::kAdd:
      return "add";
    case BinOp::kSub:
      return "sub";
    case BinOp::kMul:
      return "mul";
    case BinOp::kDiv:
      break;
  }
  return "div";
}

template <class T>
void binary_loop(BinOp op, const T* a, const T* b, T* out, std::int64_t n) {
  if constexpr (std::is_floating_point_v<T>) {
    const bool nt = n * static_cast<std::int64_t>(sizeof(T)) >= simd::kStreamBytes;
    parallel_ranges(n, [&](std::int64_t i0, std::int64_t i1) {
      simd::binary(static_cast<simd::Binary>(op), a + i0, b + i0, out + i0, i1 - i0, nt);
    });
  } else {
    parallel_elements(n, [&](std::int64_t i) { out[i] = apply(op, a[i], b[i]); });
  }
}

Tensor binary(BinOp op, const Tensor& a, const Tensor& b) {
  const char* name = bin_name(op);
  check_binary(name, a, b);
  Tensor out = new_tensor(a.shape(), a.dtype(), a.device());
  auto sa = TensorAccess::storage(a), sb = TensorAccess::storage(b),
       so = TensorAccess::storage(out);
  const DType dtype = a.dtype();
  const std::int64_t n = a.numel();
  submit(name, a.device(), {&a, &b}, {&out}, [sa, sb, so, dtype, n, op] {
    dispatch(dtype, [&](auto tag) {
      using T = decltype(tag);
      binary_loop<T>(op, static_cast<const T*>(sa->data()), static_cast<const T*>(sb->data()),
                     static_cast<T*>(so->data()), n);
    });
  });
  return out;
}

// a (op) s, or s (op) a when `reversed`.
Tensor binary_scalar(BinOp op, const Tensor& a, double s, bool reversed) {
  const char* name = bin_name(op);
  check_defined(a, name);
  if (!is_floating(a.dtype())) {
    if (!std::isfinite(s) || s != std::trunc(s)) {
      throw Error(std::string(name) + ": the scalar " + std::to_string(s) +
                  " is not an integer, but the tensor is " + describe(a) +
                  "; convert the tensor with to(DType::Float64) first");
    }
    if (op == BinOp::kDiv && !reversed && s == 0) {
      throw Error(std::string(name) + ": integer division by zero (tensor " + describe(a) +
                  " divided by 0); use a floating dtype for inf/nan results");
    }
  }
  Tensor out = new_tensor(a.shape(), a.dtype(), a.device());
  auto sa = TensorAccess::storage(a), so = TensorAccess::storage(out);
  const DType dtype = a.dtype();
  const std::int64_t n = a.numel();
  submit(name, a.device(), {&a}, {&out}, [sa, so, dtype, n, op, s, reversed] {
    dispatch(dtype, [&](auto tag) {
      using T = decltype(tag);
      const T v = from_double<T>(s);
      const T* in = static_cast<const T*>(sa->data());
      T* o = static_cast<T*>(so->data());
      if constexpr (std::is_floating_point_v<T>) {
        const bool nt = n * static_cast<std::int64_t>(sizeof(T)) >= simd::kStreamBytes;
        parallel_ranges(n, [&](std::int64_t i0, std::int64_t i1) {
          simd::binary_scalar(static_cast<simd::Binary>(op), in + i0, v, reversed, o + i0, i1 - i0,
                              nt);
        });
      } else if (reversed) {
        parallel_elements(n, [&](std::int64_t i) { o[i] = apply(op, v, in[i]); });
      } else {
        parallel_elements(n, [&](std::int64_t i) { o[i] = apply(op, in[i], v); });
      }
    });
  });
  return out;
}

// ---- reductions
// ----------------------------------------------------------------------------------

// Elements per partial sum. Fixed (not derived from the worker count), so the rounding of float
// sums is the same whatever the pool size.
constexpr std::int64_t kSumBlock = std::int64_t{1} << 16;

// Sum of n elements: double for floats, int64 (wrapping) for integers; blocks summed in order.
template <class T, class Acc>
Acc blocked_sum(const T* p, std::int64_t n) {
  const std::int64_t blocks = (n + kSumBlock - 1) / kSumBlock;
  std::vector<Acc> partial(static_cast<std::size_t>(blocks), Acc{0});
  auto block_sum = [&](std::int64_t blk) {
    const std::int64_t begin = blk * kSumBlock, end = std::min(n, begin + kSumBlock);
    Acc acc{0};
    if constexpr (std::is_floating_point_v<Acc>) {
      acc = simd::sum_block(p + begin, end - begin);
    } else {
      std::uint64_t u = 0;
      for (std::int64_t i = begin; i < end; ++i) u += static_cast<std::uint64_t>(p[i]);
      acc = static_cast<Acc>(u);
    }
    partial[static_cast<std::size_t>(blk)] = acc;
  };
  if (blocks == 1) {
    block_sum(0);
  } else {
    cpu::parallel_for(blocks, 1, [&](std::int64_t b0, std::int64_t b1) {
      for (std::int64_t blk = b0; blk < b1; ++blk) block_sum(blk);
    });
  }
  if constexpr (std::is_floating_point_v<Acc>) {
    Acc total{0};
    for (Acc v : partial) total += v;
    return total;
  } else {
    std::uint64_t total = 0;
    for (Acc v : partial) total += static_cast<std::uint64_t>(v);
    return static_cast<Acc>(total);
  }
}

Tensor reduce(const char* name, const Tensor& a, bool mean) {
  check_defined(a, name);
  if (mean && !is_floating(a.dtype())) {
    throw Error(std::string("mean: the tensor is ") + describe(a) +
                "; mean needs a floating dtype (convert with to(DType::Float64))");
  }
  const DType out_dtype = is_floating(a.dtype()) ? a.dtype() : DType::Int64;
  Tensor out = new_tensor({}, out_dtype, a.device());
  auto sa = TensorAccess::storage(a), so = TensorAccess::storage(out);
  const DType dtype = a.dtype();
  const std::int64_t n = a.numel();
  submit(name, a.device(), {&a}, {&out}, [sa, so, dtype, n, mean] {
    dispatch(dtype, [&](auto tag) {
      using T = decltype(tag);
      const T* p = static_cast<const T*>(sa->data());
      if constexpr (std::is_floating_point_v<T>) {
        double total = blocked_sum<T, double>(p, n);
        if (mean) total = n == 0 ? std::numeric_limits<double>::quiet_NaN() : total / n;
        *static_cast<T*>(so->data()) = static_cast<T>(total);
      } else {
        *static_cast<std::int64_t*>(so->data()) = blocked_sum<T, std::int64_t>(p, n);
      }
    });
  });
  return out;
}

// Runs `pred(i)` for all i on the current stream and returns whether it held everywhere; waits.
template <class Pred>
bool all_of_on_stream(const char* name, const Tensor& a, const Tensor& b, Pred pred) {
  auto result = std::make_shared<bool>(false);
  auto sa = TensorAccess::storage(a), sb = TensorAccess::storage(b);
  const std::int64_t n = a.numel();
  Stream s = submit(name, a.device(), {&a, &b}, {}, [sa, sb, n, result, pred] {
    const std::int64_t blocks = (n + kElementGrain - 1) / kElementGrain;
    std::atomic<bool> ok{true};
    auto check = [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t i = begin; i < end; ++i) {
        if (!pred(sa->data(), sb->data(), i)) {
          ok.store(false, std::memory_order_relaxed);  // read after the join (which orders it)
          return;
        }
      }
    };
    if (blocks <= 1) {
      check(0, n);
    } else {
      cpu::parallel_for(n, kElementGrain, check);
    }
    *result = ok.load(std::memory_order_relaxed);
  });
  // The answer is ready when the stream reaches this point; the event's completion publishes it.
  Event done;
  done.record(s);
  done.synchronize();
  return *result;
}

// ---- matmul ------------------------------------------------------------------------------------

// Products smaller than this many multiply-adds (about 320^3) run as one BLAS call on the
// stream's worker. Below it, parallelism comes from streams (a 256x256 product per stream keeps one
// core busy, so two streams double throughput); splitting would make one stream take both cores in
// small slices, with extra hand-offs and repeated packing of B (see docs/performance.md).
constexpr double kSplitMacs = 32.0 * 1024 * 1024;
// Fewest rows per block when splitting.
constexpr std::int64_t kMinRows = 32;

std::once_flag g_blas_init;

// OpenBLAS must not start its own threads inside our workers: the pool is the only source of
// parallelism (no oversubscription). Process-wide in OpenBLAS 0.3.21 (no per-thread setting).
void init_blas() {
  std::call_once(g_blas_init, [] { openblas_set_num_threads(1); });
}

template <class T>
void gemm_rows(const T* a, const T* b, T* c, std::int64_t m, std::int64_t n, std::int64_t k) {
  const auto M = static_cast<blasint>(m), N = static_cast<blasint>(n), K = static_cast<blasint>(k);
  if constexpr (std::is_same_v<T, float>) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, a, K, b, N, 0.0f, c, N);
  } else {
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0, a, K, b, N, 0.0, c, N);
  }
}

// C[m,n] = A[m,k] B[k,n], split into row blocks across the pool when large.
template <class T>
void gemm(const T* a, const T* b, T* c, std::int64_t m, std::int64_t n, std::int64_t k) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    std::fill(c, c + m * n, T{0});
    return;
  }
  const int workers = cpu::parallel_workers();
  const double macs = static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  if (workers <= 1 || macs < kSplitMacs || m < 2 * kMinRows || cpu::in_parallel_region()) {
    gemm_rows(a, b, c, m, n, k);
    return;
  }
  // One block per worker: each block re-packs B, so more blocks cost more than they balance.
  const std::int64_t blocks = std::min<std::int64_t>(workers, m / kMinRows);
  const std::int64_t rows = (m + blocks - 1) / blocks;
  cpu::parallel_for(
      m, rows,
      [&](std::int64_t r0, std::int64_t r1) {
        gemm_rows(a + r0 * k, b, c + r0 * n, r1 - r0, n, k);
      },
      blocks);
}

template <class T>
void batched_gemm(const T* a, const T* b, T* c, std::int64_t batch, std::int64_t a_stride,
                  std::int64_t b_stride, std::int64_t m, std::int64_t n, std::int64_t k) {
  const double macs = static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  if (batch == 1 || macs >= kSplitMacs) {
    for (std::int64_t i = 0; i < batch; ++i)
      gemm(a + i * a_stride, b + i * b_stride, c + i * m * n, m, n, k);
    return;
  }
  // Small products: spread whole products over the pool.
  const auto grain = static_cast<std::int64_t>(std::max(1.0, kSplitMacs / std::max(macs, 1.0)));
  cpu::parallel_for(batch, grain, [&](std::int64_t i0, std::int64_t i1) {
    for (std::int64_t i = i0; i < i1; ++i)
      gemm(a + i * a_stride, b + i * b_stride, c + i * m * n, m, n, k);
  });
}

}  // namespace
}  // namespace ops

Tensor matmul(const Tensor& a, const Tensor& b) {
  using ops::TensorAccess;
  ops::check_defined(a, "matmul");
  ops::check_defined(b, "matmul");
  ops::check_same_device("matmul", a, b);
  if (a.dim() < 2 || a.dim() > 3 || b.dim() < 2 || b.dim() > 3) {
    throw Error("matmul: shapes " + to_string(a.shape()) + " and " + to_string(b.shape()) +
                ": operands must be 2-D [m,k]x[k,n] or batched 3-D [b,m,k]x[b,k,n]");
  }
  const std::int64_t m = a.size(-2), k = a.size(-1), k2 = b.size(-2), n = b.size(-1);
  if (k != k2) {
    throw Error("matmul: shapes " + to_string(a.shape()) + " and " + to_string(b.shape()) +
                " cannot be multiplied (inner sizes " + std::to_string(k) + " and " +
                std::to_string(k2) + " differ)");
  }
  std::int64_t batch = 1;
  if (a.dim() == 3) batch = a.size(0);
  if (b.dim() == 3) {
    if (a.dim() == 3 && b.size(0) != batch) {
      throw Error("matmul: shapes " + to_string(a.shape()) + " and " + to_string(b.shape()) +
                  " have different batch sizes (" + std::to_string(batch) + " and " +
                  std::to_string(b.size(0)) + ")");
    }
    batch = b.size(0);
  }
  ops::check_same_dtype("matmul", a, b);
  if (!is_floating(a.dtype())) {
    throw Error("matmul: " + ops::describe(a) + " x " + ops::describe(b) +
                ": matmul supports float32 and float64 (convert with to())");
  }
  constexpr auto kBlasMax = static_cast<std::int64_t>(std::numeric_limits<blasint>::max());
  if (m > kBlasMax || n > kBlasMax || k > kBlasMax) {
    throw Error("matmul: shapes " + to_string(a.shape()) + " and " + to_string(b.shape()) +
                " exceed the BLAS index range (32-bit)");
  }
  Shape out_shape = a.dim() == 3 || b.dim() == 3 ? Shape{batch, m, n} : Shape{m, n};
  Tensor out = ops::new_tensor(std::move(out_shape), a.dtype(), a.device());
  auto sa = TensorAccess::storage(a), sb = TensorAccess::storage(b),
       so = TensorAccess::storage(out);
  const std::int64_t a_stride = a.dim() == 3 ? m * k : 0, b_stride = b.dim() == 3 ? k * n : 0;
  const DType dtype = a.dtype();
  ops::init_blas();
  ops::submit("matmul", a.device(), {&a, &b}, {&out},
              [sa, sb, so, dtype, batch, a_stride, b_stride, m, n, k] {
                if (dtype == DType::Float32) {
                  ops::batched_gemm(
                      static_cast<const float*>(sa->data()), static_cast<const float*>(sb->data()),
                      static_cast<float*>(so->data()), batch, a_stride, b_stride, m, n, k);
                } else {
                  ops::batched_gemm(static_cast<const double*>(sa->data()),
                                    static_cast<const double*>(sb->data()),
                                    static_cast<double*>(so->data()), batch, a_stride, b_stride, m,
                                    n, k);
                }
              });
  return out;
}

Tensor add(const Tensor& a, const Tensor& b) {
  return ops::binary(ops::BinOp::kAdd, a, b);
}
Tensor add(const Tensor& a, double s) {
  return ops::binary_scalar(ops::BinOp::kAdd, a, s, false);
}
Tensor sub(const Tensor& a, const Tensor& b) {
  return ops::binary(ops::BinOp::kSub, a, b);
}
Tensor sub(const Tensor& a, double s) {
  return ops::binary_scalar(ops::BinOp::kSub, a, s, false);
}
Tensor mul(const Tensor& a, const Tensor& b) {
  return ops::binary(ops::BinOp::kMul, a, b);
}
Tensor mul(const Tensor& a, double s) {
  return ops::binary_scalar(ops::BinOp::kMul, a, s, false);
}
Tensor div(const Tensor& a, const Tensor& b) {
  return ops::binary(ops::BinOp::kDiv, a, b);
}
Tensor div(const Tensor& a, double s) {
  return ops::binary_scalar(ops::BinOp::kDiv, a, s, false);
}

Tensor relu(const Tensor& a) {
  using ops::TensorAccess;
  ops::check_defined(a, "relu");
  Tensor out = ops::new_tensor(a.shape(), a.dtype(), a.device());
  auto sa = TensorAccess::storage(a), so = TensorAccess::storage(out);
  const DType dtype = a.dtype();
  const std::int64_t n = a.numel();
  ops::submit("relu", a.device(), {&a}, {&out}, [sa, so, dtype, n] {
    ops::dispatch(dtype, [&](auto tag) {
      using T = decltype(tag);
      const T* in = static_cast<const T*>(sa->data());
      T* o = static_cast<T*>(so->data());
      // `x < 0 ? 0 : x` keeps NaN as NaN, like torch.
      if constexpr (std::is_floating_point_v<T>) {
        const bool nt = n * static_cast<std::int64_t>(sizeof(T)) >= ops::simd::kStreamBytes;
        ops::parallel_ranges(n, [&](std::int64_t i0, std::int64_t i1) {
          ops::simd::relu(in + i0, o + i0, i1 - i0, nt);
        });
      } else {
        ops::parallel_elements(n, [&](std::int64_t i) { o[i] = in[i] < T{0} ? T{0} : in[i]; });
      }
    });
  });
  return out;
}

Tensor sum(const Tensor& a) {
  return ops::reduce("sum", a, false);
}
Tensor mean(const Tensor& a) {
  return ops::reduce("mean", a, true);
}

bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol) {
  ops::check_binary("allclose", a, b);
  if (rtol < 0 || atol < 0) {
    throw Error("allclose: rtol and atol must be >= 0 (got rtol=" + std::to_string(rtol) +
                ", atol=" + std::to_string(atol) + ")");
  }
  return ops::dispatch(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    return ops::all_of_on_stream(
        "allclose", a, b, [rtol, atol](void* pa, void* pb, std::int64_t i) {
          const double x = static_cast<double>(static_cast<const T*>(pa)[i]);
          const double y = static_cast<double>(static_cast<const T*>(pb)[i]);
          return x == y || std::fabs(x - y) <= atol + rtol * std::fabs(y);
        });
  });
}

bool equal(const Tensor& a, const Tensor& b) {
  ops::check_defined(a, "equal");
  ops::check_defined(b, "equal");
  ops::check_same_device("equal", a, b);
  ops::check_same_dtype("equal", a, b);
  if (a.shape() != b.shape()) return false;
  return ops::dispatch(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    return ops::all_of_on_stream("equal", a, b, [](void* pa, void* pb, std::int64_t i) {
      return static_cast<const T*>(pa)[i] == static_cast<const T*>(pb)[i];
    });
  });
}

Tensor operator+(const Tensor& a, const Tensor& b) {
  return add(a, b);
}
Tensor operator+(const Tensor& a, double s) {
  return add(a, s);
}
Tensor operator+(double s, const Tensor& a) {
  return add(a, s);
}
Tensor operator-(const Tensor& a, const Tensor& b) {
  return sub(a, b);
}
Tensor operator-(const Tensor& a, double s) {
  return sub(a, s);
}
Tensor operator-(double s, const Tensor& a) {
  return ops::binary_scalar(ops::BinOp::kSub, a, s, true);
}
Tensor operator-(const Tensor& a) {
  return mul(a, -1.0);
}
Tensor operator*(const Tensor& a, const Tensor& b) {
  return mul(a, b);
}
Tensor operator*(const Tensor& a, double s) {
  return mul(a, s);
}
Tensor operator*(double s, const Tensor& a) {
  return mul(a, s);
}
Tensor operator/(const Tensor& a, const Tensor& b) {
  return div(a, b);
}
Tensor operator/(const Tensor& a, double s) {
  return div(a, s);
}
Tensor operator/(double s, const Tensor& a) {
  return ops::binary_scalar(ops::BinOp::kDiv, a, s, true);
}

}  // namespace streamrt
