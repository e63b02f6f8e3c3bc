// Argument checks shared by the ops.
#include "checks.hpp"

#include <algorithm>
#include <string>

#include "streamrt/error.hpp"
#include "streamrt/impl/backend.hpp"

namespace streamrt::ops {

void check_writable(const Tensor& t, const char* op) {
  for (int d = 0; d < t.dim(); ++d) {
    if (t.strides()[static_cast<std::size_t>(d)] == 0 &&
        t.shape()[static_cast<std::size_t>(d)] > 1) {
      throw Error(std::string(op) + ": the tensor " + to_string(t.shape()) +
                  " is an expanded view (stride 0 in dimension " + std::to_string(d) +
                  "): several of its elements share one memory location; write to a "
                  "contiguous() copy instead");
    }
  }
}

std::string describe(const Tensor& t) {
  return std::string(to_string(t.dtype())) + " " + to_string(t.shape());
}

void check_same_device(const char* op, const Tensor& a, const Tensor& b) {
  if (a.device() != b.device()) {
    throw Error(std::string(op) + ": tensors are on different devices (" + a.device().str() +
                " and " + b.device().str() + ")");
  }
}

int wrap_dim(int d, int ndim, const char* op) {
  const int n = std::max(ndim, 1);  // a 0-d tensor accepts dim 0 and -1, as torch
  if (d < -n || d >= n) {
    throw Error(std::string(op) + ": dimension " + std::to_string(d) + " is out of range for a " +
                std::to_string(ndim) + "-d tensor (use " + std::to_string(-n) + " to " +
                std::to_string(n - 1) + ")");
  }
  return d < 0 ? d + n : d;
}

void check_defined(const Tensor& t, const char* op) {
  if (!t.defined()) {
    throw Error(std::string(op) +
                ": the tensor is undefined (default-constructed); create it with empty(), "
                "zeros(), from_blob() or an op first");
  }
}

void check_device(const Device& device) {
  // The CPU backend is made when the library loads and has device 0 (allocator.cpp): nothing to
  // look up for the device nearly every tensor is on.
  if (device == Device{}) return;
  if (device.type != DeviceType::CPU) {
    throw Error("tensors on " + device.str() +
                " are not supported in this build: only CPU tensors (" + api::device("cpu") + ")");
  }
  impl::backend_for(device);  // checks the index
}

}  // namespace streamrt::ops
