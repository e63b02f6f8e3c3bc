// SIMD kernels (simd_kernels.hpp), written once with Google Highway. foreach_target.h compiles
// this file once per x86 target; HWY_DYNAMIC_DISPATCH picks the best one the CPU supports at the
// first call.
#include "ops/simd_kernels.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "ops/random.hpp"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/simd_kernels.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
// foreach_target.h re-includes everything below once per target.
#include <hwy/cache_control.h>
#include <hwy/contrib/math/math-inl.h>
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace streamrt::ops::simd::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// ---- element-wise --------------------------------------------------------------------------

template <class D, class V>
HWY_INLINE V Apply(D, Binary op, V x, V y) {
#define STREAMRT_CASE(Name, name, Hwy, op) \
  case Binary::k##Name:                    \
    return hn::Hwy(x, y);
  switch (op) { STREAMRT_ARITHMETIC_OPS(STREAMRT_CASE) }
#undef STREAMRT_CASE
  return hn::Div(x, y);  // not reached: the switch covers every op
}

template <class T>
HWY_INLINE T ApplyScalar(Binary op, T x, T y) {
#define STREAMRT_CASE(Name, name, Hwy, op) \
  case Binary::k##Name:                    \
    return x op y;
  switch (op) { STREAMRT_ARITHMETIC_OPS(STREAMRT_CASE) }
#undef STREAMRT_CASE
  return x / y;  // not reached: the switch covers every op
}

// Stores `v` at out + i: streaming when asked and the address is vector aligned.
template <class D, class V, class T>
HWY_INLINE void Put(D d, V v, T* HWY_RESTRICT out, bool nt) {
  if (nt) {
    hn::Stream(v, d, out);
  } else {
    hn::StoreU(v, d, out);
  }
}

template <class T>
HWY_INLINE bool Aligned(const T* out) {
  return reinterpret_cast<std::uintptr_t>(out) % 64 == 0;  // what Stream needs on every target
}

// The loop every element-wise kernel shares: `f(d, i)` gives the vector for elements [i, i + N),
// `g(i)` the element i for the tail. `stream_ok` lets the caller ask for streaming stores.
template <class T, class F, class G>
HWY_INLINE void ForEach(T* HWY_RESTRICT out, std::int64_t n, bool stream_ok, F f, G g) {
  const hn::ScalableTag<T> d;
  const auto N = static_cast<std::int64_t>(hn::Lanes(d));
  std::int64_t i = 0;
  const bool nt = stream_ok && Aligned(out);
  for (; i + 4 * N <= n; i += 4 * N) {
    const auto v0 = f(d, i), v1 = f(d, i + N), v2 = f(d, i + 2 * N), v3 = f(d, i + 3 * N);
    Put(d, v0, out + i, nt);
    Put(d, v1, out + i + N, nt);
    Put(d, v2, out + i + 2 * N, nt);
    Put(d, v3, out + i + 3 * N, nt);
  }
  for (; i + N <= n; i += N) Put(d, f(d, i), out + i, nt);
  for (; i < n; ++i) out[i] = g(i);
  if (nt) hwy::FlushStream();  // streaming stores are weakly ordered: fence before the join
}

template <class T>
void BinaryT(Binary op, const T* HWY_RESTRICT a, const T* HWY_RESTRICT b, T* out, std::int64_t n,
             bool stream_ok) {
  ForEach(
      out, n, stream_ok,
      [&](auto d, std::int64_t i) {
        return Apply(d, op, hn::LoadU(d, a + i), hn::LoadU(d, b + i));
      },
      [&](std::int64_t i) { return ApplyScalar(op, a[i], b[i]); });
}

template <class T>
void BinaryScalarT(Binary op, const T* HWY_RESTRICT a, T s, bool reversed, T* out, std::int64_t n,
                   bool stream_ok) {
  const hn::ScalableTag<T> d;
  const auto vs = hn::Set(d, s);
  if (reversed) {
    ForEach(
        out, n, stream_ok,
        [&](auto dd, std::int64_t i) { return Apply(dd, op, vs, hn::LoadU(dd, a + i)); },
        [&](std::int64_t i) { return ApplyScalar(op, s, a[i]); });
  } else {
    ForEach(
        out, n, stream_ok,
        [&](auto dd, std::int64_t i) { return Apply(dd, op, hn::LoadU(dd, a + i), vs); },
        [&](std::int64_t i) { return ApplyScalar(op, a[i], s); });
  }
}

template <class T>
void ReluT(const T* HWY_RESTRICT a, T* out, std::int64_t n, bool stream_ok) {
  ForEach(
      out, n, stream_ok,
      [&](auto d, std::int64_t i) {
        const auto x = hn::LoadU(d, a + i);
        return hn::IfThenZeroElse(hn::Lt(x, hn::Zero(d)), x);  // NaN < 0 is false: NaN stays
      },
      [&](std::int64_t i) { return a[i] < T{0} ? T{0} : a[i]; });
}

