// Shape arithmetic: element counts, sizes in bytes, row-major strides and broadcasting (numpy
// rules), with the errors that name the shape at fault.
#include "streamrt/shape.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>

#include "layout.hpp"
#include "streamrt/error.hpp"
#include "streamrt/tensor.hpp"

namespace streamrt {

Shape broadcast_shapes(const Shape& a, const Shape& b) {
  const std::size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (std::size_t i = 0; i < n; ++i) {
    // Aligned from the right: dimension i of the result is a's (a.size() - n + i), if any.
    const std::int64_t x = i + a.size() >= n ? a[i + a.size() - n] : 1;
    const std::int64_t y = i + b.size() >= n ? b[i + b.size() - n] : 1;
    if (x != y && x != 1 && y != 1) {
      throw Error("shapes " + to_string(a) + " and " + to_string(b) +
                  " cannot be broadcast together (dimension " + std::to_string(i) + ": " +
                  std::to_string(x) + " vs " + std::to_string(y) +
                  "; sizes must match or be 1, aligned from the right)");
    }
    out[i] = x == 1 ? y : x;
  }
  return out;
}

std::string to_string(const Shape& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

Shape contiguous_strides(const Shape& shape) {
  Shape s(shape.size());
  std::int64_t stride = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    s[i] = stride;
    stride *= std::max<std::int64_t>(shape[i], 1);
  }
  return s;
}

std::int64_t shape_numel(const Shape& shape) {
  if (shape.size() > static_cast<std::size_t>(kMaxDims)) {
    throw Error("shape " + to_string(shape) + " has " + std::to_string(shape.size()) +
                " dimensions; tensors have at most " + std::to_string(kMaxDims) +
                " (reshape to fewer)");
  }
  std::int64_t n = 1;
  for (auto d : shape) {
    if (d < 0) {
      throw Error("shape " + to_string(shape) + " has a negative size; sizes must be >= 0");
    }
    if (d != 0 && n > std::numeric_limits<std::int64_t>::max() / d) {
      throw Error("shape " + to_string(shape) + " has too many elements (overflows int64)");
    }
    n *= d;
  }
  return n;
}

std::size_t shape_nbytes(const Shape& shape, DType dtype) {
  const std::int64_t n = shape_numel(shape);
  const auto esize = static_cast<std::int64_t>(element_size(dtype));
  if (n > kMaxTensorBytes / esize) {
    throw Error("shape " + to_string(shape) + " of " + std::string(to_string(dtype)) + " needs " +
                std::to_string(n) + " x " + std::to_string(esize) + " bytes, more than the " +
                std::to_string(kMaxTensorBytes) + " a tensor can address (2^63 - 1)");
  }
  return static_cast<std::size_t>(n * esize);
}

namespace ops {

Shape broadcast_strides(const Shape& shape, const Shape& strides, const Shape& to) {
  Shape out(to.size(), 0);
  const std::size_t lead = to.size() - shape.size();
  for (std::size_t i = 0; i < shape.size(); ++i) {
    out[lead + i] = shape[i] == to[lead + i] ? strides[i] : 0;
  }
  return out;
}

}  // namespace ops
}  // namespace streamrt
