// Views (strides without copies): transpose, permute, slices (negative steps too), expand; writes
// through them, their tracking with the base, strided ops at every worker count. Reference values
// come from plain loops here; python/tests/test_ops_properties.py compares against numpy over
// random shapes.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "ops_test_util.hpp"
#include "streamrt/streamrt.hpp"

namespace streamrt {
namespace {

using test::expect_error_containing;
using test::Gate;
using test::iota;
using test::to_vector;

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

// Runs `write` (through a view of `base`) on a stream held at a gate, then sums `base` on another
// stream: the sum is not ready while the writer is held. Returns it once the gate has opened.
float sum_after_held_write(Tensor base, const std::function<void()>& write) {
  Stream s1, s2;
  base.wait();
  Gate gate;
  gate.hold(s1);
  {
    StreamContext ctx(s1);
    write();
  }
  Tensor total;
  {
    StreamContext ctx(s2);
    total = sum(base);
  }
  EXPECT_FALSE(total.ready());
  gate.open();
  const float result = total.item<float>();
  EXPECT_FALSE(gate.timed_out());
  return result;
}

// A write through a view on one stream orders a read of the base on another (tracking is per
// storage, shared by every view). The gate holds the writer back: without tracking the reader
// would see the old zeros.
TEST(Views, TrackingIsSharedWithTheBase) {
  Tensor base = zeros({4, 4});
  EXPECT_EQ(sum_after_held_write(base, [&] { base.T().select(0, 1).fill_(3.0); }),  // column 1
            12.0f);
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
  Tensor base = zeros({8});
  // base[7], [5], [3], [1] = 0..3
  EXPECT_EQ(
      sum_after_held_write(base, [&] { base.slice(0, kFirst, kPastFirst, -2).copy_(iota({4})); }),
      6.0f);
  EXPECT_EQ(to_vector(base), (std::vector<double>{0, 3, 0, 2, 0, 1, 0, 0}));
}

}  // namespace
}  // namespace streamrt
