// Creation ops and the fresh tensors every op's result starts as.
#include "creation.hpp"

#include <utility>

#include "checks.hpp"
#include "fill_copy.hpp"
#include "kernels.hpp"
#include "storage.hpp"
#include "streamrt/error.hpp"
#include "streamrt/tensor.hpp"
#include "tensor_access.hpp"
#include "tracking.hpp"

namespace streamrt {
namespace ops {

Tensor new_tensor(Shape shape, DType dtype, Device device) {
  check_device(device);
  const std::size_t nbytes = shape_nbytes(shape, dtype);
  const std::int64_t n = shape_numel(shape);
  auto storage = Storage::allocate(nbytes, device);
  return detail::TensorAccess::make(std::move(storage), std::move(shape), n, dtype);
}

Tensor new_tensor(Shape shape, DType dtype, const Stream& stream) {
  check_device(stream.device());
  const std::size_t nbytes = shape_nbytes(shape, dtype);
  const std::int64_t n = shape_numel(shape);
  auto storage = Storage::allocate(nbytes, stream);
  return detail::TensorAccess::make(std::move(storage), std::move(shape), n, dtype);
}

}  // namespace ops

Tensor empty(Shape shape, DType dtype, Device device) {
  return ops::new_tensor(std::move(shape), dtype, device);
}

Tensor full(Shape shape, double value, DType dtype, Device device) {
  Tensor t = ops::new_tensor(std::move(shape), dtype, device);
  ops::enqueue_fill(t, value);
  return t;
}

Tensor zeros(Shape shape, DType dtype, Device device) {
  return full(std::move(shape), 0.0, dtype, device);
}

Tensor ones(Shape shape, DType dtype, Device device) {
  return full(std::move(shape), 1.0, dtype, device);
}

Tensor arange(std::int64_t n, DType dtype, Device device) {
  if (n < 0) throw Error("arange(" + std::to_string(n) + "): n must be >= 0");
  if (dtype == DType::Bool) throw Error("arange: dtype bool is not supported; use a numeric dtype");
  Tensor t = ops::new_tensor({n}, dtype, device);
  void* pt = detail::TensorAccess::storage(t)->data();
  ops::submit("arange", device, {}, {&t}, [pt, dtype, n] {
    ops::dispatch(dtype, [&](auto tag) {
      using T = decltype(tag);
      T* p = static_cast<T*>(pt);
      ops::parallel_elements(n, [&](std::int64_t i) { p[i] = static_cast<T>(i); });
    });
  });
  return t;
}

}  // namespace streamrt
