#pragma once
// SIMD kernels of the element-wise ops, reductions and random fills (Google Highway, one source
// compiled for each x86 target, the best one chosen at run time: AVX2, AVX-512, or SSE4 and plain
// C++ on older machines). Contiguous ranges only; the callers split work across workers. Results
// do not depend on where a range is split: element-wise kernels are per element, sum_block's
// rounding depends only on its range, and random fills only on (seed, index).
#include <cstdint>

#include "op_list.hpp"

namespace streamrt::ops::simd {

#define STREAMRT_ENUMERATOR(Name, ...) k##Name,
enum class Binary : std::uint8_t { STREAMRT_ARITHMETIC_OPS(STREAMRT_ENUMERATOR) };
#undef STREAMRT_ENUMERATOR

// The element-wise kernels take `stream`: true when the whole op's output is at least
// kStreamBytes (see below); a kernel then writes with streaming stores where `out` is aligned,
// and fences before it returns.

// out[i] = a[i] (op) b[i] for i in [0, n). out may alias a or b exactly.
void binary(Binary op, const float* a, const float* b, float* out, std::int64_t n, bool stream);
void binary(Binary op, const double* a, const double* b, double* out, std::int64_t n, bool stream);

// out[i] = a[i] (op) s, or s (op) a[i] when `reversed`.
void binary_scalar(Binary op, const float* a, float s, bool reversed, float* out, std::int64_t n,
                   bool stream);
void binary_scalar(Binary op, const double* a, double s, bool reversed, double* out, std::int64_t n,
                   bool stream);

// out[i] = a[i] < 0 ? 0 : a[i] (NaN stays NaN).
void relu(const float* a, float* out, std::int64_t n, bool stream);
void relu(const double* a, double* out, std::int64_t n, bool stream);

// out[i] = v.
void fill(float* out, float v, std::int64_t n, bool stream);
void fill(double* out, double v, std::int64_t n, bool stream);

// The sum of p[0, n) in double precision. The order of additions depends only on n (lanes, then a
// fixed tree), so a block always rounds the same way.
double sum_block(const float* p, std::int64_t n);
double sum_block(const double* p, std::int64_t n);

// Numbers [first, first + count) of the Philox4x32-10 sequence of `seed`, exactly as the scalar
// definitions in random.hpp give them (uniform: 4 float32 or 2 float64 per Philox call; normal:
// one Box-Muller pair per call, computed in double).
void fill_uniform(float* p, std::uint64_t first, std::int64_t count, std::uint64_t seed);
void fill_uniform(double* p, std::uint64_t first, std::int64_t count, std::uint64_t seed);
void fill_normal(float* p, std::uint64_t first, std::int64_t count, std::uint64_t seed);
void fill_normal(double* p, std::uint64_t first, std::int64_t count, std::uint64_t seed);

// Outputs at least this many bytes are written with streaming (non-temporal) stores: they would
// not stay in the last-level cache anyway, and streaming saves the read of each output line.
inline constexpr std::int64_t kStreamBytes = std::int64_t{16} << 20;

// Name of the SIMD target chosen at run time ("AVX2", "AVX3", ...), for benchmark reports.
const char* target_name();

}  // namespace streamrt::ops::simd
