// matmul (BLAS): argument checks at the call (Error naming both shapes), then a kernel submitted on
// the current stream through the tracker (tracking.cpp); large products split into row blocks over
// the workers idle at the call.
#include <cblas.h>

#include <algorithm>
#include <limits>
#include <mutex>
#include <string>

#include "checks.hpp"
#include "creation.hpp"
#include "kernels.hpp"
#include "layout.hpp"
#include "storage.hpp"
#include "streamrt/error.hpp"
#include "streamrt/ops.hpp"
#include "tensor_access.hpp"
#include "tracking.hpp"

namespace streamrt {
namespace ops {
namespace {

using detail::TensorAccess;

void check_same_dtype(const char* op, const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype()) {
    throw Error(std::string(op) + ": dtypes differ: " + describe(a) + " and " + describe(b) +
                " (convert one with to())");
  }
}

// Products smaller than this many multiply-adds (about 128^3) run as one BLAS call on the
// stream's worker: below it a block's share of the product costs about as much as the hand-off to
// a helper and the re-packing of B. Above it a product is cut into blocks of rows that the workers
// idle at the call help with (docs/performance.md, "Figures behind constants").
constexpr double kSplitMacs = 2.0 * 1024 * 1024;
// A batch of products each smaller than this (about 320^3) spreads whole products over the pool,
// at least this many multiply-adds per chunk; larger ones are split one after the other.
constexpr double kBatchChunkMacs = 32.0 * 1024 * 1024;
// Fewest rows per block when splitting.
constexpr std::int64_t kMinRows = 32;

std::once_flag g_blas_init;

// OpenBLAS must not start its own threads inside our workers: the pool is the only source of
// parallelism (no oversubscription). Process-wide in OpenBLAS 0.3.21 (no per-thread setting).
void init_blas() {
  std::call_once(g_blas_init, [] { openblas_set_num_threads(1); });
}

// How BLAS sees one matrix operand: row-major with leading dimension `ld`, transposed or not;
// `row_stride` steps from one row to the next (for row blocks). `ok` is false when the strides
// fit neither layout (then the operand is copied to a contiguous one first).
struct MatLayout {
  bool ok = false;
  bool trans = false;
  std::int64_t ld = 1;
  std::int64_t row_stride = 0;
};

MatLayout mat_layout(std::int64_t rows, std::int64_t cols, std::int64_t rs, std::int64_t cs) {
  constexpr auto kBlasMax = static_cast<std::int64_t>(std::numeric_limits<blasint>::max());
  MatLayout l;
  // Row-major: columns adjacent, rows `rs` apart (at least a row long).
  if ((cols == 1 || cs == 1) && (rows == 1 || rs >= std::max<std::int64_t>(cols, 1))) {
    l.ok = true;
    l.ld = rows == 1 ? std::max<std::int64_t>(cols, 1) : rs;
    l.row_stride = rows == 1 ? 0 : rs;
  } else if ((rows == 1 || rs == 1) && (cols == 1 || cs >= std::max<std::int64_t>(rows, 1))) {
    // A transposed view of a row-major matrix: rows adjacent, columns `cs` apart.
    l.ok = true;
    l.trans = true;
    l.ld = cols == 1 ? std::max<std::int64_t>(rows, 1) : cs;
    l.row_stride = rows == 1 ? 0 : 1;
  }
  if (l.ld > kBlasMax) l.ok = false;
  return l;
}

template <class T>
void gemm_rows(const T* a, const MatLayout& la, const T* b, const MatLayout& lb, T* c,
               std::int64_t m, std::int64_t n, std::int64_t k) {
  const auto M = static_cast<blasint>(m), N = static_cast<blasint>(n), K = static_cast<blasint>(k);
  const auto ta = la.trans ? CblasTrans : CblasNoTrans, tb = lb.trans ? CblasTrans : CblasNoTrans;
  const auto lda = static_cast<blasint>(la.ld), ldb = static_cast<blasint>(lb.ld);
  if constexpr (std::is_same_v<T, float>) {
    cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, 1.0f, a, lda, b, ldb, 0.0f, c, N);
  } else {
    cblas_dgemm(CblasRowMajor, ta, tb, M, N, K, 1.0, a, lda, b, ldb, 0.0, c, N);
  }
}

// C[m,n] = A[m,k] B[k,n] (C dense), split into row blocks across the pool when large.
template <class T>
void gemm(const T* a, const MatLayout& la, const T* b, const MatLayout& lb, T* c, std::int64_t m,
          std::int64_t n, std::int64_t k) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    std::fill(c, c + m * n, T{0});
    return;
  }
  const int workers = runtime::get_num_threads();
  const double macs = static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  if (workers <= 1 || macs < kSplitMacs || m < 2 * kMinRows || runtime::in_parallel_region()) {
    gemm_rows(a, la, b, lb, c, m, n, k);
    return;
  }
  // One block per worker, whoever runs them: the blocks depend on the shape and the worker count
  // only, never on the load, so a product's result is the same bits at every run (OpenBLAS's
  // rounding depends on the block shape). On a busy pool the caller runs them one after the
  // other (each re-packs B, a few per cent); idle workers take blocks of it (help-first).
  const std::int64_t blocks = std::min<std::int64_t>(workers, m / kMinRows);
  const std::int64_t rows = (m + blocks - 1) / blocks;
  runtime::parallel_for(0, blocks, 1, [&](std::int64_t b0, std::int64_t b1) {
    for (std::int64_t blk = b0; blk < b1; ++blk) {
      const std::int64_t r0 = blk * rows, r1 = std::min(m, r0 + rows);
      gemm_rows(a + r0 * la.row_stride, la, b, lb, c + r0 * n, r1 - r0, n, k);
    }
  });
}

