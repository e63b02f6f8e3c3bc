#pragma once
// Strided iteration for kernels: K operands (output first by convention) walked together over one
// iteration shape, each with its own strides (0 along broadcast dimensions). Dimensions that are
// contiguous in every operand are merged first, so a dense tensor is one run whatever its rank.
#include <algorithm>
#include <array>
#include <cstdint>

#include "kernels.hpp"
#include "streamrt/tensor.hpp"

namespace streamrt::ops {

using streamrt::contiguous_strides;

// The strides of a tensor of `shape`/`strides` broadcast to `to` (numpy rules, checked earlier):
// leading and size-1-to-n dimensions get stride 0.
Shape broadcast_strides(const Shape& shape, const Shape& strides, const Shape& to);

// Where an operand's elements are: its storage (kept alive by the kernel's capture), offset and
// strides broadcast to the iteration shape.
struct Operand {
  std::int64_t offset = 0;
  Shape strides;
};

template <int K>
struct Loop {
  int ndim = 0;
  std::int64_t numel = 0;
  std::array<std::int64_t, kMaxDims> size{};
  std::array<std::array<std::int64_t, kMaxDims>, K> stride{};
};

// The loop over `shape` with each operand's strides (already broadcast to `shape`).
template <int K>
Loop<K> make_loop(const Shape& shape, const std::array<const Shape*, K>& strides) {
  Loop<K> l;
  l.numel = 1;
  for (auto s : shape) l.numel *= s;
  if (l.numel == 0) return l;
  // Size-1 dimensions drop out; a dimension merges into the one inside it when every operand
  // steps over the inner one exactly (stride[d] == stride[d+1] * size[d+1]).
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    if (l.ndim > 0) {
      // Try to merge the previous kept dimension (outer) with this one (inner).
      const int p = l.ndim - 1;
      bool mergeable = true;
      for (int k = 0; k < K; ++k) {
        if (l.stride[k][p] != (*strides[k])[d] * shape[d]) mergeable = false;
      }
      if (mergeable) {
        l.size[p] *= shape[d];
        for (int k = 0; k < K; ++k) l.stride[k][p] = (*strides[k])[d];
        continue;
      }
    }
    l.size[l.ndim] = shape[d];
    for (int k = 0; k < K; ++k) l.stride[k][l.ndim] = (*strides[k])[d];
    ++l.ndim;
  }
  return l;
}

// fn(offsets, count, inner_strides) for consecutive runs along the innermost dimension that cover
// the flat (row-major) indices [begin, end) of the loop; offsets are each operand's element
// offsets of the run's first element, relative to the operand's first element.
template <int K, class Fn>
void for_each_run(const Loop<K>& l, std::int64_t begin, std::int64_t end, Fn&& fn) {
  std::array<std::int64_t, K> off{};
  if (l.ndim == 0) {
    if (begin < end) fn(off, std::int64_t{1}, off);
    return;
  }
  const int last = l.ndim - 1;
  std::array<std::int64_t, kMaxDims> idx{};
  std::int64_t rem = begin;
  for (int d = last; d >= 0; --d) {
    idx[d] = rem % l.size[d];
    rem /= l.size[d];
    for (int k = 0; k < K; ++k) off[k] += idx[d] * l.stride[k][d];
  }
  std::array<std::int64_t, K> inner{};
  for (int k = 0; k < K; ++k) inner[k] = l.stride[k][last];
  std::int64_t pos = begin;
  while (pos < end) {
    const std::int64_t count = std::min(l.size[last] - idx[last], end - pos);
    fn(off, count, inner);
    pos += count;
    idx[last] += count;
    for (int k = 0; k < K; ++k) off[k] += count * inner[k];
    for (int d = last; d > 0 && idx[d] == l.size[d]; --d) {
      idx[d] = 0;
      ++idx[d - 1];
      for (int k = 0; k < K; ++k) off[k] += l.stride[k][d - 1] - l.size[d] * l.stride[k][d];
    }
  }
}

// for_each_run over the whole loop, split across the pool when large. `grain` is the fewest
// elements per chunk.
template <int K, class Fn>
void parallel_runs(const Loop<K>& l, Fn&& fn, std::int64_t grain = kElementGrain) {
  if (l.numel <= grain) {
    for_each_run(l, 0, l.numel, fn);
    return;
  }
  runtime::parallel_for(0, l.numel, grain,
                        [&](std::int64_t b, std::int64_t e) { for_each_run(l, b, e, fn); });
}

}  // namespace streamrt::ops
