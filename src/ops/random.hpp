#pragma once
// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11): a
// counter-based generator, so number i of a seed's sequence is computed from (seed, i) alone and
// any split of a tensor across workers gives the same numbers.
#include <array>
#include <cmath>
#include <cstdint>
#include <numbers>

namespace streamrt::ops {

// The full generator: 128-bit counter, 64-bit key (Random123 word order).
inline std::array<std::uint32_t, 4> philox4x32_10(std::array<std::uint32_t, 4> c,
                                                  std::array<std::uint32_t, 2> k) {
  constexpr std::uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr std::uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k[0] += kWeyl0;
      k[1] += kWeyl1;
    }
    const std::uint64_t p0 = static_cast<std::uint64_t>(kMul0) * c[0];
    const std::uint64_t p1 = static_cast<std::uint64_t>(kMul1) * c[2];
    c = {static_cast<std::uint32_t>(p1 >> 32) ^ c[1] ^ k[0], static_cast<std::uint32_t>(p1),
         static_cast<std::uint32_t>(p0 >> 32) ^ c[3] ^ k[1], static_cast<std::uint32_t>(p0)};
  }
  return c;
}

// Number `counter` of the sequence of `key`.
inline std::array<std::uint32_t, 4> philox4x32_10(std::uint64_t counter, std::uint64_t key) {
  return philox4x32_10(
      {static_cast<std::uint32_t>(counter), static_cast<std::uint32_t>(counter >> 32), 0u, 0u},
      {static_cast<std::uint32_t>(key), static_cast<std::uint32_t>(key >> 32)});
}

// Number k of a seed's sequence. One Philox call yields 128 bits, which serve several
// consecutive numbers: four float32 uniforms, two float64 uniforms, or the two normals of one
// Box-Muller pair. Fill loops walk k upwards and call the generator once per group, so number k
// depends only on (seed, k), however the range is split.

// Uniform float in [0, 1) from 24 random bits (exactly representable).
inline float uniform_float_from(std::uint32_t bits) {
  return static_cast<float>(bits >> 8) * 0x1p-24f;
}

// Uniform double in [0, 1) from 53 random bits.
inline double uniform_double_from(std::uint32_t hi, std::uint32_t lo) {
  return static_cast<double>((static_cast<std::uint64_t>(hi) << 32 | lo) >> 11) * 0x1p-53;
}

// Fills p[i] = f(number `first + i`) for i in [0, count), calling Philox once per group of
// `kPerCall` numbers. `make(r, lane)` turns one Philox output and a lane into a number.
template <int kPerCall, class T, class Make>
void fill_random(T* p, std::uint64_t first, std::int64_t count, std::uint64_t seed, Make make) {
  std::uint64_t k = first;
  std::array<std::uint32_t, 4> r{};
  bool have = false;
  for (std::int64_t i = 0; i < count; ++i, ++k) {
    const auto lane = static_cast<int>(k % kPerCall);
    if (!have || lane == 0) {
      r = philox4x32_10(k / kPerCall, seed);
      have = true;
    }
    p[i] = make(r, lane);
  }
}

// Uniform numbers: 4 float32 or 2 float64 per Philox call.
inline void fill_uniform(float* p, std::uint64_t first, std::int64_t count, std::uint64_t seed) {
  fill_random<4>(p, first, count, seed, [](const std::array<std::uint32_t, 4>& r, int lane) {
    return uniform_float_from(r[static_cast<std::size_t>(lane)]);
  });
}
inline void fill_uniform(double* p, std::uint64_t first, std::int64_t count, std::uint64_t seed) {
  fill_random<2>(p, first, count, seed, [](const std::array<std::uint32_t, 4>& r, int lane) {
    const auto l = static_cast<std::size_t>(2 * lane);
    return uniform_double_from(r[l], r[l + 1]);
  });
}

// Standard normals (Box-Muller): one Philox call gives u1 in (0, 1] and u2 in [0, 1), and the pair
// radius * (cos, sin)(2 pi u2). float32 numbers are the float64 ones rounded.
template <class T>
void fill_normal(T* p, std::uint64_t first, std::int64_t count, std::uint64_t seed) {
  fill_random<2>(p, first, count, seed, [](const std::array<std::uint32_t, 4>& r, int lane) {
    const double u1 = 1.0 - uniform_double_from(r[0], r[1]);  // (0, 1]: log(u1) is finite
    const double u2 = uniform_double_from(r[2], r[3]);
    const double radius = std::sqrt(-2.0 * std::log(u1));
    const double angle = 2.0 * std::numbers::pi * u2;
    return static_cast<T>(lane == 0 ? radius * std::cos(angle) : radius * std::sin(angle));
  });
}

}  // namespace streamrt::ops