template <class T>
void batched_gemm(const T* a, const MatLayout& la, const T* b, const MatLayout& lb, T* c,
                  std::int64_t batch, std::int64_t a_stride, std::int64_t b_stride, std::int64_t m,
                  std::int64_t n, std::int64_t k) {
  const double macs = static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  if (batch == 1 || macs >= kBatchChunkMacs) {
    for (std::int64_t i = 0; i < batch; ++i)
      gemm(a + i * a_stride, la, b + i * b_stride, lb, c + i * m * n, m, n, k);
    return;
  }
  // Small products: spread whole products over the pool.
  const auto grain =
      static_cast<std::int64_t>(std::max(1.0, kBatchChunkMacs / std::max(macs, 1.0)));
  runtime::parallel_for(0, batch, grain, [&](std::int64_t i0, std::int64_t i1) {
    for (std::int64_t i = i0; i < i1; ++i)
      gemm(a + i * a_stride, la, b + i * b_stride, lb, c + i * m * n, m, n, k);
  });
}

// The operand as BLAS can read it: itself when its last two strides fit a (transposed) row-major
// layout, else a contiguous copy (queued on the current stream).
Tensor blas_operand(const Tensor& t, MatLayout& layout) {
  const int d = t.dim();
  const auto& st = t.strides();
  layout = mat_layout(t.size(-2), t.size(-1), st[static_cast<std::size_t>(d - 2)],
                      st[static_cast<std::size_t>(d - 1)]);
  if (layout.ok) return t;
  Tensor c = t.contiguous();
  layout = mat_layout(c.size(-2), c.size(-1), c.strides()[static_cast<std::size_t>(d - 2)],
                      c.strides()[static_cast<std::size_t>(d - 1)]);
  return c;
}

}  // namespace
}  // namespace ops

Tensor matmul(const Tensor& a_in, const Tensor& b_in) {
  using ops::TensorAccess;
  ops::check_defined(a_in, "matmul");
  ops::check_defined(b_in, "matmul");
  ops::check_same_device("matmul", a_in, b_in);
  if (a_in.dim() < 2 || a_in.dim() > 3 || b_in.dim() < 2 || b_in.dim() > 3) {
    throw Error("matmul: shapes " + to_string(a_in.shape()) + " and " + to_string(b_in.shape()) +
                ": operands must be 2-D [m,k]x[k,n] or batched 3-D [b,m,k]x[b,k,n]");
  }
  const std::int64_t m = a_in.size(-2), k = a_in.size(-1), k2 = b_in.size(-2), n = b_in.size(-1);
  if (k != k2) {
    throw Error("matmul: shapes " + to_string(a_in.shape()) + " and " + to_string(b_in.shape()) +
                " cannot be multiplied (inner sizes " + std::to_string(k) + " and " +
                std::to_string(k2) + " differ)");
  }
  std::int64_t batch = 1;
  if (a_in.dim() == 3) batch = a_in.size(0);
  if (b_in.dim() == 3) {
    if (a_in.dim() == 3 && b_in.size(0) != batch) {
      throw Error("matmul: shapes " + to_string(a_in.shape()) + " and " + to_string(b_in.shape()) +
                  " have different batch sizes (" + std::to_string(batch) + " and " +
                  std::to_string(b_in.size(0)) + ")");
    }
    batch = b_in.size(0);
  }
  ops::check_same_dtype("matmul", a_in, b_in);
  if (!is_floating(a_in.dtype())) {
    throw Error("matmul: " + ops::describe(a_in) + " x " + ops::describe(b_in) +
                ": matmul supports float32 and float64 (convert with to())");
  }
  constexpr auto kBlasMax = static_cast<std::int64_t>(std::numeric_limits<blasint>::max());
  if (m > kBlasMax || n > kBlasMax || k > kBlasMax) {
    throw Error("matmul: shapes " + to_string(a_in.shape()) + " and " + to_string(b_in.shape()) +
                " exceed the BLAS index range (32-bit)");
  }
  // Transposed views go to BLAS as they are (its transpose flags); other layouts are copied.
  ops::MatLayout la, lb;
  const Tensor a = ops::blas_operand(a_in, la), b = ops::blas_operand(b_in, lb);
  Shape out_shape = a.dim() == 3 || b.dim() == 3 ? Shape{batch, m, n} : Shape{m, n};
  Tensor out = ops::new_tensor(std::move(out_shape), a.dtype(), a.device());
  // Raw pointers, no references: the memory stays valid until the kernel ran (ops::submit's rule),
  // and the result's block can go back to this stream as soon as the host drops the result.
  const void* pa = TensorAccess::storage(a)->data();
  const void* pb = TensorAccess::storage(b)->data();
  void* po = TensorAccess::storage(out)->data();
  // Batch strides: 0 broadcasts a 2-D operand over the batch (as does a stride-0 expanded one).
  const std::int64_t a_stride = a.dim() == 3 ? a.strides()[0] : 0;
  const std::int64_t b_stride = b.dim() == 3 ? b.strides()[0] : 0;
  const std::int64_t a_off = a.storage_offset(), b_off = b.storage_offset();
  const DType dtype = a.dtype();
  ops::init_blas();
  ops::submit("matmul", a.device(), {&a, &b}, {&out},
              [pa, pb, po, dtype, batch, a_stride, b_stride, a_off, b_off, la, lb, m, n, k] {
                ops::dispatch_floating(dtype, [&](auto tag) {
                  using T = decltype(tag);
                  ops::batched_gemm(static_cast<const T*>(pa) + a_off, la,
                                    static_cast<const T*>(pb) + b_off, lb, static_cast<T*>(po),
                                    batch, a_stride, b_stride, m, n, k);
                });
              });
  return out;
}

}  // namespace streamrt
