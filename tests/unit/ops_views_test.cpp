// Views (strides without copies), broadcasting, dtype promotion, the model ops, and their error
// messages. Reference values come from plain loops here; python/tests/test_ops_properties.py
// compares against numpy over random shapes.
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
using test::Gate;
using test::to_vector;

// 0, 1, ..., n-1 as float32 of `shape`.
Tensor iota(Shape shape) {
  return arange(shape_numel(shape), DType::Float32).reshape(std::move(shape));
}

TEST(Layout, ContiguousStridesAreThoseOfNewTensors) {
  EXPECT_EQ(contiguous_strides({2, 3, 4}), (Shape{12, 4, 1}));
  EXPECT_EQ(contiguous_strides({}), Shape{});
  EXPECT_EQ(contiguous_strides({2, 0, 3}), (Shape{3, 3, 1}));  // a size of 0 counts as 1
  for (const Shape& shape : {Shape{5}, Shape{2, 7}, Shape{3, 1, 4, 2}}) {
    EXPECT_EQ(contiguous_strides(shape), zeros(shape).strides()) << to_string(shape);
  }
}

TEST(Broadcast, ShapesFollowNumpyRules) {
  EXPECT_EQ(broadcast_shapes({2, 1, 3}, {4, 1}), (Shape{2, 4, 3}));
  EXPECT_EQ(broadcast_shapes({}, {3}), (Shape{3}));
  EXPECT_EQ(broadcast_shapes({5, 0}, {1}), (Shape{5, 0}));
  EXPECT_EQ(broadcast_shapes({1}, {5, 0}), (Shape{5, 0}));
  expect_error_containing(
      [] {
        broadcast_shapes({2, 3}, {3, 2});
      },
      {"[2, 3]", "[3, 2]", "cannot be broadcast"});
  expect_error_containing([] { ones({2, 3}) + ones({4}); }, {"add", "[2, 3]", "[4]"});
  expect_error_containing([] { where(ones({2}) > 0.0, ones({3}), ones({2})); },
                          {"where", "[2]", "[3]"});
}

