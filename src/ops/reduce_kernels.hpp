#pragma once
// The contiguous fast path of the full reductions (sum, mean): a dense run of n elements, summed
// in fixed blocks (SIMD for floats) in a fixed order, so results do not depend on the worker count.
#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "kernels.hpp"
#include "simd_kernels.hpp"

namespace streamrt::ops {

// Elements per partial sum. Fixed (not derived from the worker count), so the rounding of float
// sums is the same whatever the pool size.
inline constexpr std::int64_t kSumBlock = std::int64_t{1} << 16;

// Sum of n elements: double for floats, int64 (wrapping) for integers; blocks summed in order.
template <class T, class Acc>
Acc sum_contiguous(const T* p, std::int64_t n) {
  const std::int64_t blocks = (n + kSumBlock - 1) / kSumBlock;
  std::vector<Acc> partial(static_cast<std::size_t>(blocks), Acc{0});
  auto block_sum = [&](std::int64_t blk) {
    const std::int64_t begin = blk * kSumBlock, end = std::min(n, begin + kSumBlock);
    Acc acc{0};
    if constexpr (std::is_floating_point_v<Acc> && std::is_floating_point_v<T>) {
      acc = static_cast<Acc>(simd::sum_block(p + begin, end - begin));
    } else if constexpr (std::is_floating_point_v<Acc>) {
      for (std::int64_t i = begin; i < end; ++i) acc += static_cast<Acc>(p[i]);
    } else {
      std::uint64_t u = 0;
      for (std::int64_t i = begin; i < end; ++i) u += static_cast<std::uint64_t>(p[i]);
      acc = static_cast<Acc>(u);
    }
    partial[static_cast<std::size_t>(blk)] = acc;
  };
  if (blocks == 1) {
    block_sum(0);
  } else {
    runtime::parallel_for(0, blocks, 1, [&](std::int64_t b0, std::int64_t b1) {
      for (std::int64_t blk = b0; blk < b1; ++blk) block_sum(blk);
    });
  }
  if constexpr (std::is_floating_point_v<Acc>) {
    Acc total{0};
    for (Acc v : partial) total += v;
    return total;
  } else {
    std::uint64_t total = 0;
    for (Acc v : partial) total += static_cast<std::uint64_t>(v);
    return static_cast<Acc>(total);
  }
}

}  // namespace streamrt::ops
