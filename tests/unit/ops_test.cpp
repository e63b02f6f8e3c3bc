// Ops: results against float64 reference loops (odd shapes too), argument errors, dtypes.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "ops_test_util.hpp"
#include "streamrt/streamrt.hpp"

namespace streamrt {
namespace {

using test::expect_error_containing;
using test::to_vector;

// C = A B in float64 loops, plus the bound sum_k |a_ik b_kj| for the rounding tolerance.
struct Reference {
  std::vector<double> c, bound;
};

Reference reference_matmul(const std::vector<double>& a, const std::vector<double>& b,
                           std::int64_t batch, bool a_batched, bool b_batched, std::int64_t m,
                           std::int64_t n, std::int64_t k) {
  Reference r;
  r.c.assign(static_cast<std::size_t>(batch * m * n), 0.0);
  r.bound = r.c;
  for (std::int64_t p = 0; p < batch; ++p) {
    const double* pa = a.data() + (a_batched ? p * m * k : 0);
    const double* pb = b.data() + (b_batched ? p * k * n : 0);
    for (std::int64_t i = 0; i < m; ++i) {
      for (std::int64_t j = 0; j < n; ++j) {
        double s = 0, bound = 0;
        for (std::int64_t q = 0; q < k; ++q) {
          s += pa[i * k + q] * pb[q * n + j];
          bound += std::fabs(pa[i * k + q] * pb[q * n + j]);
        }
        r.c[static_cast<std::size_t>((p * m + i) * n + j)] = s;
        r.bound[static_cast<std::size_t>((p * m + i) * n + j)] = bound;
      }
    }
  }
  return r;
}

void check_matmul(Shape sa, Shape sb, DType dt, std::uint64_t seed) {
  SCOPED_TRACE(to_string(sa) + " x " + to_string(sb) + " " + std::string(to_string(dt)));
  Tensor a = randn(sa, seed, dt);
  Tensor b = randn(sb, seed + 1, dt);
  Tensor c = matmul(a, b);
  const std::int64_t m = sa[sa.size() - 2], k = sa.back(), n = sb.back();
  const std::int64_t batch = sa.size() == 3 ? sa[0] : sb.size() == 3 ? sb[0] : 1;
  const Shape want = sa.size() == 3 || sb.size() == 3 ? Shape{batch, m, n} : Shape{m, n};
  ASSERT_EQ(c.shape(), want);
  ASSERT_EQ(c.dtype(), dt);
  const auto ref =
      reference_matmul(to_vector(a), to_vector(b), batch, sa.size() == 3, sb.size() == 3, m, n, k);
  const auto got = to_vector(c);
  const double eps = dt == DType::Float32 ? 1e-6 : 1e-15;
  for (std::size_t i = 0; i < got.size(); ++i) {
    // Standard GEMM error bound: a few k*eps of sum |a b|.
    const double tol = 2.0 * static_cast<double>(k + 2) * eps * ref.bound[i] + 1e-30;
    ASSERT_NEAR(got[i], ref.c[i], tol) << "element " << i;
  }
}

TEST(OpsMatmul, MatchesFloat64ReferenceOddShapesAllWorkerCounts) {
  test::ThreadCountGuard guard;
  for (int workers : test::kWorkerCounts) {
    cpu::set_num_threads(workers);
    SCOPED_TRACE(std::to_string(workers) + " workers");
    for (DType dt : {DType::Float32, DType::Float64}) {
      check_matmul({1, 1}, {1, 1}, dt, 1);
      check_matmul({3, 5}, {5, 7}, dt, 2);
      check_matmul({17, 31}, {31, 13}, dt, 3);
      check_matmul({1, 64}, {64, 1}, dt, 4);
      check_matmul({257, 129}, {129, 255}, dt, 5);    // above the split threshold: row blocks
      check_matmul({4, 33, 17}, {4, 17, 29}, dt, 6);  // batched
      check_matmul({3, 65, 300}, {300, 70}, dt, 7);   // right operand broadcast
      check_matmul({9, 10}, {2, 10, 3}, dt, 8);       // left operand broadcast
    }
  }
}

TEST(OpsMatmul, DegenerateShapes) {
  Tensor a = ones({3, 0});
  Tensor b = ones({0, 4});
  EXPECT_EQ(to_vector(matmul(a, b)), std::vector<double>(12, 0.0));  // k = 0: zeros
  EXPECT_EQ(matmul(ones({0, 5}), ones({5, 2})).numel(), 0);
  EXPECT_EQ(matmul(ones({2, 0, 5}), ones({2, 5, 3})).shape(), (Shape{2, 0, 3}));
}

TEST(OpsMatmul, BadArgumentsNameBothShapes) {
  expect_error_containing([] { matmul(ones({2, 3}), ones({4, 5})); }, {"[2, 3]", "[4, 5]"});
  expect_error_containing(
      [] {
        matmul(ones({2, 2, 3}), ones({3, 3, 1}));
      },
      {"[2, 2, 3]", "[3, 3, 1]", "batch"});
  expect_error_containing([] { matmul(ones({3}), ones({3, 1})); }, {"[3]", "[3, 1]"});
  expect_error_containing(
      [] {
        matmul(ones({2, 2}), ones({2, 2}, DType::Float64));
      },
      {"float32 [2, 2]", "float64 [2, 2]"});
  expect_error_containing(
      [] {
        matmul(ones({2, 2}, DType::Int32), ones({2, 2}, DType::Int32));
      },
      {"float32 and float64"});
  expect_error_containing([] { matmul(Tensor(), ones({2, 2})); }, {"undefined"});
}

template <class T>
void check_elementwise(DType dt) {
  SCOPED_TRACE(std::string(to_string(dt)));
  for (std::int64_t n : {0, 1, 7, 40001}) {               // 40001: two chunks on the pool, odd tail
    Tensor a = arange(n, dt) + 1.0;                       // 1..n
    Tensor b = (arange(n, dt) * 3.0 + 2.0).reshape({n});  // 2, 5, 8, ...
    const auto va = to_vector(a), vb = to_vector(b);
    const auto sum = to_vector(a + b), diff = to_vector(a - b), prod = to_vector(a * b);
    const auto quot = to_vector(b / a), neg = to_vector(-a);
    const auto plus_s = to_vector(a + 4.0), s_minus = to_vector(10.0 - a);
    const auto times_s = to_vector(2.0 * a), s_div = to_vector(12.0 / a);
    for (std::size_t i = 0; i < va.size(); ++i) {
      ASSERT_EQ(sum[i], va[i] + vb[i]);
      ASSERT_EQ(diff[i], va[i] - vb[i]);
      if constexpr (std::is_integral_v<T>) {
        // Integer products wrap (two's complement); the exact product fits in int64 here.
        using U = std::make_unsigned_t<T>;
        const auto exact = static_cast<std::int64_t>(va[i]) * static_cast<std::int64_t>(vb[i]);
        ASSERT_EQ(prod[i], static_cast<double>(static_cast<T>(static_cast<U>(exact))));
      } else {
        ASSERT_EQ(prod[i], static_cast<double>(static_cast<T>(va[i] * vb[i])));
      }
      if constexpr (std::is_integral_v<T>) {
        ASSERT_EQ(quot[i], std::trunc(vb[i] / va[i]));
        ASSERT_EQ(s_div[i], std::trunc(12.0 / va[i]));
      } else {
        ASSERT_EQ(quot[i], static_cast<double>(static_cast<T>(vb[i]) / static_cast<T>(va[i])));
        ASSERT_EQ(s_div[i], static_cast<double>(T(12) / static_cast<T>(va[i])));
      }
      ASSERT_EQ(neg[i], -va[i]);
      ASSERT_EQ(plus_s[i], va[i] + 4);
      ASSERT_EQ(s_minus[i], 10 - va[i]);
      ASSERT_EQ(times_s[i], 2 * va[i]);
    }
  }
}

TEST(OpsElementwise, MatchReferenceAllDtypes) {
  test::ThreadCountGuard guard;
  for (int workers : test::kWorkerCounts) {
    cpu::set_num_threads(workers);
    SCOPED_TRACE(std::to_string(workers) + " workers");
    check_elementwise<float>(DType::Float32);
    check_elementwise<double>(DType::Float64);
    check_elementwise<std::int32_t>(DType::Int32);
    check_elementwise<std::int64_t>(DType::Int64);
  }
}

TEST(OpsElementwise, NamedFunctionsEqualOperators) {
  Tensor a = randn({5, 3}, 1), b = randn({5, 3}, 2);
  EXPECT_TRUE(equal(add(a, b), a + b));
  EXPECT_TRUE(equal(sub(a, b), a - b));
  EXPECT_TRUE(equal(mul(a, b), a * b));
  EXPECT_TRUE(equal(div(a, b), a / b));
  EXPECT_TRUE(equal(add(a, 2.0), a + 2.0));
  EXPECT_TRUE(equal(sub(a, 2.0), a - 2.0));
  EXPECT_TRUE(equal(mul(a, 2.0), a * 2.0));
  EXPECT_TRUE(equal(div(a, 2.0), a / 2.0));
}

TEST(OpsElementwise, IntegerEdgeCases) {
  // Overflow wraps (two's complement) instead of being undefined behaviour.
  Tensor big = full({2}, INT32_MAX, DType::Int32);
  EXPECT_EQ((big + 1.0).data<std::int32_t>()[0], INT32_MIN);
  Tensor min = full({1}, INT32_MIN, DType::Int32);
  EXPECT_EQ((min / -1.0).item<std::int32_t>(), INT32_MIN);
  expect_error_containing([&] { big / 0.0; }, {"division by zero"});
  expect_error_containing([&] { big + 0.5; }, {"0.5", "not an integer", "int32"});
  // A zero divisor tensor fails the stream (found while running): the reader gets the error.
  Stream s;
  StreamContext ctx(s);
  Tensor q = big / zeros({2}, DType::Int32);
  EXPECT_THROW(q.data<std::int32_t>(), Error);
  EXPECT_NO_THROW(s.synchronize());  // the read reported it (design.md rule 10)
  EXPECT_EQ((big / big).data<std::int32_t>()[1], 1);  // the stream works again after reporting
}

// Dense binary ops take one of two kernels: a small one (operands as 32-bit offsets from the
// output, so it fits a queue node) and the general one (operands more than 2 GiB away from the
// output). Operands in the allocator's memory and in a static buffer (in the program's image,
// typically far from a large block mapped by the allocator) give right results either way, as
// do operands that are views at an offset.
TEST(OpsElementwise, DenseBinaryRightWhereverTheOperandsAre) {
  constexpr std::int64_t kN = std::int64_t{1} << 16;
  static float far[kN];
  for (std::int64_t i = 0; i < kN; ++i) far[i] = static_cast<float>(i % 97);
  Tensor f = from_blob(far, {kN}, DType::Float32);
  Tensor near = full({kN}, 0.5);
  Tensor twice = full({2 * kN}, 0.25);
  Tensor tail = twice.slice(0, kN, 2 * kN);  // a view at an offset
  const Tensor results[] = {f + near, near - f, near * tail, tail + f, f / (near + 1.5)};
  const float* r0 = results[0].data<float>();
  const float* r1 = results[1].data<float>();
  const float* r2 = results[2].data<float>();
  const float* r3 = results[3].data<float>();
  const float* r4 = results[4].data<float>();
  for (std::int64_t i = 0; i < kN; ++i) {
    const float v = static_cast<float>(i % 97);
    ASSERT_EQ(r0[i], v + 0.5f) << i;
    ASSERT_EQ(r1[i], 0.5f - v) << i;
    ASSERT_EQ(r2[i], 0.125f) << i;
    ASSERT_EQ(r3[i], 0.25f + v) << i;
    ASSERT_EQ(r4[i], v / 2.0f) << i;
  }
}

TEST(OpsElementwise, MismatchesNameBothShapes) {
  expect_error_containing([] { ones({2, 3}) + ones({3, 2}); }, {"add", "[2, 3]", "[3, 2]"});
  expect_error_containing([] { ones({4}, DType::Bool) * ones({4}, DType::Bool); },
                          {"mul", "bool [4]", "numeric"});
  expect_error_containing([] { ones({2}).copy_(ones({3})); }, {"copy_", "[2]", "[3]"});
  expect_error_containing([] { allclose(ones({2, 3}), ones({4})); },
                          {"allclose", "[2, 3]", "[4]", "broadcast"});
}

TEST(OpsUnary, ReluKeepsNanAndZeroesNegatives) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> in = {-2, -0.5, 0, 0.5, 3, nan};
  Tensor t = from_blob(in.data(), {6}, DType::Float64);
  const auto out = to_vector(relu(t));
  EXPECT_EQ(out[0], 0);
  EXPECT_EQ(out[1], 0);
  EXPECT_EQ(out[2], 0);
  EXPECT_EQ(out[3], 0.5);
  EXPECT_EQ(out[4], 3);
  EXPECT_TRUE(std::isnan(out[5]));
  EXPECT_EQ(to_vector(relu(arange(5, DType::Int32) - 2.0)), (std::vector<double>{0, 0, 0, 1, 2}));
}

TEST(OpsReduce, SumAndMeanMatchReference) {
  test::ThreadCountGuard guard;
  std::vector<float> ref_bits;
  for (int workers : test::kWorkerCounts) {
    cpu::set_num_threads(workers);
    for (std::int64_t n : {1, 5, 65537, 300001}) {
      Tensor x = randn({n}, 11, DType::Float64);
      const auto v = to_vector(x);
      double s = 0;
      for (double e : v) s += e;
      Tensor sx = sum(x);
      EXPECT_EQ(sx.dim(), 0);
      EXPECT_NEAR(sx.item<double>(), s, 1e-9 * (1 + std::fabs(s)));
      EXPECT_NEAR(mean(x).item<double>(), s / static_cast<double>(n), 1e-9);
    }
    // float32 sums accumulate in double in fixed blocks: bit-identical for any worker count.
    Tensor f = rand({500000}, 3);
    ref_bits.push_back(sum(f).item<float>());
    EXPECT_EQ(ref_bits.back(), ref_bits.front()) << workers << " workers";
  }
  Tensor i32 = full({100000}, 30000, DType::Int32);
  Tensor si = sum(i32);
  EXPECT_EQ(si.dtype(), DType::Int64);
  EXPECT_EQ(si.item<std::int64_t>(), 3'000'000'000LL);  // would overflow int32
  expect_error_containing([&] { mean(i32); }, {"mean", "int32", "floating"});
  EXPECT_TRUE(std::isnan(mean(zeros({0})).item<float>()));
  EXPECT_EQ(sum(zeros({0}, DType::Int64)).item<std::int64_t>(), 0);
}

TEST(OpsCompare, AllcloseAndEqual) {
  Tensor a = randn({257, 3}, 5, DType::Float64);
  Tensor b = a + 1e-9;
  EXPECT_TRUE(allclose(a, a));
  EXPECT_TRUE(allclose(a, b, 1e-5, 1e-8));
  EXPECT_FALSE(allclose(a, b, 0.0, 1e-12));
  EXPECT_FALSE(equal(a, b));
  EXPECT_TRUE(equal(a, a.clone()));
  EXPECT_FALSE(equal(a, a.reshape({3, 257})));  // different shapes: not equal
  expect_error_containing([&] { equal(a, a.to(DType::Float32)); }, {"float64", "float32"});
  expect_error_containing([&] { allclose(a, a, -1); }, {"rtol"});
  // NaN is never close, infinities are close to themselves.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> x = {1, nan, inf}, y = {1, nan, inf}, z = {1, 2, inf};
  Tensor tx = from_blob(x.data(), {3}, DType::Float64);
  Tensor ty = from_blob(y.data(), {3}, DType::Float64);
  Tensor tz = from_blob(z.data(), {3}, DType::Float64);
  EXPECT_FALSE(allclose(tx, ty));
  EXPECT_FALSE(equal(tx, ty));
  EXPECT_TRUE(allclose(tz, tz));
  // Large: the comparison is split across workers, and one differing element is still found.
  Tensor big = rand({1 << 20}, 9);
  Tensor big2 = big.clone();
  big2.data<float>()[(1 << 20) - 3] += 1.0f;
  EXPECT_FALSE(allclose(big, big2));
  EXPECT_TRUE(allclose(big, big.clone()));
}

// allclose broadcasts as numpy's does (np.allclose(x, y) == all(isclose(x, y)), isclose
// broadcasting), across dtypes, over views read in place, at every worker count.
TEST(OpsCompare, AllcloseBroadcastsLikeNumpy) {
  test::ThreadCountGuard guard;
  for (int workers : test::kWorkerCounts) {
    cpu::set_num_threads(workers);
    SCOPED_TRACE(workers);
    // A [300, 257] matrix whose rows are all the same row: close to that row ([257]), to it as
    // a [1, 257] row, and to a [300, 1] column only if every row element equals the column's.
    Tensor row = randn({257}, 3, DType::Float64);
    Tensor m = row.unsqueeze(0).expand({300, 257}).contiguous();
    EXPECT_TRUE(allclose(m, row));
    EXPECT_TRUE(allclose(row, m));
    EXPECT_TRUE(allclose(m, row.unsqueeze(0)));
    EXPECT_TRUE(allclose(m.T(), row.unsqueeze(1)));  // a transposed view against a column
    EXPECT_FALSE(allclose(m, row.slice(0, 0, 1)));   // [1] broadcast: only the first column
    // One element off, in the last chunk of the walk: found whichever side broadcasts.
    Tensor off = m.clone();
    off.data<double>()[300 * 257 - 2] += 1.0;
    EXPECT_FALSE(allclose(off, row));
    EXPECT_FALSE(allclose(row, off));
    EXPECT_TRUE(allclose(off.slice(0, 0, 299), row));  // the row that differs is sliced away
    // 0-d against anything; mixed dtypes compare the values (numpy: np.allclose(int, float)).
    EXPECT_TRUE(allclose(full({4, 5}, 2.0), full({}, 2, DType::Int64)));
    EXPECT_FALSE(allclose(full({4, 5}, 2.5), full({}, 2, DType::Int64)));
    EXPECT_TRUE(allclose(arange(6, DType::Int32).reshape({2, 3}),
                         arange(6, DType::Float64).reshape({2, 3})));
    // Empty broadcasts are vacuously close (numpy: np.allclose(np.zeros((0, 3)), [1, 2, 3])).
    EXPECT_TRUE(allclose(zeros({0, 3}), arange(3, DType::Float32)));
  }
  expect_error_containing([] { allclose(zeros({3, 2}), zeros({3})); },
                          {"allclose", "[3, 2]", "[3]", "cannot be broadcast"});
  // equal stays numpy's array_equal: no broadcasting, different shapes are not equal.
  EXPECT_FALSE(equal(ones({2, 3}), ones({3})));
  EXPECT_FALSE(equal(ones({1, 3}), ones({3})));
}

TEST(OpsCopyFill, CopyConvertsAndFillWrites) {
  Tensor dst = zeros({2, 2}, DType::Int64);
  dst.copy_(full({2, 2}, 3.9, DType::Float64));
  EXPECT_EQ(to_vector(dst), std::vector<double>(4, 3.0));
  dst.fill_(-1);
  EXPECT_EQ(to_vector(dst), std::vector<double>(4, -1.0));
  Tensor f = zeros({3});
  f.copy_(arange(3, DType::Float32));
  EXPECT_EQ(to_vector(f), (std::vector<double>{0, 1, 2}));
  f.copy_(f);  // self-copy is a no-op
  EXPECT_EQ(to_vector(f), (std::vector<double>{0, 1, 2}));
}

TEST(OpsAsync, OpsReturnBeforeTheyRun) {
  Stream s;
  StreamContext ctx(s);
  test::Gate gate;
  gate.hold(s);
  Tensor a = ones({64, 64});
  Tensor c = matmul(a, a) + 1.0;  // all queued behind the gate; the calls returned
  EXPECT_FALSE(c.ready());
  EXPECT_FALSE(s.query());
  gate.open();
  EXPECT_EQ(to_vector(c), std::vector<double>(64 * 64, 65.0));
  EXPECT_FALSE(gate.timed_out());
}

}  // namespace
}  // namespace streamrt
