// Ops: results against float64 reference loops (odd shapes too), on view operands, argument
// errors, dtypes and their promotion.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "ops_test_util.hpp"
#include "streamrt/streamrt.hpp"

namespace streamrt {
namespace {

using test::expect_error_containing;
using test::iota;
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
  EXPECT_NO_THROW(s.synchronize());                   // the read reported it (design.md rule 10)
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
  expect_error_containing(
      [] {
        allclose(ones({2, 3}), ones({4}));
      },
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
  expect_error_containing(
      [] {
        allclose(zeros({3, 2}), zeros({3}));
      },
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

TEST(OpsPromotion, FollowsTorch) {
  EXPECT_EQ(promote_types(DType::Int32, DType::Float32), DType::Float32);
  EXPECT_EQ(promote_types(DType::Int64, DType::Float32), DType::Float32);  // numpy: float64
  EXPECT_EQ(promote_types(DType::Int32, DType::Int64), DType::Int64);
  EXPECT_EQ(promote_types(DType::Float32, DType::Float64), DType::Float64);
  EXPECT_EQ(promote_types(DType::Bool, DType::Int32), DType::Int32);
  EXPECT_EQ(promote_types(DType::Bool, DType::Bool), DType::Bool);
  Tensor r = full({2}, 3.0, DType::Int32) + full({2}, 0.5, DType::Float32);
  EXPECT_EQ(r.dtype(), DType::Float32);
  EXPECT_EQ(to_vector(r), (std::vector<double>{3.5, 3.5}));
}

TEST(OpsElementwise, BroadcastsOverStridedViews) {
  Tensor a = iota({2, 3});
  Tensor b = iota({3});
  EXPECT_EQ(to_vector(a + b), (std::vector<double>{0, 2, 4, 3, 5, 7}));
  EXPECT_EQ(to_vector(a.T() * b.slice(0, 0, 2)), (std::vector<double>{0, 3, 0, 4, 0, 5}));
  Tensor col = iota({2, 1}), row = iota({1, 3});
  EXPECT_EQ(to_vector(col - row), (std::vector<double>{0, -1, -2, 1, 0, -1}));
  EXPECT_EQ(to_vector(maximum(a, full({}, 2.5))), (std::vector<double>{2.5, 2.5, 2.5, 3, 4, 5}));
  EXPECT_EQ(to_vector(minimum(a.T(), b.unsqueeze(1))), (std::vector<double>{0, 0, 1, 1, 2, 2}));
  EXPECT_EQ(to_vector(clamp(a, 1.0, 3.0)), (std::vector<double>{1, 1, 2, 3, 3, 3}));
  EXPECT_EQ(to_vector(pow(a.T(), 2)), (std::vector<double>{0, 9, 1, 16, 4, 25}));
  EXPECT_EQ(to_vector(abs(-a)), to_vector(a));
  // Operands sharing a dense permuted layout give a result of that layout (as torch), computed
  // over the flat memory; mixed layouts give a contiguous result.
  Tensor tt = a.T() + a.T();
  EXPECT_EQ(tt.strides(), a.T().strides());
  EXPECT_EQ(to_vector(tt), (std::vector<double>{0, 6, 2, 8, 4, 10}));
  EXPECT_EQ(exp(a.T()).strides(), a.T().strides());
  EXPECT_TRUE((a.T() + a.T().contiguous()).is_contiguous());
}

TEST(OpsElementwise, UnaryMathAndIntegerPromotion) {
  Tensor x = full({3}, 2, DType::Int32);
  Tensor e = exp(x);
  EXPECT_EQ(e.dtype(), DType::Float32);
  EXPECT_FLOAT_EQ(static_cast<float>(to_vector(e)[0]), std::exp(2.0f));
  Tensor s = sigmoid(full({2}, -1000.0, DType::Float64));
  EXPECT_EQ(to_vector(s)[0], 0.0);  // no overflow to NaN
  EXPECT_NEAR(to_vector(tanh(full({1}, 0.5)))[0], std::tanh(0.5), 1e-6);
  EXPECT_TRUE(std::isnan(to_vector(sqrt(full({1}, -1.0)))[0]));
  EXPECT_EQ(to_vector(pow(full({2}, 3, DType::Int64), 3)), (std::vector<double>{27, 27}));
  expect_error_containing([] { pow(full({1}, 3, DType::Int64), 0.5); }, {"pow", "0.5", "int64"});
  expect_error_containing([] { pow(full({1}, 3, DType::Int64), -1); }, {"pow", "negative"});
}

TEST(OpsCompare, GivesBoolAndWhereSelects) {
  Tensor a = iota({2, 3});
  Tensor m = a > 2.0;
  EXPECT_EQ(m.dtype(), DType::Bool);
  EXPECT_EQ(to_vector(m), (std::vector<double>{0, 0, 0, 1, 1, 1}));
  EXPECT_EQ(to_vector(eq(a, iota({3}))), (std::vector<double>{1, 1, 1, 0, 0, 0}));
  EXPECT_EQ(to_vector(where(m, a, full({}, -1.0))), (std::vector<double>{-1, -1, -1, 3, 4, 5}));
  EXPECT_EQ(to_vector(sum(m)), (std::vector<double>{3}));
  expect_error_containing([&] { where(a, a, a); }, {"where", "must be bool"});
  // int64 against an integral scalar compares exactly (a double could not hold 2^53 + 1).
  Tensor big = full({1}, 0, DType::Int64);
  big.data<std::int64_t>()[0] = (std::int64_t{1} << 53) + 1;
  EXPECT_EQ(to_vector(eq(big, 9007199254740992.0))[0], 0.0);
}

TEST(OpsReduce, OverADimWithKeepdim) {
  Tensor a = iota({2, 3});
  EXPECT_EQ(sum(a, 0).shape(), (Shape{3}));
  EXPECT_EQ(to_vector(sum(a, 0)), (std::vector<double>{3, 5, 7}));
  EXPECT_EQ(sum(a, -1, true).shape(), (Shape{2, 1}));
  EXPECT_EQ(to_vector(sum(a, -1, true)), (std::vector<double>{3, 12}));
  EXPECT_EQ(to_vector(mean(a.T(), 1)), (std::vector<double>{1.5, 2.5, 3.5}));
  EXPECT_EQ(to_vector(max(a, 0)), (std::vector<double>{3, 4, 5}));
  EXPECT_EQ(to_vector(min(a, 1)), (std::vector<double>{0, 3}));
  EXPECT_EQ(to_vector(argmax(a, 1)), (std::vector<double>{2, 2}));
  EXPECT_EQ(argmax(a, 1).dtype(), DType::Int64);
  EXPECT_EQ(argmax(a).item<std::int64_t>(), 5);
  EXPECT_EQ(max(a).item<float>(), 5.0f);
  EXPECT_EQ(to_vector(sum(full({2, 3}, 1, DType::Int32), 1)), (std::vector<double>{3, 3}));
  EXPECT_EQ(sum(full({2, 3}, 1, DType::Int32), 1).dtype(), DType::Int64);
  expect_error_containing([&] { sum(a, 2); }, {"sum", "dimension 2", "out of range"});
  expect_error_containing([] { max(zeros({2, 0}), 1); }, {"max", "empty"});
  expect_error_containing([] { mean(zeros({2}, DType::Int32), 0); }, {"mean", "floating"});
}

TEST(OpsReduce, SoftmaxRowsSumToOne) {
  Tensor x = randn({5, 7}, 3);
  Tensor s = softmax(x, 1);
  Tensor total = sum(s, 1);
  for (double v : to_vector(total)) EXPECT_NEAR(v, 1.0, 1e-6);
  Tensor ls = log_softmax(x.T(), 0);  // the same rows, read through a transposed view
  const auto a = to_vector(log(s)), b = to_vector(ls.T());
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5);
  // Large inputs: shifted by the maximum, so no overflow.
  EXPECT_EQ(to_vector(softmax(full({2}, 1000.0), 0)), (std::vector<double>{0.5, 0.5}));
  expect_error_containing([] { softmax(ones({2}, DType::Int64), 0); }, {"softmax", "floating"});
}

TEST(OpsJoin, CatAndStack) {
  Tensor a = iota({2, 2}), b = full({2, 1}, 9.0);
  Tensor c = cat({a, b}, 1);
  EXPECT_EQ(c.shape(), (Shape{2, 3}));
  EXPECT_EQ(to_vector(c), (std::vector<double>{0, 1, 9, 2, 3, 9}));
  Tensor s = stack({a, a.T()}, 0);
  EXPECT_EQ(s.shape(), (Shape{2, 2, 2}));
  EXPECT_EQ(to_vector(s), (std::vector<double>{0, 1, 2, 3, 0, 2, 1, 3}));
  EXPECT_EQ(stack({a, a}, -1).shape(), (Shape{2, 2, 2}));
  expect_error_containing([&] { cat({a, iota({3, 1})}, 1); }, {"cat", "[2, 2]", "[3, 1]"});
  expect_error_containing([&] { stack({a, b}); }, {"stack", "[2, 2]", "[2, 1]"});
}

// A transposed operand goes to BLAS as it is: the profile holds the product and no copy.
TEST(OpsMatmul, TransposedViewsNeedNoCopy) {
  Tensor a = randn({6, 4}, 1), b = randn({6, 5}, 2);
  synchronize();
  Profiler prof;
  prof.start();
  Tensor c = matmul(a.T(), b);                            // [4, 6] x [6, 5]
  Tensor d = matmul(b.T(), a.T().T());                    // [5, 6] x [6, 4]
  Tensor e = matmul(b.slice(1, 1, 5), a.slice(0, 0, 4));  // row-strided view: no copy either
  c.wait();
  d.wait();
  e.wait();
  prof.stop();
  for (const auto& r : prof.records()) EXPECT_EQ(r.label, "matmul");
  EXPECT_EQ(prof.records().size(), 3u);
  const auto va = to_vector(a), vb = to_vector(b), vc = to_vector(c), vd = to_vector(d);
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 5; ++j) {
      double ref = 0;
      for (int k = 0; k < 6; ++k) ref += va[k * 4 + i] * vb[k * 5 + j];
      EXPECT_NEAR(vc[i * 5 + j], ref, 1e-4);
      EXPECT_NEAR(vd[j * 4 + i], ref, 1e-4);
    }
  }
  // An expanded (stride 0) operand fits neither layout and is copied first: still right.
  Tensor ones_b = ones({1, 5}).expand({6, 5});
  const auto vf = to_vector(matmul(a.T(), ones_b));
  for (int i = 0; i < 4; ++i) {
    double ref = 0;
    for (int k = 0; k < 6; ++k) ref += va[k * 4 + i];
    EXPECT_NEAR(vf[i * 5], ref, 1e-4);
  }
}

// index_select gathers slices along any dimension (numpy's take), from strided inputs, with
// int32 or int64 indices (negative from the end); an entry out of range fails the stream.
TEST(OpsIndexSelect, GathersLikeTake) {
  test::ThreadCountGuard guard;
  for (int workers : test::kWorkerCounts) {
    cpu::set_num_threads(workers);
    SCOPED_TRACE(workers);
    Tensor m = iota({3, 4});
    std::vector<std::int64_t> rows = {2, 0, -1, 2};
    Tensor idx = from_blob(rows.data(), {4}, DType::Int64);
    EXPECT_EQ(to_vector(index_select(m, 0, idx)),
              (std::vector<double>{8, 9, 10, 11, 0, 1, 2, 3, 8, 9, 10, 11, 8, 9, 10, 11}));
    Tensor cols = arange(2, DType::Int32) * 3.0;  // int32 {0, 3}
    EXPECT_EQ(to_vector(index_select(m.T(), 1, arange(3, DType::Int32))),
              to_vector(m.T()));  // a strided input, every entry
    EXPECT_EQ(to_vector(index_select(m, -1, cols)), (std::vector<double>{0, 3, 4, 7, 8, 11}));
    EXPECT_EQ(index_select(m, 0, zeros({0}, DType::Int64)).shape(), (Shape{0, 4}));
    // Large enough to be split across workers: 40,000 rows gathered in reverse.
    Tensor big = arange(40000 * 3, DType::Int64).reshape({40000, 3});
    Tensor rev = arange(40000, DType::Int64)
                     .slice(0, std::numeric_limits<std::int64_t>::max(),
                            std::numeric_limits<std::int64_t>::min(), -1);
    const auto got = to_vector(index_select(big, 0, rev));
    for (std::int64_t r = 0; r < 40000; ++r) {
      ASSERT_EQ(got[static_cast<std::size_t>(r * 3 + 2)], static_cast<double>((39999 - r) * 3 + 2));
    }
  }
  Tensor m = iota({3, 4});
  expect_error_containing([&] { index_select(m, 0, ones({2})); },
                          {"index_select", "float32", "int64"});
  expect_error_containing([&] { index_select(m, 2, arange(2)); }, {"index_select", "out of range"});
  std::vector<std::int64_t> bad = {1, 3};
  Stream s;
  StreamContext ctx(s);
  Tensor picked = index_select(m, 0, from_blob(bad.data(), {2}, DType::Int64));
  expect_error_containing([&] { picked.wait(); }, {"index 3", "entry 1", "size 3"});
}

}  // namespace
}  // namespace streamrt
