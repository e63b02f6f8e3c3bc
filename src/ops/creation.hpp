#pragma once
// New tensors for the ops' results: fresh storage from the caching allocator, no work queued.
#include "streamrt/stream.hpp"
#include "streamrt/tensor.hpp"

namespace streamrt::ops {

// A new tensor with fresh storage (no work queued). Validates shape and device.
Tensor new_tensor(Shape shape, DType dtype, Device device);
// As new_tensor(shape, dtype, stream.device()), with memory for work on `stream`.
Tensor new_tensor(Shape shape, DType dtype, const Stream& stream);

}  // namespace streamrt::ops
