// The arithmetic and comparison operators on tensors, each the named element-wise op it spells
// (elementwise.cpp).
#include "elementwise.hpp"
#include "streamrt/ops.hpp"

namespace streamrt {

Tensor operator+(const Tensor& a, const Tensor& b) {
  return add(a, b);
}
Tensor operator+(const Tensor& a, double s) {
  return add(a, s);
}
Tensor operator+(double s, const Tensor& a) {
  return add(a, s);
}
Tensor operator-(const Tensor& a, const Tensor& b) {
  return sub(a, b);
}
Tensor operator-(const Tensor& a, double s) {
  return sub(a, s);
}
Tensor operator-(double s, const Tensor& a) {
  return ops::binary_scalar(ops::BinaryOp::kSub, a, s, true);
}
Tensor operator-(const Tensor& a) {
  return neg(a);
}
Tensor operator*(const Tensor& a, const Tensor& b) {
  return mul(a, b);
}
Tensor operator*(const Tensor& a, double s) {
  return mul(a, s);
}
Tensor operator*(double s, const Tensor& a) {
  return mul(a, s);
}
Tensor operator/(const Tensor& a, const Tensor& b) {
  return div(a, b);
}
Tensor operator/(const Tensor& a, double s) {
  return div(a, s);
}
Tensor operator/(double s, const Tensor& a) {
  return ops::binary_scalar(ops::BinaryOp::kDiv, a, s, true);
}
Tensor operator<(const Tensor& a, const Tensor& b) {
  return lt(a, b);
}
Tensor operator<=(const Tensor& a, const Tensor& b) {
  return le(a, b);
}
Tensor operator>(const Tensor& a, const Tensor& b) {
  return gt(a, b);
}
Tensor operator>=(const Tensor& a, const Tensor& b) {
  return ge(a, b);
}
Tensor operator<(const Tensor& a, double s) {
  return lt(a, s);
}
Tensor operator<=(const Tensor& a, double s) {
  return le(a, s);
}
Tensor operator>(const Tensor& a, double s) {
  return gt(a, s);
}
Tensor operator>=(const Tensor& a, double s) {
  return ge(a, s);
}

}  // namespace streamrt