template <class T>
void FillT(T* out, T v, std::int64_t n, bool stream_ok) {
  const hn::ScalableTag<T> d;
  const auto vv = hn::Set(d, v);
  ForEach(
      out, n, stream_ok, [&](auto, std::int64_t) { return vv; }, [&](std::int64_t) { return v; });
}

void BinaryF32(Binary op, const float* a, const float* b, float* out, std::int64_t n, bool s) {
  BinaryT(op, a, b, out, n, s);
}
void BinaryF64(Binary op, const double* a, const double* b, double* out, std::int64_t n, bool s) {
  BinaryT(op, a, b, out, n, s);
}
void BinaryScalarF32(Binary op, const float* a, float v, bool r, float* out, std::int64_t n,
                     bool s) {
  BinaryScalarT(op, a, v, r, out, n, s);
}
void BinaryScalarF64(Binary op, const double* a, double v, bool r, double* out, std::int64_t n,
                     bool s) {
  BinaryScalarT(op, a, v, r, out, n, s);
}
void ReluF32(const float* a, float* out, std::int64_t n, bool s) {
  ReluT(a, out, n, s);
}
void ReluF64(const double* a, double* out, std::int64_t n, bool s) {
  ReluT(a, out, n, s);
}
void FillF32(float* out, float v, std::int64_t n, bool s) {
  FillT(out, v, n, s);
}
void FillF64(double* out, double v, std::int64_t n, bool s) {
  FillT(out, v, n, s);
}

// ---- reductions ----------------------------------------------------------------------------

// Four double accumulators (enough independent adds to hide their latency), each lane summing
// a fixed subset of the elements; then a fixed tree.
template <class T>
double SumT(const T* HWY_RESTRICT p, std::int64_t n) {
  const hn::ScalableTag<double> dd;
  const hn::Rebind<T, decltype(dd)> dt;  // as many T lanes as double lanes
  const auto N = static_cast<std::int64_t>(hn::Lanes(dd));
  auto load = [&](std::int64_t i) {
    if constexpr (sizeof(T) == sizeof(double)) {
      return hn::LoadU(dd, p + i);
    } else {
      return hn::PromoteTo(dd, hn::LoadU(dt, p + i));
    }
  };
  auto a0 = hn::Zero(dd), a1 = hn::Zero(dd), a2 = hn::Zero(dd), a3 = hn::Zero(dd);
  std::int64_t i = 0;
  for (; i + 4 * N <= n; i += 4 * N) {
    a0 = hn::Add(a0, load(i));
    a1 = hn::Add(a1, load(i + N));
    a2 = hn::Add(a2, load(i + 2 * N));
    a3 = hn::Add(a3, load(i + 3 * N));
  }
  for (; i + N <= n; i += N) a0 = hn::Add(a0, load(i));
  double total = hn::GetLane(hn::SumOfLanes(dd, hn::Add(hn::Add(a0, a1), hn::Add(a2, a3))));
  for (; i < n; ++i) total += static_cast<double>(p[i]);
  return total;
}

double SumF32(const float* p, std::int64_t n) {
  return SumT(p, n);
}
double SumF64(const double* p, std::int64_t n) {
  return SumT(p, n);
}

// ---- Philox4x32-10 and the random fills ----------------------------------------------------

using D64 = hn::ScalableTag<std::uint64_t>;
using V64 = hn::Vec<D64>;

// Philox on hn::Lanes(D64) consecutive counters at once: word w of counter `first + lane` in
// lane `lane` of c[w] (low 32 bits). Same arithmetic as philox4x32_10 in random.hpp.
HWY_INLINE void Philox(std::uint64_t first, std::uint64_t seed, V64 (&c)[4]) {
  const D64 d;
#if HWY_TARGET == HWY_SCALAR
  // One lane and no 32-bit view of it: the scalar definition.
  const auto r = philox4x32_10(first, seed);
  for (int w = 0; w < 4; ++w) c[w] = hn::Set(d, std::uint64_t{r[static_cast<std::size_t>(w)]});
#else
  const hn::Repartition<std::uint32_t, D64> d32;
  const auto lo_mask = hn::Set(d, 0xFFFFFFFFull);
  const auto counters = hn::Add(hn::Set(d, first), hn::Iota(d, 0));
  c[0] = hn::And(counters, lo_mask);
  c[1] = hn::ShiftRight<32>(counters);
  c[2] = hn::Zero(d);
  c[3] = hn::Zero(d);
  const auto m0 = hn::BitCast(d32, hn::Set(d, 0xD2511F53ull));
  const auto m1 = hn::BitCast(d32, hn::Set(d, 0xCD9E8D57ull));
  auto k0 = static_cast<std::uint32_t>(seed), k1 = static_cast<std::uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    const auto p0 = hn::MulEven(hn::BitCast(d32, c[0]), m0);
    const auto p1 = hn::MulEven(hn::BitCast(d32, c[2]), m1);
    const auto n0 = hn::Xor(hn::Xor(hn::ShiftRight<32>(p1), c[1]), hn::Set(d, k0));
    const auto n2 = hn::Xor(hn::Xor(hn::ShiftRight<32>(p0), c[3]), hn::Set(d, k1));
    c[0] = n0;
    c[1] = hn::And(p1, lo_mask);
    c[2] = n2;
    c[3] = hn::And(p0, lo_mask);
  }