TEST(Promotion, FollowsTorch) {
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

TEST(Views, TransposeAndPermuteShareStorage) {
  Tensor x = iota({2, 3});
  Tensor t = x.T();
  EXPECT_TRUE(t.shares_storage(x));
  EXPECT_EQ(t.shape(), (Shape{3, 2}));
  EXPECT_EQ(t.strides(), (Shape{1, 3}));
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_EQ(to_vector(t), (std::vector<double>{0, 3, 1, 4, 2, 5}));
  Tensor p = iota({2, 3, 4}).permute({2, 0, 1});
  EXPECT_EQ(p.shape(), (Shape{4, 2, 3}));
  EXPECT_EQ(p.strides(), (Shape{1, 12, 4}));
  EXPECT_EQ(to_vector(p)[1], 4.0);  // p[0, 0, 1] = x[0, 1, 0]
  Tensor c = t.contiguous();
  EXPECT_FALSE(c.shares_storage(x));
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_EQ(to_vector(c), to_vector(t));
  expect_error_containing([] { iota({2, 3}).permute({0, 0}); }, {"permute", "not a permutation"});
  expect_error_containing([] { iota({2, 3}).transpose(0, 2); }, {"transpose", "out of range"});
}

TEST(Views, SliceSelectUnsqueezeExpand) {
  Tensor x = iota({4, 5});
  Tensor s = x.slice(1, 1, 5, 2);  // columns 1 and 3
  EXPECT_EQ(s.shape(), (Shape{4, 2}));
  EXPECT_EQ(s.storage_offset(), 1);
  EXPECT_EQ(to_vector(s), (std::vector<double>{1, 3, 6, 8, 11, 13, 16, 18}));
  EXPECT_EQ(to_vector(x.slice(0, -2, 100)),
            (std::vector<double>{10, 11, 12, 13, 14, 15, 16, 17, 18, 19}));
  EXPECT_EQ(x.slice(0, 3, 1).numel(), 0);
  Tensor col = x.select(1, -1);
  EXPECT_EQ(col.shape(), (Shape{4}));
  EXPECT_EQ(to_vector(col), (std::vector<double>{4, 9, 14, 19}));
  EXPECT_EQ(x.unsqueeze(0).shape(), (Shape{1, 4, 5}));
  EXPECT_EQ(x.unsqueeze(-1).shape(), (Shape{4, 5, 1}));
  EXPECT_TRUE(x.unsqueeze(1).is_contiguous());
  Tensor e = iota({3}).unsqueeze(0).expand({2, -1});
  EXPECT_EQ(e.strides(), (Shape{0, 1}));
  EXPECT_EQ(to_vector(e), (std::vector<double>{0, 1, 2, 0, 1, 2}));
  expect_error_containing([] { iota({3}).expand({2, 4}); }, {"expand", "[3]", "[2, 4]"});
  expect_error_containing([&] { x.select(0, 4); }, {"select", "index 4", "size 4"});
  expect_error_containing([&] { x.slice(0, 0, 2, 0); }, {"slice", "step must not be zero"});
  expect_error_containing([&] { e.fill_(1.0); }, {"fill_", "expanded"});
}

TEST(Views, WritesThroughAViewReachTheBase) {
  Tensor x = zeros({3, 4});
  Tensor col = x.select(1, 2);
  col.fill_(7.0);
  x.slice(0, 0, 1).copy_(full({4}, 1.0));  // broadcast source
  EXPECT_EQ(to_vector(x), (std::vector<double>{1, 1, 1, 1, 0, 0, 7, 0, 0, 0, 7, 0}));
  Tensor y = x.reshape({12});  // contiguous: still a view
  EXPECT_TRUE(y.shares_storage(x));
  Tensor z = x.T().reshape({12});  // not contiguous: a copy, as torch
  EXPECT_FALSE(z.shares_storage(x));
  EXPECT_EQ(to_vector(z)[1], 0.0);
  EXPECT_EQ(to_vector(z)[2], 0.0);
  EXPECT_EQ(to_vector(z)[0], 1.0);
}

// Overlapping source and destination read the source as it was (torch and numpy agree).
TEST(Views, OverlappingCopyReadsTheOldValues) {
  Tensor x = iota({6});
  x.slice(0, 1, 6).copy_(x.slice(0, 0, 5));
  EXPECT_EQ(to_vector(x), (std::vector<double>{0, 0, 1, 2, 3, 4}));
  Tensor big = arange(1 << 18, DType::Int64);  // large enough for parallel chunks
  big.slice(0, 0, (1 << 18) - 3).copy_(big.slice(0, 3, 1 << 18));
  const auto v = to_vector(big);
  EXPECT_EQ(v[0], 3.0);
  EXPECT_EQ(v[(1 << 18) - 4], static_cast<double>((1 << 18) - 1));
  for (std::size_t i = 0; i + 3 < v.size(); ++i) ASSERT_EQ(v[i], static_cast<double>(i + 3));
}

// A write through a view on one stream orders a read of the base on another (tracking is per
// storage, shared by every view). The gate holds the writer back: without tracking the reader
// would see the old zeros.
TEST(Views, TrackingIsSharedWithTheBase) {
  Stream s1, s2;
  Tensor base = zeros({4, 4});
  base.wait();
  Gate gate;
  gate.hold(s1);
  {
    StreamContext ctx(s1);
    base.T().select(0, 1).fill_(3.0);  // column 1 of base
  }
  Tensor total;
  {
    StreamContext ctx(s2);
    total = sum(base);
  }
  EXPECT_FALSE(total.ready());
  gate.open();
  EXPECT_EQ(total.item<float>(), 12.0f);
  EXPECT_FALSE(gate.timed_out());
}

TEST(Elementwise, BroadcastsOverStridedViews) {
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

TEST(Elementwise, UnaryMathAndIntegerPromotion) {
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

TEST(Compare, GivesBoolAndWhereSelects) {
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

TEST(Reduce, OverADimWithKeepdim) {
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

TEST(Reduce, SoftmaxRowsSumToOne) {
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

TEST(Join, CatAndStack) {
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
TEST(Matmul, TransposedViewsNeedNoCopy) {
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

// Past the parallel grain, strided walks are split into chunks that start mid-row: the results
// equal plain loops at every worker count, and reductions are bit-identical across counts.
TEST(ViewsWorkers, LargeStridedOpsAtEveryWorkerCount) {
  test::ThreadCountGuard guard;
  constexpr std::int64_t kRows = 301, kCols = 517;
  std::vector<double> first_sum;
  for (int workers : test::kWorkerCounts) {
    cpu::set_num_threads(workers);
    Tensor a = randn({kRows, kCols}, 11), col = randn({kCols, 1}, 12);
    Tensor r = a.T() * 2.0 + col;  // [kCols, kRows]: transposed read, broadcast column
    Tensor s = sum(a.T(), 1);      // lines with stride kCols
    const auto va = to_vector(a), vc = to_vector(col), vr = to_vector(r), vs = to_vector(s);
    for (std::int64_t i = 0; i < kCols; ++i) {
      double ref = 0;
      for (std::int64_t j = 0; j < kRows; ++j) {
        const auto x = static_cast<float>(va[static_cast<std::size_t>(j * kCols + i)]);
        ASSERT_EQ(static_cast<float>(vr[static_cast<std::size_t>(i * kRows + j)]),
                  x * 2.0f + static_cast<float>(vc[static_cast<std::size_t>(i)]))
            << workers << " workers";
        ref += x;
      }
      ASSERT_NEAR(vs[static_cast<std::size_t>(i)], ref, 1e-3) << workers << " workers";
    }
    if (first_sum.empty()) {
      first_sum = vs;
    } else {
      EXPECT_EQ(vs, first_sum) << "sum over a dim differs at " << workers << " workers";
    }
  }
}

constexpr std::int64_t kFirst = std::numeric_limits<std::int64_t>::max();      // numpy's None start
constexpr std::int64_t kPastFirst = std::numeric_limits<std::int64_t>::min();  // its None stop

// Negative steps as numpy's: views walking the storage backwards (the cases' numpy results in the
// comments; python/tests/test_negative_steps.py compares every start/stop against Python).
TEST(NegativeSteps, SliceLikeNumpy) {
  Tensor x = iota({6});
  Tensor r = x.slice(0, kFirst, kPastFirst, -1);  // x[::-1]
  EXPECT_TRUE(r.shares_storage(x));
  EXPECT_EQ(r.strides(), (Shape{-1}));
  EXPECT_EQ(r.storage_offset(), 5);
  EXPECT_FALSE(r.is_contiguous());
  EXPECT_EQ(to_vector(r), (std::vector<double>{5, 4, 3, 2, 1, 0}));
  EXPECT_EQ(to_vector(x.slice(0, 5, 1, -2)), (std::vector<double>{5, 3}));      // [5:1:-2]
  EXPECT_EQ(to_vector(x.slice(0, -2, -100, -3)), (std::vector<double>{4, 1}));  // [-2::-3]
  EXPECT_EQ(to_vector(x.slice(0, 100, -7, -4)), (std::vector<double>{5, 1}));   // [100:-7:-4]
  EXPECT_EQ(to_vector(x.slice(0, 3, -1, -1)), std::vector<double>{});           // [3:-1:-1]
  EXPECT_EQ(x.slice(0, 1, 4, -1).numel(), 0);                                   // [1:4:-1]
  EXPECT_EQ(to_vector(x.slice(0, 2, kPastFirst, kPastFirst)), std::vector<double>{2});  // huge step
  EXPECT_EQ(to_vector(x.slice(0, 0, kFirst, kFirst)), std::vector<double>{0});
  // Reversing twice is the original view; a reversed column of a matrix, then transposed.
  Tensor m = iota({3, 4});
  Tensor twice = m.slice(0, kFirst, kPastFirst, -1).slice(0, kFirst, kPastFirst, -1);
  EXPECT_EQ(twice.strides(), m.strides());
  EXPECT_EQ(twice.storage_offset(), 0);
  Tensor rc = m.slice(1, kFirst, kPastFirst, -1).T();  // m[:, ::-1].T
  EXPECT_EQ(rc.strides(), (Shape{-1, 4}));
  EXPECT_EQ(to_vector(rc), (std::vector<double>{3, 7, 11, 2, 6, 10, 1, 5, 9, 0, 4, 8}));
  // Reversing both dimensions of a dense matrix is one dense run backwards.
  EXPECT_EQ(to_vector(m.slice(0, kFirst, kPastFirst, -1).slice(1, kFirst, kPastFirst, -1)),
            (std::vector<double>{11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0}));
  Tensor c = m.slice(1, kFirst, kPastFirst, -2).contiguous();
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_FALSE(c.shares_storage(m));
  EXPECT_EQ(to_vector(c), (std::vector<double>{3, 1, 7, 5, 11, 9}));
}

// Ops read and write through negative strides: element-wise, reductions, copies, fills, cat,
// matmul (BLAS takes no negative strides: the operand is copied first), at every worker count.
TEST(NegativeSteps, OpsAndWritesAtEveryWorkerCount) {
  test::ThreadCountGuard guard;
  constexpr std::int64_t kRows = 301, kCols = 263;
  for (int workers : test::kWorkerCounts) {
    cpu::set_num_threads(workers);
    SCOPED_TRACE(workers);
    Tensor a = randn({kRows, kCols}, 21, DType::Float64);
    const auto va = to_vector(a);
    auto at = [&](std::int64_t i, std::int64_t j) {
      return va[static_cast<std::size_t>(i * kCols + j)];
    };
    Tensor rev = a.slice(0, kFirst, kPastFirst, -1).slice(1, kFirst, kPastFirst, -2);  // [301, 132]
    const std::int64_t cols = (kCols + 1) / 2;
    ASSERT_EQ(rev.shape(), (Shape{kRows, cols}));
    auto rev_at = [&](std::int64_t i, std::int64_t j) {
      return at(kRows - 1 - i, kCols - 1 - 2 * j);
    };
    const auto vr = to_vector(rev * 2.0 + a.slice(1, 0, cols));
    const auto vs0 = to_vector(sum(rev, 0)), vs1 = to_vector(sum(rev, 1));
    const auto arg = argmax(rev).item<std::int64_t>();
    double best = -std::numeric_limits<double>::infinity(), total = 0;
    std::int64_t best_at = -1;
    for (std::int64_t i = 0; i < kRows; ++i) {
      for (std::int64_t j = 0; j < cols; ++j) {
        ASSERT_EQ(vr[static_cast<std::size_t>(i * cols + j)], rev_at(i, j) * 2.0 + at(i, j));
        total += rev_at(i, j);
        if (rev_at(i, j) > best) {
          best = rev_at(i, j);
          best_at = i * cols + j;
        }
      }
    }
    EXPECT_EQ(arg, best_at);  // the flat index in the view's own (row-major) order
    EXPECT_NEAR(sum(rev).item<double>(), total, 1e-9);
    for (std::int64_t j = 0; j < cols; ++j) {
      double ref = 0;
      for (std::int64_t i = 0; i < kRows; ++i) ref += rev_at(i, j);
      ASSERT_NEAR(vs0[static_cast<std::size_t>(j)], ref, 1e-9);
    }
    for (std::int64_t i = 0; i < kRows; ++i) {
      double ref = 0;
      for (std::int64_t j = 0; j < cols; ++j) ref += rev_at(i, j);
      ASSERT_NEAR(vs1[static_cast<std::size_t>(i)], ref, 1e-9);
    }
    // matmul: [301, 132] (both strides negative) x [132, 5] (rows reversed), batched with a
    // reversed batch.
    Tensor b = randn({cols, 5}, 22, DType::Float64);
    const auto vb = to_vector(b);
    Tensor b_rev = b.slice(0, kFirst, kPastFirst, -1);
    const auto vp = to_vector(matmul(rev, b_rev));
    for (std::int64_t i = 0; i < kRows; i += 37) {
      for (std::int64_t n = 0; n < 5; ++n) {
        double ref = 0;
        for (std::int64_t k = 0; k < cols; ++k) {
          ref += rev_at(i, k) * vb[static_cast<std::size_t>((cols - 1 - k) * 5 + n)];
        }
        ASSERT_NEAR(vp[static_cast<std::size_t>(i * 5 + n)], ref, 1e-9);
      }
    }
    Tensor batch = iota({3, 2, 2}).to(DType::Float64);
    const auto vbatch = to_vector(matmul(batch.slice(0, kFirst, kPastFirst, -1), batch));
    // batch[2] @ batch[0] = [[8, 9], [10, 11]] @ [[0, 1], [2, 3]] = [[18, 35], [22, 43]]
    EXPECT_EQ(std::vector<double>(vbatch.begin(), vbatch.begin() + 4),
              (std::vector<double>{18, 35, 22, 43}));
    // Writes: copy_ and fill_ into reversed views, and an in-place reversal (overlapping copy).
    Tensor w = iota({1000});
    w.slice(0, kFirst, kPastFirst, -1).copy_(w);
    const auto vw = to_vector(w);
    for (std::size_t i = 0; i < vw.size(); ++i) ASSERT_EQ(vw[i], 999.0 - static_cast<double>(i));
    w.slice(0, -2, kPastFirst, -3).fill_(-1.0);  // 998, 995, ..., 2
    const auto vf = to_vector(w);
    for (std::size_t i = 0; i < vf.size(); ++i) {
      ASSERT_EQ(vf[i], i % 3 == 2 ? -1.0 : 999.0 - static_cast<double>(i)) << i;
    }
    EXPECT_EQ(to_vector(cat({iota({3}).slice(0, kFirst, kPastFirst, -1), iota({2})}, 0)),
              (std::vector<double>{2, 1, 0, 0, 1}));
  }
}

// Tracking is per storage whatever the strides: a write through a reversed view on a held stream
// orders a read of the base on another.
TEST(NegativeSteps, TrackingIsSharedWithTheBase) {
  Stream s1, s2;
  Tensor base = zeros({8});
  base.wait();
  Gate gate;
  gate.hold(s1);
  {
    StreamContext ctx(s1);
    base.slice(0, kFirst, kPastFirst, -2).copy_(iota({4}));  // base[7], [5], [3], [1] = 0..3
  }
  Tensor total;
  {
    StreamContext ctx(s2);
    total = sum(base);
  }
  EXPECT_FALSE(total.ready());
  gate.open();
  EXPECT_EQ(total.item<float>(), 6.0f);
  EXPECT_EQ(to_vector(base), (std::vector<double>{0, 3, 0, 2, 0, 1, 0, 0}));
  EXPECT_FALSE(gate.timed_out());
}

// index_select gathers slices along any dimension (numpy's take), from strided inputs, with
// int32 or int64 indices (negative from the end); an entry out of range fails the stream.
TEST(IndexSelect, GathersLikeTake) {
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
