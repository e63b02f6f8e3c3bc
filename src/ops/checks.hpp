#pragma once
// Argument checks shared by the ops: each throws Error naming the op and the fix.
#include <string>

#include "streamrt/device.hpp"
#include "streamrt/tensor.hpp"

namespace streamrt::ops {

// Throws Error naming the op when `t` is undefined.
void check_defined(const Tensor& t, const char* op);
// Throws Error for devices without tensor support (CPU only here) or a bad index.
void check_device(const Device& device);
// Throws Error naming `op` when `t` has elements that alias (an expanded view): writing it would
// race with itself.
void check_writable(const Tensor& t, const char* op);
// "float32 [2, 3]", for messages.
std::string describe(const Tensor& t);
// Throws Error naming both devices when they differ.
void check_same_device(const char* op, const Tensor& a, const Tensor& b);
// Normalises a possibly negative dimension index against `ndim` (Error naming `op` when out of
// range).
int wrap_dim(int d, int ndim, const char* op);

}  // namespace streamrt::ops
