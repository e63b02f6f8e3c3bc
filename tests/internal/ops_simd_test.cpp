// Whitebox: the Highway kernels (src/ops/simd_kernels.hpp) against plain loops, at every length
// around the vector widths and at unaligned starts; the random fills against the scalar Philox
// definitions of random.hpp, and their independence from how a range is split.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "ops/random.hpp"
#include "ops/simd_kernels.hpp"

namespace streamrt::ops {
namespace {

using simd::Binary;

template <class T>
T reference(Binary op, T x, T y) {
  switch (op) {
    case Binary::kAdd:
      return x + y;
    case Binary::kSub:
      return x - y;
    case Binary::kMul:
      return x * y;
    case Binary::kDiv:
      break;
  }
  return x / y;
}

template <class T>
void check_elementwise() {
  std::mt19937 rng(1);
  std::normal_distribution<double> dist;
  const std::int64_t max_n = 300;
  // 64-byte aligned storage with room for offsets: streaming stores need aligned outputs.
  std::vector<T> a(max_n + 16), b(max_n + 16), out(max_n + 16 + 64 / sizeof(T));
  for (auto& v : a) v = static_cast<T>(dist(rng));
  for (auto& v : b) v = static_cast<T>(dist(rng)) + T{3};
  a[5] = std::numeric_limits<T>::quiet_NaN();
  a[6] = -T{0};
  for (std::int64_t n : {0, 1, 3, 7, 8, 15, 16, 17, 31, 33, 64, 65, 255, 300}) {
    for (std::int64_t off : {0, 1, 3}) {
      for (bool nt : {false, true}) {
        const T* pa = a.data() + off;
        const T* pb = b.data() + off;
        T* po = out.data() + off;
        for (Binary op : {Binary::kAdd, Binary::kSub, Binary::kMul, Binary::kDiv}) {
          simd::binary(op, pa, pb, po, n, nt);
          for (std::int64_t i = 0; i < n; ++i) {
            const T want = reference(op, pa[i], pb[i]);
            if (std::isnan(want)) {
              ASSERT_TRUE(std::isnan(po[i]));
            } else {
              ASSERT_EQ(po[i], want) << "n=" << n << " i=" << i;
            }
          }
          for (bool rev : {false, true}) {
            simd::binary_scalar(op, pa, T{2.5}, rev, po, n, nt);
            for (std::int64_t i = 0; i < n; ++i) {
              const T want = rev ? reference(op, T{2.5}, pa[i]) : reference(op, pa[i], T{2.5});
              if (std::isnan(want)) {
                ASSERT_TRUE(std::isnan(po[i]));
              } else {
                ASSERT_EQ(po[i], want) << "n=" << n << " i=" << i;
              }
            }
          }
        }
        simd::relu(pa, po, n, nt);
        for (std::int64_t i = 0; i < n; ++i) {
          if (std::isnan(pa[i])) {
            ASSERT_TRUE(std::isnan(po[i]));
          } else {
            ASSERT_EQ(po[i], pa[i] < 0 ? T{0} : pa[i]);
          }
        }
        simd::fill(po, T{7}, n, nt);
        for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(po[i], T{7});
      }
    }
  }
}

TEST(SimdKernels, ElementwiseMatchPlainLoopsFloat32) {
  check_elementwise<float>();
}
TEST(SimdKernels, ElementwiseMatchPlainLoopsFloat64) {
  check_elementwise<double>();
}

TEST(SimdKernels, SumIsAccurateAndRepeatable) {
  std::mt19937 rng(2);
  std::uniform_real_distribution<double> dist(-1, 1);
  std::vector<float> f(100003);
  std::vector<double> d(f.size());
  for (std::size_t i = 0; i < f.size(); ++i) {
    f[i] = static_cast<float>(dist(rng));
    d[i] = f[i];
  }
  for (std::int64_t n : {0, 1, 5, 16, 17, 1000, 100003}) {
    long double want = 0;
    for (std::int64_t i = 0; i < n; ++i) want += d[static_cast<std::size_t>(i)];
    EXPECT_NEAR(simd::sum_block(f.data(), n), static_cast<double>(want), 1e-9) << n;
    EXPECT_NEAR(simd::sum_block(d.data(), n), static_cast<double>(want), 1e-9) << n;
    EXPECT_EQ(simd::sum_block(f.data(), n), simd::sum_block(f.data(), n));
  }
}

TEST(SimdKernels, UniformIsThePhiloxSequenceExactly) {
  for (std::uint64_t first : {0ull, 1ull, 3ull, 5ull, 1000ull, (1ull << 32) - 3}) {
    for (std::int64_t count : {0, 1, 2, 3, 7, 33, 250}) {
      std::vector<float> f(static_cast<std::size_t>(count)), fr(f.size());
      simd::fill_uniform(f.data(), first, count, 42);
      fill_uniform(fr.data(), first, count, 42);
      EXPECT_EQ(f, fr) << first << "+" << count;
      std::vector<double> d(f.size()), dr(f.size());
      simd::fill_uniform(d.data(), first, count, 42);
      fill_uniform(dr.data(), first, count, 42);
      EXPECT_EQ(d, dr) << first << "+" << count;
    }
  }
}

TEST(SimdKernels, NormalMatchesTheScalarDefinitionAndAnySplit) {
  const std::int64_t n = 4099;
  std::vector<double> whole(n), ref(n);
  simd::fill_normal(whole.data(), 0, n, 9);
  fill_normal(ref.data(), 0, n, 9);
  for (std::int64_t i = 0; i < n; ++i) {
    // Highway's log/sin/cos are within a few ulp of libm's.
    ASSERT_NEAR(whole[i], ref[i], 1e-12 * (1 + std::fabs(ref[i]))) << i;
  }
  std::mt19937 rng(3);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<double> pieces(n);
    std::int64_t at = 0;
    while (at < n) {
      const std::int64_t len = std::min<std::int64_t>(n - at, 1 + rng() % 37);
      simd::fill_normal(pieces.data() + at, static_cast<std::uint64_t>(at), len, 9);
      at += len;
    }
    ASSERT_EQ(pieces, whole) << "numbers depend on the split";
  }
  std::vector<float> f(n);
  simd::fill_normal(f.data(), 0, n, 9);
  for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(f[i], static_cast<float>(whole[i]));
}

}  // namespace
}  // namespace streamrt::ops
