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

// Uniform in [0, 1) with 24 random bits (exactly representable as float).
inline float uniform_float(std::uint64_t index, std::uint64_t seed) {
  return static_cast<float>(philox4x32_10(index, seed)[0] >> 8) * 0x1p-24f;
}

// Uniform in [0, 1) with 53 random bits.
inline double uniform_double(std::uint64_t index, std::uint64_t seed) {
  const auto r = philox4x32_10(index, seed);
  const std::uint64_t bits = (static_cast<std::uint64_t>(r[0]) << 32 | r[1]) >> 11;
  return static_cast<double>(bits) * 0x1p-53;
}

// Standard normal (Box-Muller, cosine branch) from one counter: u1 in (0, 1], u2 in [0, 1).
inline double normal_double(std::uint64_t index, std::uint64_t seed) {
  const auto r = philox4x32_10(index, seed);
  const std::uint64_t a = (static_cast<std::uint64_t>(r[0]) << 32 | r[1]) >> 11;
  const std::uint64_t b = (static_cast<std::uint64_t>(r[2]) << 32 | r[3]) >> 11;
  const double u1 = static_cast<double>(a + 1) * 0x1p-53;
  const double u2 = static_cast<double>(b) * 0x1p-53;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

}  // namespace streamrt::ops
