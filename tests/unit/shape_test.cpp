// streamrt::Shape: a std::vector-like list held inline up to kMaxDims entries, spilling to the
// heap past that; tensors keep their sizes and strides in it without an allocation. And the shape
// math of tensors: contiguous strides, numpy's broadcasting.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "ops_test_util.hpp"
#include "streamrt/error.hpp"
#include "streamrt/streamrt.hpp"
#include "streamrt/tensor.hpp"

namespace {

using streamrt::kMaxDims;
using streamrt::Shape;
using Vec = std::vector<std::int64_t>;

// True when the entries live inside the object itself (no heap block).
template <class T>
bool stored_in(const Shape& s, const T& owner) {
  const auto* lo = reinterpret_cast<const char*>(&owner);
  const auto* p = reinterpret_cast<const char*>(s.data());
  return p >= lo && p < lo + sizeof(T);
}

TEST(Shape, UpToMaxDimsEntriesAreInlineThroughCopiesAndMoves) {
  for (std::size_t n = 0; n <= static_cast<std::size_t>(kMaxDims); ++n) {
    Shape s;
    for (std::size_t i = 0; i < n; ++i) s.push_back(static_cast<std::int64_t>(10 + i));
    EXPECT_TRUE(stored_in(s, s)) << n;
    Shape copy = s;
    EXPECT_TRUE(stored_in(copy, copy)) << n;
    EXPECT_EQ(copy, s);
    Shape moved = std::move(copy);
    EXPECT_TRUE(stored_in(moved, moved)) << n;
    EXPECT_EQ(moved, s);
    EXPECT_EQ(Vec(moved), Vec(s));
  }
}

TEST(Shape, MoreThanMaxDimsEntriesSpillToTheHeapAndKeepTheirValues) {
  Shape s;
  Vec model;
  for (int i = 0; i < 3 * kMaxDims; ++i) {
    s.push_back(i * 7 - 3);
    model.push_back(i * 7 - 3);
    ASSERT_EQ(Vec(s), model) << i;
  }
  EXPECT_FALSE(stored_in(s, s));
  Shape copy = s;
  EXPECT_EQ(Vec(copy), model);
  Shape moved = std::move(copy);
  EXPECT_EQ(Vec(moved), model);
  moved = Shape{1, 2};  // back to a short list: the values, not the old heap contents
  EXPECT_EQ(Vec(moved), (Vec{1, 2}));
  s = moved;
  EXPECT_EQ(Vec(s), (Vec{1, 2}));
}

TEST(Shape, TooManyDimensionsIsStillAClearErrorWhereAShapeIsUsed) {
  const Shape nine(static_cast<std::size_t>(kMaxDims) + 1, 1);
  try {
    (void)streamrt::shape_numel(nine);
    FAIL() << "no error for " << nine.size() << " dimensions";
  } catch (const streamrt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("at most 8"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)streamrt::zeros(nine), streamrt::Error);
}

TEST(Shape, ConvertsToAndFromStdVector) {
  const Vec v{4, 0, 2};
  const Shape s = v;
  EXPECT_EQ(s.size(), 3u);
  EXPECT_TRUE(s == v);
  EXPECT_TRUE(v == Vec(s));
  EXPECT_FALSE(s == (Vec{4, 0}));
  EXPECT_FALSE(s == (Vec{4, 0, 3}));
  EXPECT_NE(s, (Shape{4, 0, 3}));
  const Vec back = s;
  EXPECT_EQ(back, v);
  const Shape from_iters(v.rbegin(), v.rend());
  EXPECT_EQ(from_iters, (Shape{2, 0, 4}));
  EXPECT_EQ(Shape(2, 5), (Shape{5, 5}));
  EXPECT_EQ(Shape{5}.size(), 1u);  // braces: one entry of 5, as with std::vector
}

// Random edits applied to a Shape and to a std::vector must agree (inline and spilled sizes).
TEST(Shape, EditsMatchStdVector) {
  std::mt19937 rng(12345);
  for (int round = 0; round < 200; ++round) {
    Shape s;
    Vec model;
    for (int step = 0; step < 40; ++step) {
      const int op = static_cast<int>(rng() % 7);
      const auto v = static_cast<std::int64_t>(rng() % 100) - 50;
      const std::size_t at = model.empty() ? 0 : rng() % (model.size() + 1);
      switch (op) {
        case 0:
          s.push_back(v);
          model.push_back(v);
          break;
        case 1:
          if (!model.empty()) {
            s.pop_back();
            model.pop_back();
          }
          break;
        case 2:
          s.insert(s.begin() + static_cast<std::ptrdiff_t>(at), v);
          model.insert(model.begin() + static_cast<std::ptrdiff_t>(at), v);
          break;
        case 3:
          if (at < model.size()) {
            s.erase(s.begin() + static_cast<std::ptrdiff_t>(at));
            model.erase(model.begin() + static_cast<std::ptrdiff_t>(at));
          }
          break;
        case 4: {
          const std::size_t n = rng() % 12;
          s.resize(n, v);
          model.resize(n, v);
          break;
        }
        case 5: {
          const Vec extra{v, v + 1, v + 2};
          s.insert(s.begin() + static_cast<std::ptrdiff_t>(at), extra.begin(), extra.end());
          model.insert(model.begin() + static_cast<std::ptrdiff_t>(at), extra.begin(), extra.end());
          break;
        }
        default: {
          Shape copy = s;  // copies of either storage compare equal and stay independent
          ASSERT_EQ(copy, s);
          if (!copy.empty()) {
            copy[0] += 1;
            ASSERT_FALSE(copy == s);
          }
          break;
        }
      }
      ASSERT_EQ(Vec(s), model) << "round " << round << " step " << step << " op " << op;
      ASSERT_EQ(s.empty(), model.empty());
      if (!model.empty()) {
        ASSERT_EQ(s.front(), model.front());
        ASSERT_EQ(s.back(), model.back());
      }
    }
  }
}

TEST(Shape, TensorsKeepSizesAndStridesWithoutAHeapBlock) {
  const streamrt::Tensor t = streamrt::ones({2, 3, 4});
  EXPECT_TRUE(stored_in(t.shape(), t));
  EXPECT_TRUE(stored_in(t.strides(), t));
  const streamrt::Tensor v = t.transpose(0, 2);
  EXPECT_EQ(v.shape(), (Shape{4, 3, 2}));
  EXPECT_EQ(v.strides(), (Shape{1, 4, 12}));
  const streamrt::Tensor copy = v;
  EXPECT_TRUE(stored_in(copy.shape(), copy));
  EXPECT_EQ(copy.shape(), v.shape());
}

}  // namespace

// ---- Shape math of tensors: contiguous strides and numpy's broadcasting -------------------------

namespace streamrt {
namespace {

using test::expect_error_containing;

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

}  // namespace
}  // namespace streamrt
