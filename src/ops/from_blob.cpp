// from_blob: tensors over memory the caller owns, compact or strided, with the checks that the
// layout fits an address space and has no aliasing elements.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "checks.hpp"
#include "memory_index.hpp"
#include "storage.hpp"
#include "streamrt/error.hpp"
#include "streamrt/tensor.hpp"
#include "tensor_access.hpp"

namespace streamrt {
namespace {

// The name the errors start with, as data: each binding spells it as the call its user made.
constexpr ApiName kFromBlob = api::function("from_blob");

// Memory for `n` elements of `dtype`: not null unless empty, aligned for the dtype.
void check_data(const void* data, std::int64_t n, const Shape& shape, DType dtype) {
  if (data == nullptr && n > 0) {
    throw Error(kFromBlob + ": data is null for a tensor of shape " + to_string(shape));
  }
  if (reinterpret_cast<std::uintptr_t>(data) % element_size(dtype) != 0) {
    throw Error(kFromBlob + ": data is not aligned for " + std::string(to_string(dtype)) +
                " (needs " + std::to_string(element_size(dtype)) + "-byte alignment)");
  }
}

constexpr std::int64_t kMaxI64 = std::numeric_limits<std::int64_t>::max();

// a * b + c without overflow, or nullopt.
std::optional<std::int64_t> mul_add(std::int64_t a, std::int64_t b, std::int64_t c) {
  std::int64_t p = 0, r = 0;
  if (__builtin_mul_overflow(a, b, &p) || __builtin_add_overflow(p, c, &r)) return std::nullopt;
  return r;
}

// `s` joined to the tracking of the wrapped and exposed memory it overlaps (memory_index.hpp);
// refused, it leaves the memory to the caller, as every other refusal of from_blob does.
std::shared_ptr<detail::Storage> indexed(std::shared_ptr<detail::Storage> s) {
  try {
    detail::index_wrapped(s);
  } catch (...) {
    s->forget_deleter();
    throw;
  }
  return s;
}

}  // namespace

Tensor from_blob(void* data, Shape shape, DType dtype, std::function<void(void*)> deleter,
                 Device device) {
  ops::check_device(device);
  const std::size_t nbytes = shape_nbytes(shape, dtype);
  const std::int64_t n = shape_numel(shape);
  check_data(data, n, shape, dtype);
  auto storage =
      indexed(std::make_shared<detail::Storage>(data, nbytes, device, std::move(deleter), false));
  return detail::TensorAccess::make(std::move(storage), std::move(shape), n, dtype);
}

Tensor from_blob(void* data, Shape shape, Shape strides, DType dtype,
                 std::function<void(void*)> deleter, Device device) {
  ops::check_device(device);
  const std::int64_t n = shape_numel(shape);
  if (strides.size() != shape.size()) {
    throw Error(kFromBlob + ": " + std::to_string(strides.size()) + " strides " +
                to_string(strides) + " for the " + std::to_string(shape.size()) + "-d shape " +
                to_string(shape) + "; give one stride per dimension");
  }
  check_data(data, n, shape, dtype);
  const auto esize = static_cast<std::int64_t>(element_size(dtype));
  auto describe_layout = [&] {
    return "shape " + to_string(shape) + ", strides " + to_string(strides);
  };
  auto unaddressable = [&] {
    return Error(kFromBlob + ": the layout (" + describe_layout() +
                 ") spans more memory than can be addressed");
  };
  // The lowest and highest element offsets reached, relative to `data`; the storage spans them.
  std::int64_t lo = 0, hi = 0;
  // Non-overlap: with the dimensions ordered by |stride|, each stride must step past everything
  // the smaller ones reach (sufficient, and it holds for every layout numpy, torch and streamrt
  // views make). Stride-0 dimensions alias on purpose (broadcasts) and are left out: writes to
  // them are refused elsewhere (check_writable).
  std::vector<std::pair<std::int64_t, std::int64_t>> dims;  // (|stride|, size)
  if (n > 0) {
    for (std::size_t d = 0; d < shape.size(); ++d) {
      if (shape[d] == 1) continue;
      const auto reach = mul_add(strides[d], shape[d] - 1, 0);
      const auto next =
          reach ? (*reach < 0 ? mul_add(1, lo, *reach) : mul_add(1, hi, *reach)) : std::nullopt;
      if (!next || strides[d] == std::numeric_limits<std::int64_t>::min()) throw unaddressable();
      (*reach < 0 ? lo : hi) = *next;
      if (strides[d] != 0) dims.emplace_back(std::abs(strides[d]), shape[d]);
    }
  }
  // Elements from the lowest to the highest address, and their bytes.
  const auto extent = mul_add(-1, lo, hi);
  const auto span = extent && *extent < kMaxI64 ? mul_add(*extent + 1, esize, 0) : std::nullopt;
  if (!span) throw unaddressable();
  std::sort(dims.begin(), dims.end());
  std::int64_t covered = 1;  // how far (in elements) the smaller dimensions reach, + 1
  for (const auto& [stride, size] : dims) {
    if (stride < covered) {
      throw Error(kFromBlob + ": distinct elements of the layout (" + describe_layout() +
                  ") share memory, so writes to them would race; copy the data into a "
                  "contiguous buffer first");
    }
    covered += stride * (size - 1);  // the sum stays <= *extent + 1: no overflow
  }
  char* first = static_cast<char*>(data);
  void* base = first + lo * esize;
  const std::size_t nbytes = n == 0 ? 0 : static_cast<std::size_t>(*span);
  // The storage starts at the lowest address (a reversed view's last element); the deleter
  // still gets the pointer it was given.
  std::function<void(void*)> release;
  if (deleter) release = [deleter = std::move(deleter), data](void*) { deleter(data); };
  auto storage = indexed(std::make_shared<detail::Storage>(n == 0 ? data : base, nbytes, device,
                                                           std::move(release), false));
  return detail::TensorAccess::make_view(std::move(storage), std::move(shape), std::move(strides),
                                         n == 0 ? 0 : -lo, dtype);
}

}  // namespace streamrt
