#pragma once
// The fill and copy kernels (fill_copy.cpp), enqueued with tracking: what fill_, copy_, to(),
// clone() and the creation ops run.
#include "streamrt/tensor.hpp"

namespace streamrt::ops {

// Enqueues t.fill_(value) (tracked write).
void enqueue_fill(Tensor& t, double value);
// Enqueues dst <- src with dtype conversion (tracked); `src` broadcasts to dst's shape (checked).
void enqueue_copy(Tensor& dst, const Tensor& src, const char* label);

// `t` converted to `dtype` on the current stream (itself when it already has that dtype).
Tensor as_dtype(const Tensor& t, DType dtype);

}  // namespace streamrt::ops