#endif
}

// Calls make(counter, out) for every counter whose numbers overlap [first, first + count), where
// make writes kPer * Lanes numbers for Lanes counters starting at `counter`; copies the wanted
// ones to p. Every number is computed by the same vector code wherever the range starts, so
// number k depends only on (seed, k).
template <int kPer, class T, class Make>
HWY_INLINE void ForCounters(T* p, std::uint64_t first, std::int64_t count, Make make) {
  if (count <= 0) return;
  const D64 d;
  const std::size_t N = hn::Lanes(d);
  HWY_ALIGN T buf[HWY_MAX_BYTES / sizeof(std::uint64_t) * kPer];
  const std::uint64_t end = first + static_cast<std::uint64_t>(count);
  std::uint64_t c = first / kPer;
  std::uint64_t k = first;  // next number to write
  while (k < end) {
    make(c, buf);
    const std::uint64_t base = c * kPer;
    const std::uint64_t stop = std::min<std::uint64_t>(end, base + kPer * N);
    std::memcpy(p + (k - first), buf + (k - base), (stop - k) * sizeof(T));
    k = stop;
    c += N;
  }
}

void UniformF32(float* p, std::uint64_t first, std::int64_t count, std::uint64_t seed) {
  ForCounters<4>(p, first, count, [seed](std::uint64_t c, float* out) {
    const D64 d;
    const std::size_t N = hn::Lanes(d);
    V64 r[4];
    Philox(c, seed, r);
    HWY_ALIGN std::uint64_t w[4][HWY_MAX_BYTES / sizeof(std::uint64_t)];
    for (int j = 0; j < 4; ++j) hn::Store(r[j], d, w[j]);
    for (std::size_t lane = 0; lane < N; ++lane) {
      for (int j = 0; j < 4; ++j) {
        out[4 * lane + static_cast<std::size_t>(j)] =
            static_cast<float>(static_cast<std::uint32_t>(w[j][lane]) >> 8) * 0x1p-24f;
      }
    }
  });
}

// 53 random bits (hi word, lo word) as a double in [0, 1).
HWY_INLINE hn::Vec<hn::ScalableTag<double>> Uniform53(V64 hi, V64 lo) {
  const hn::ScalableTag<double> dd;
  const hn::RebindToSigned<decltype(dd)> di;
  const auto bits = hn::ShiftRight<11>(hn::Or(hn::ShiftLeft<32>(hi), lo));
  return hn::Mul(hn::ConvertTo(dd, hn::BitCast(di, bits)), hn::Set(dd, 0x1p-53));
}

void UniformF64(double* p, std::uint64_t first, std::int64_t count, std::uint64_t seed) {
  ForCounters<2>(p, first, count, [seed](std::uint64_t c, double* out) {
    const hn::ScalableTag<double> dd;
    const std::size_t N = hn::Lanes(dd);
    V64 r[4];
    Philox(c, seed, r);
    HWY_ALIGN double u[2][HWY_MAX_BYTES / sizeof(double)];
    hn::Store(Uniform53(r[0], r[1]), dd, u[0]);
    hn::Store(Uniform53(r[2], r[3]), dd, u[1]);
    for (std::size_t lane = 0; lane < N; ++lane) {
      out[2 * lane] = u[0][lane];
      out[2 * lane + 1] = u[1][lane];
    }
  });
}

