// Element types: their names and the promotion rule of binary ops.
#include <cstddef>
#include <iterator>
#include <string_view>

#include "streamrt/tensor.hpp"

namespace streamrt {

std::string_view to_string(DType dtype) noexcept {
  // Indexed by the enumerators' values (0 to 4, fixed in tensor.hpp).
  constexpr std::string_view kNames[] = {"float32", "float64", "int32", "int64", "bool"};
  const auto i = static_cast<std::size_t>(dtype);
  return i < std::size(kNames) ? kNames[i] : "unknown";
}

DType promote_types(DType a, DType b) noexcept {
  if (a == b) return a;
  auto kind = [](DType d) { return d == DType::Bool ? 0 : is_floating(d) ? 2 : 1; };
  const int ka = kind(a), kb = kind(b);
  if (ka != kb) return ka > kb ? a : b;  // the higher kind's type, whatever its width (torch)
  return element_size(a) >= element_size(b) ? a : b;
}

}  // namespace streamrt