// Box-Muller in double on one Philox call per pair: u1 in (0, 1], u2 in [0, 1).
template <class T>
void NormalT(T* p, std::uint64_t first, std::int64_t count, std::uint64_t seed) {
  ForCounters<2>(p, first, count, [seed](std::uint64_t c, T* out) {
    const hn::ScalableTag<double> dd;
    const std::size_t N = hn::Lanes(dd);
    V64 r[4];
    Philox(c, seed, r);
    const auto u1 = hn::Sub(hn::Set(dd, 1.0), Uniform53(r[0], r[1]));
    const auto u2 = Uniform53(r[2], r[3]);
    const auto radius = hn::Sqrt(hn::Mul(hn::Set(dd, -2.0), hn::CallLog(dd, u1)));
    const auto angle = hn::Mul(hn::Set(dd, 6.283185307179586), u2);
    HWY_ALIGN double v[2][HWY_MAX_BYTES / sizeof(double)];
    hn::Store(hn::Mul(radius, hn::CallCos(dd, angle)), dd, v[0]);
    hn::Store(hn::Mul(radius, hn::CallSin(dd, angle)), dd, v[1]);
    for (std::size_t lane = 0; lane < N; ++lane) {
      out[2 * lane] = static_cast<T>(v[0][lane]);
      out[2 * lane + 1] = static_cast<T>(v[1][lane]);
    }
  });
}

void NormalF32(float* p, std::uint64_t first, std::int64_t count, std::uint64_t seed) {
  NormalT(p, first, count, seed);
}
void NormalF64(double* p, std::uint64_t first, std::int64_t count, std::uint64_t seed) {
  NormalT(p, first, count, seed);
}

const char* TargetName() {
  return hwy::TargetName(HWY_TARGET);
}

}  // namespace streamrt::ops::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace streamrt::ops::simd {

HWY_EXPORT(BinaryF32);
HWY_EXPORT(BinaryF64);
HWY_EXPORT(BinaryScalarF32);
HWY_EXPORT(BinaryScalarF64);
HWY_EXPORT(ReluF32);
HWY_EXPORT(ReluF64);
HWY_EXPORT(FillF32);
HWY_EXPORT(FillF64);
HWY_EXPORT(SumF32);
HWY_EXPORT(SumF64);
HWY_EXPORT(UniformF32);
HWY_EXPORT(UniformF64);
HWY_EXPORT(NormalF32);
HWY_EXPORT(NormalF64);
HWY_EXPORT(TargetName);

void binary(Binary op, const float* a, const float* b, float* out, std::int64_t n, bool s) {
  HWY_DYNAMIC_DISPATCH(BinaryF32)(op, a, b, out, n, s);
}
void binary(Binary op, const double* a, const double* b, double* out, std::int64_t n, bool s) {
  HWY_DYNAMIC_DISPATCH(BinaryF64)(op, a, b, out, n, s);
}
void binary_scalar(Binary op, const float* a, float v, bool r, float* out, std::int64_t n, bool s) {
  HWY_DYNAMIC_DISPATCH(BinaryScalarF32)(op, a, v, r, out, n, s);
}
void binary_scalar(Binary op, const double* a, double v, bool r, double* out, std::int64_t n,
                   bool s) {
  HWY_DYNAMIC_DISPATCH(BinaryScalarF64)(op, a, v, r, out, n, s);
}
void relu(const float* a, float* out, std::int64_t n, bool s) {
  HWY_DYNAMIC_DISPATCH(ReluF32)(a, out, n, s);
}
void relu(const double* a, double* out, std::int64_t n, bool s) {
  HWY_DYNAMIC_DISPATCH(ReluF64)(a, out, n, s);
}
void fill(float* out, float v, std::int64_t n, bool s) {
  HWY_DYNAMIC_DISPATCH(FillF32)(out, v, n, s);
}
void fill(double* out, double v, std::int64_t n, bool s) {
  HWY_DYNAMIC_DISPATCH(FillF64)(out, v, n, s);
}
double sum_block(const float* p, std::int64_t n) {
  return HWY_DYNAMIC_DISPATCH(SumF32)(p, n);
}
double sum_block(const double* p, std::int64_t n) {
  return HWY_DYNAMIC_DISPATCH(SumF64)(p, n);
}
void fill_uniform(float* p, std::uint64_t first, std::int64_t count, std::uint64_t seed) {
  HWY_DYNAMIC_DISPATCH(UniformF32)(p, first, count, seed);
}
void fill_uniform(double* p, std::uint64_t first, std::int64_t count, std::uint64_t seed) {
  HWY_DYNAMIC_DISPATCH(UniformF64)(p, first, count, seed);
}
void fill_normal(float* p, std::uint64_t first, std::int64_t count, std::uint64_t seed) {
  HWY_DYNAMIC_DISPATCH(NormalF32)(p, first, count, seed);
}
void fill_normal(double* p, std::uint64_t first, std::int64_t count, std::uint64_t seed) {
  HWY_DYNAMIC_DISPATCH(NormalF64)(p, first, count, seed);
}
const char* target_name() {
  return HWY_DYNAMIC_DISPATCH(TargetName)();
}

}  // namespace streamrt::ops::simd
#endif  // HWY_ONCE
