// Element-wise ops with numpy broadcasting and torch's dtype promotion: the operands are converted
// to the result dtype first (one queued conversion each, only when they differ), then one kernel
// walks them with their own strides (stride 0 along broadcast dimensions). Dense same-shape
// operands take the contiguous kernels of elementwise.hpp.
#include "elementwise.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>

#include "checks.hpp"
#include "creation.hpp"
#include "fill_copy.hpp"
#include "layout.hpp"
#include "storage.hpp"
#include "streamrt/error.hpp"
#include "streamrt/ops.hpp"
#include "tensor_access.hpp"
#include "tracking.hpp"

namespace streamrt {
namespace ops {

#define STREAMRT_CASE(Name, name, ...) \
  case Op::k##Name:                    \
    return #name;
const char* op_name(BinaryOp op) noexcept {
  using Op = BinaryOp;
  switch (op) { STREAMRT_ARITHMETIC_OPS(STREAMRT_CASE) STREAMRT_OTHER_BINARY_OPS(STREAMRT_CASE) }
  return "unknown";
}
const char* op_name(UnaryOp op) noexcept {
  using Op = UnaryOp;
  switch (op) { STREAMRT_UNARY_OPS(STREAMRT_CASE) }
  return "unknown";
}
const char* op_name(CompareOp op) noexcept {
  using Op = CompareOp;
  switch (op) { STREAMRT_COMPARE_OPS(STREAMRT_CASE) }
  return "unknown";
}
#undef STREAMRT_CASE

namespace {

using detail::TensorAccess;

// Where a kernel finds one operand: its memory, first element and strides broadcast to the
// iteration shape. A raw pointer: the memory of an op's operands stays valid until its kernel has
// run (ops::submit's rule), so kernels take no references.
struct Arg {
  void* base = nullptr;
  std::int64_t offset = 0;
  Shape strides;
  bool dense = false;  // contiguous and of the iteration shape

  template <class T>
  T* ptr() const {
    return static_cast<T*>(base) + offset;
  }
};

// The memory of `t`'s storage, for a kernel (see Arg).
void* data_of(const Tensor& t) {
  return TensorAccess::storage(t)->data();
}

Arg arg(const Tensor& t, const Shape& shape) {
  Arg a;
  a.base = data_of(t);
  a.offset = t.storage_offset();
  a.strides = broadcast_strides(t.shape(), t.strides(), shape);
  a.dense = t.is_contiguous() && t.shape() == shape;
  return a;
}

// True when t's elements fill one dense block of memory in some dimension order (contiguous,
// transposed, permuted): an element-wise op can then run over the flat memory.
bool dense_block(const Tensor& t) {
  // (stride, size) of the dimensions that are not 1. Left uninitialised (only the first n are
  // read): zero-filling it was a visible part of a small op's host time.
  struct Dim {
    std::int64_t first, second;
  };
  std::array<Dim, kMaxDims> dims;
  std::size_t n = 0;
  for (std::size_t d = 0; d < t.shape().size(); ++d) {
    if (t.shape()[d] != 1) dims[n++] = {t.strides()[d], t.shape()[d]};
  }
  // Insertion sort by stride: at most kMaxDims entries (std::sort on a partial std::array trips
  // g++ 12's -Warray-bounds, as in tracking.cpp).
  for (std::size_t i = 1; i < n; ++i) {
    for (std::size_t j = i; j > 0 && dims[j].first < dims[j - 1].first; --j) {
      std::swap(dims[j], dims[j - 1]);
    }
  }
  std::int64_t expected = 1;
  for (std::size_t i = 0; i < n; ++i) {
    if (dims[i].first != expected) return false;
    expected *= dims[i].second;
  }
  return true;
}

// The output of an element-wise op whose inputs all have `shape`. When they share strides that
// form a dense block, the output takes those strides (torch keeps the layout too, so x.T + y.T
// is a transposed result) and `flat` is set: the op runs over the flat memory, one dense run.
// Otherwise the output is contiguous and the op walks the inputs' strides. Its memory is for work
// on `stream` (the op's stream, looked up once per op).
Tensor elementwise_output(const Shape& shape, DType dtype, const Stream& stream,
                          std::initializer_list<const Tensor*> inputs, bool& flat) {
  const Tensor& first = **inputs.begin();
  flat = true;
  for (const Tensor* t : inputs) {
    if (t->shape() != shape || t->strides() != first.strides()) flat = false;
  }
  // Every input has `shape` here, so the first one's element count is the output's.
  if (flat) flat = first.numel() > 0 && dense_block(first);
  if (!flat || first.is_contiguous()) return new_tensor(shape, dtype, stream);
  check_device(stream.device());
  auto storage = Storage::allocate(shape_nbytes(shape, dtype), stream);
  return TensorAccess::make_view(std::move(storage), shape, first.strides(), 0, dtype);
}

// An operand of a flat op for kernels that take the dense path whenever every operand is dense:
// its dense block from the first element (strides are all positive, so the first element is the
// lowest address), with no strides.
Arg dense_arg(const Tensor& t) {
  Arg a;
  a.base = data_of(t);
  a.offset = t.storage_offset();
  a.dense = true;
  return a;
}

// As dense_arg, with the one stride of the flat run, for kernels that may walk strides.
Arg flat_arg(const Tensor& t) {
  Arg a = dense_arg(t);
  a.strides = {1};
  return a;
}

// `t` in `dtype`: t itself when it has that dtype, else a converted copy held in `holder`.
const Tensor& in_dtype(const Tensor& t, DType dtype, Tensor& holder) {
  if (t.dtype() == dtype) return t;
  holder = t.to(dtype);
  return holder;
}

// The broadcast shape, with the op's name in the error.
Shape broadcast(const char* op, const Shape& a, const Shape& b) {
  try {
    return broadcast_shapes(a, b);
  } catch (const Error& e) {
    throw Error(std::string(op) + ": " + e.what());
  }
}

// As broadcast, but a itself when the shapes are equal (no copy), else the result held in
// `holder`. With in_dtype: a small op's host cost is mostly allocations, and each copied shape or
// tensor is one or two.
const Shape& broadcast_ref(const char* op, const Shape& a, const Shape& b, Shape& holder) {
  if (a == b) return a;
  holder = broadcast(op, a, b);
  return holder;
}

void check_pair(const char* op, const Tensor& a, const Tensor& b) {
  check_defined(a, op);
  check_defined(b, op);
  check_same_device(op, a, b);
}

void check_numeric(const char* op, const Tensor& a) {
  if (a.dtype() == DType::Bool) {
    throw Error(std::string(op) + ": the tensor is " + describe(a) +
                "; arithmetic needs a numeric dtype (convert with to())");
  }
}

// out[i] = f(x[i], y[i]) over `shape` (out dense), with the strided walk.
template <class O, class T, class F>
void binary_strided(const Shape& shape, O* out, const T* x, const Arg& ax, const T* y,
                    const Arg& ay, F f) {
  const Shape out_strides = contiguous_strides(shape);
  const auto loop = make_loop<3>(shape, {&out_strides, &ax.strides, &ay.strides});
  parallel_runs(loop, [&](const auto& off, std::int64_t count, const auto& inc) {
    O* o = out + off[0];
    const T* p = x + off[1];
    const T* q = y + off[2];
    for (std::int64_t i = 0; i < count; ++i) o[i * inc[0]] = f(p[i * inc[1]], q[i * inc[2]]);
  });
}

// out[i] = f(x[i]) over `shape` (out dense).
template <class O, class T, class F>
void unary_strided(const Shape& shape, O* out, const T* x, const Arg& ax, F f) {
  const Shape out_strides = contiguous_strides(shape);
  const auto loop = make_loop<2>(shape, {&out_strides, &ax.strides});
  parallel_runs(loop, [&](const auto& off, std::int64_t count, const auto& inc) {
    O* o = out + off[0];
    const T* p = x + off[1];
    if (inc[0] == 1 && inc[1] == 1) {
      for (std::int64_t i = 0; i < count; ++i) o[i] = f(p[i]);
    } else {
      for (std::int64_t i = 0; i < count; ++i) o[i * inc[0]] = f(p[i * inc[1]]);
    }
  });
}

// An element-wise op of one tensor: checks nothing, allocates `out_dtype` of a's shape and runs
// kernel(out_ptr_type, in arg) on the stream.
template <class Kernel>
Tensor map_tensor(const char* name, const Tensor& a, DType out_dtype, Kernel kernel) {
  bool flat = false;
  Stream s = current_stream(a.device());
  Tensor out = elementwise_output(a.shape(), out_dtype, s, {&a}, flat);
  void* o = data_of(out);
  // Flat: one dense run of numel elements (the output has a's layout).
  Arg in = flat ? flat_arg(a) : arg(a, a.shape());
  Shape shape = flat ? Shape{a.numel()} : a.shape();
  submit(s, name, {&a}, {&out},
         [o, in = std::move(in), shape = std::move(shape), kernel] { kernel(o, in, shape); });
  return out;
}

// Checks that `s` suits an integer tensor (integral, finite); `what` says which op.
void check_integral_scalar(const char* op, const Tensor& a, double s, const char* what) {
  if (!std::isfinite(s) || s != std::trunc(s)) {
    throw Error(std::string(op) + ": the " + what + " " + std::to_string(s) +
                " is not an integer, but the tensor is " + describe(a) +
                "; convert the tensor with to(" + api::enumerator("DType", "Float32") + ") first");
  }
}

template <class T>
T ipow(T base, std::int64_t e) {
  using U = std::make_unsigned_t<T>;  // wraps on overflow, as torch
  U result = 1, b = static_cast<U>(base);
  while (e > 0) {
    if (e & 1) result = static_cast<U>(result * b);
    b = static_cast<U>(b * b);
    e >>= 1;
  }
  return static_cast<T>(result);
}

// The dense binary kernel in the bytes a queue entry holds inline (detail::kQueueInlineBytes):
// the operands as byte offsets from the output and a 32-bit count. The general capture (three
// pointers and a count) is 40 bytes and goes to the heap: a second block per op, allocated by the
// launching thread and freed by the worker, whose cache line then crosses cores on every op.
struct SmallDenseBinary {
  void* out;
  std::int32_t dx;  // bytes from `out` to the first operand
  std::int32_t dy;
  std::uint32_t n;
  DType dtype;
  std::uint8_t op;

  // The kernel when every figure fits its field; nullopt otherwise (the caller uses the general
  // capture). Addresses are compared as integers: the operands are separate allocations.
  static std::optional<SmallDenseBinary> make(BinaryOp op, DType dtype, void* out, const void* x,
                                              const void* y, std::int64_t n) {
    auto offset = [out](const void* p) {
      return static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(p) -
                                       reinterpret_cast<std::uintptr_t>(out));
    };
    const std::int64_t dx = offset(x), dy = offset(y);
    constexpr auto kLo = std::numeric_limits<std::int32_t>::min();
    constexpr auto kHi = std::numeric_limits<std::int32_t>::max();
    if (dx < kLo || dx > kHi || dy < kLo || dy > kHi || n < 0 ||
        n > std::numeric_limits<std::uint32_t>::max()) {
      return std::nullopt;
    }
    return SmallDenseBinary{out,
                            static_cast<std::int32_t>(dx),
                            static_cast<std::int32_t>(dy),
                            static_cast<std::uint32_t>(n),
                            dtype,
                            static_cast<std::uint8_t>(op)};
  }

  void operator()() const {
    const auto base = reinterpret_cast<std::uintptr_t>(out);
    const void* x = reinterpret_cast<const void*>(
        base + static_cast<std::uintptr_t>(static_cast<std::int64_t>(dx)));
    const void* y = reinterpret_cast<const void*>(
        base + static_cast<std::uintptr_t>(static_cast<std::int64_t>(dy)));
    dispatch(dtype, [&](auto tag) {
      using T = decltype(tag);
      binary_contiguous<T>(static_cast<BinaryOp>(op), static_cast<const T*>(x),
                           static_cast<const T*>(y), static_cast<T*>(out), n);
    });
  }
};
static_assert(detail::QueueWork::kStoresInline<SmallDenseBinary>,
              "the small dense kernel must fit a queue entry's inline storage");

}  // namespace

// The operands of a two-tensor op in their common dtype and broadcast shape, and the current
// stream (looked up once for the output's memory and the kernel: each lookup is a handle copy, two
// atomic operations on the stream's reference count). A conversion or a broadcast shape lives in
// the holders; otherwise the references name the arguments themselves, so nothing is copied.
class PairOperands {
  Shape shape_holder_;  // declared first: the references below are initialised from them
  Tensor x_holder_, y_holder_;

 public:
  PairOperands(const char* name, const Tensor& a, const Tensor& b, DType dtype)
      : shape(broadcast_ref(name, a.shape(), b.shape(), shape_holder_)),
        x(in_dtype(a, dtype, x_holder_)),
        y(in_dtype(b, dtype, y_holder_)),
        stream(current_stream(a.device())) {}
  PairOperands(const PairOperands&) = delete;
  PairOperands& operator=(const PairOperands&) = delete;

  const Shape& shape;
  const Tensor& x;
  const Tensor& y;
  Stream stream;
};

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b) {
  const char* name = op_name(op);
  check_pair(name, a, b);
  const DType dtype = promote_types(a.dtype(), b.dtype());
  if (dtype == DType::Bool) {
    throw Error(std::string(name) + ": both tensors are bool (" + describe(a) + " and " +
                describe(b) + "); arithmetic needs a numeric dtype (convert with to())");
  }
  PairOperands in(name, a, b, dtype);
  const Shape& shape = in.shape;
  const Tensor &x = in.x, &y = in.y;
  Stream& s = in.stream;
  bool flat = false;
  Tensor out = elementwise_output(shape, dtype, s, {&x, &y}, flat);
  void* o = data_of(out);
  if (flat) {
    // Both operands dense: the kernel captures three pointers and a count, no shape or strides.
    const void* px = x.data_ptr_unsafe();
    const void* py = y.data_ptr_unsafe();
    if (auto small = SmallDenseBinary::make(op, dtype, o, px, py, out.numel())) {
      submit(s, name, {&x, &y}, {&out}, *small);
      return out;
    }
    submit(s, name, {&x, &y}, {&out}, [o, px, py, dtype, op, n = out.numel()] {
      dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
        binary_contiguous<T>(op, static_cast<const T*>(px), static_cast<const T*>(py),
                             static_cast<T*>(o), n);
      });
    });
    return out;
  }
  submit(s, name, {&x, &y}, {&out}, [o, ax = arg(x, shape), ay = arg(y, shape), shape, dtype, op] {
    dispatch(dtype, [&](auto tag) {
      using T = decltype(tag);
      with_binary(op, [&](auto f) {
        binary_strided(shape, static_cast<T*>(o), ax.ptr<const T>(), ax, ay.ptr<const T>(), ay, f);
      });
    });
  });
  return out;
}

// a (op) s, or s (op) a when `reversed`.
Tensor binary_scalar(BinaryOp op, const Tensor& a, double s, bool reversed) {
  const char* name = op_name(op);
  check_defined(a, name);
  check_numeric(name, a);
  if (!is_floating(a.dtype())) {
    check_integral_scalar(name, a, s, "scalar");
    if (op == BinaryOp::kDiv && !reversed && s == 0) {
      throw Error(std::string(name) + ": integer division by zero (tensor " + describe(a) +
                  " divided by 0); use a floating dtype for inf/nan results");
    }
  }
  const DType dtype = a.dtype();
  return map_tensor(
      name, a, dtype, [dtype, op, s, reversed](void* out, const Arg& in, const Shape& shape) {
        dispatch(dtype, [&](auto tag) {
          using T = decltype(tag);
          const T v = from_double<T>(s);
          T* o = static_cast<T*>(out);
          if (in.dense) {
            binary_scalar_contiguous<T>(op, in.ptr<const T>(), v, reversed, o, shape_numel(shape));
            return;
          }
          with_binary(op, [&](auto f) {
            if (reversed) {
              unary_strided(shape, o, in.ptr<const T>(), in, [&](T x) { return f(v, x); });
            } else {
              unary_strided(shape, o, in.ptr<const T>(), in, [&](T x) { return f(x, v); });
            }
          });
        });
      });
}

Tensor unary(UnaryOp op, const Tensor& a) {
  const char* name = op_name(op);
  check_defined(a, name);
  check_numeric(name, a);
  // Floating functions of integer tensors give float32, as torch.
  const Tensor x = is_floating_op(op) && !is_floating(a.dtype()) ? a.to(DType::Float32) : a;
  const DType dtype = x.dtype();
  return map_tensor(name, x, dtype, [dtype, op](void* out, const Arg& in, const Shape& shape) {
    dispatch(dtype, [&](auto tag) {
      using T = decltype(tag);
      T* o = static_cast<T*>(out);
      if (in.dense) {
        unary_contiguous<T>(op, in.ptr<const T>(), o, shape_numel(shape));
        return;
      }
      with_unary<T>(op, [&](auto f) { unary_strided(shape, o, in.ptr<const T>(), in, f); });
    });
  });
}

Tensor compare(CompareOp op, const Tensor& a, const Tensor& b) {
  const char* name = op_name(op);
  check_pair(name, a, b);
  const DType dtype = promote_types(a.dtype(), b.dtype());
  PairOperands in(name, a, b, dtype);
  const Shape& shape = in.shape;
  const Tensor &x = in.x, &y = in.y;
  bool flat = false;
  Tensor out = elementwise_output(shape, DType::Bool, in.stream, {&x, &y}, flat);
  void* out_data = data_of(out);
  submit(
      in.stream, name, {&x, &y}, {&out},
      [out_data, ax = flat ? flat_arg(x) : arg(x, shape), ay = flat ? flat_arg(y) : arg(y, shape),
       shape = flat ? Shape{out.numel()} : shape, dtype, op] {
        dispatch_all(dtype, [&](auto tag) {
          using T = decltype(tag);
          bool* o = static_cast<bool*>(out_data);
          const T* p = ax.ptr<const T>();
          const T* q = ay.ptr<const T>();
#define STREAMRT_CASE(Name, name, op) \
  case CompareOp::k##Name:            \
    return binary_strided(shape, o, p, ax, q, ay, [](T u, T v) { return u op v; });
          switch (op) { STREAMRT_COMPARE_OPS(STREAMRT_CASE) }
#undef STREAMRT_CASE
        });
      });
  return out;
}

Tensor compare_scalar(CompareOp op, const Tensor& a, double s) {
  const char* name = op_name(op);
  check_defined(a, name);
  const DType dtype = a.dtype();
  return map_tensor(
      name, a, DType::Bool, [dtype, op, s](void* out, const Arg& in, const Shape& shape) {
        dispatch_all(dtype, [&](auto tag) {
          using T = decltype(tag);
          bool* o = static_cast<bool*>(out);
          const T* p = in.ptr<const T>();
          // In double, except int64 against an integral scalar in range (exact there; a double
          // cannot hold every int64).
          auto run = [&](auto value, auto convert) {
#define STREAMRT_CASE(Name, name, op) \
  case CompareOp::k##Name:            \
    return unary_strided(shape, o, p, in, [&](T x) { return convert(x) op value; });
            switch (op) { STREAMRT_COMPARE_OPS(STREAMRT_CASE) }
#undef STREAMRT_CASE
          };
          constexpr double kTwo63 = 9223372036854775808.0;
          if (std::is_same_v<T, std::int64_t> && s == std::trunc(s) && s >= -kTwo63 && s < kTwo63) {
            run(static_cast<std::int64_t>(s), [](T x) { return static_cast<std::int64_t>(x); });
          } else {
            run(s, [](T x) { return static_cast<double>(x); });
          }
        });
      });
}

}  // namespace ops

using ops::BinaryOp;
using ops::CompareOp;
using ops::UnaryOp;

#define STREAMRT_TENSOR_TENSOR(Name, name, ...)   \
  Tensor name(const Tensor& a, const Tensor& b) { \
    return ops::binary(BinaryOp::k##Name, a, b);  \
  }
#define STREAMRT_TENSOR_SCALAR(Name, name, ...)                \
  Tensor name(const Tensor& a, double s) {                     \
    return ops::binary_scalar(BinaryOp::k##Name, a, s, false); \
  }
#define STREAMRT_UNARY(Name, name, ...)     \
  Tensor name(const Tensor& a) {            \
    return ops::unary(UnaryOp::k##Name, a); \
  }
STREAMRT_ARITHMETIC_OPS(STREAMRT_TENSOR_TENSOR)
STREAMRT_ARITHMETIC_OPS(STREAMRT_TENSOR_SCALAR)
STREAMRT_OTHER_BINARY_OPS(STREAMRT_TENSOR_TENSOR)
STREAMRT_UNARY_OPS(STREAMRT_UNARY)
#undef STREAMRT_TENSOR_TENSOR
#undef STREAMRT_TENSOR_SCALAR
#undef STREAMRT_UNARY

Tensor pow(const Tensor& a, double exponent) {
  using ops::Arg;
  ops::check_defined(a, "pow");
  ops::check_numeric("pow", a);
  if (!is_floating(a.dtype())) {
    ops::check_integral_scalar("pow", a, exponent, "exponent");
    if (exponent < 0) {
      throw Error("pow: the exponent " + std::to_string(exponent) +
                  " is negative, but the tensor is " + ops::describe(a) +
                  "; integer powers need exponents >= 0 (convert with to())");
    }
  }
  const DType dtype = a.dtype();
  return ops::map_tensor(
      "pow", a, dtype, [dtype, exponent](void* out, const Arg& in, const Shape& shape) {
        ops::dispatch(dtype, [&](auto tag) {
          using T = decltype(tag);
          T* o = static_cast<T*>(out);
          const T* p = in.ptr<const T>();
          if constexpr (std::is_floating_point_v<T>) {
            if (exponent == 2) {
              ops::unary_strided(shape, o, p, in, [](T x) { return x * x; });
            } else {
              const T e = static_cast<T>(exponent);
              ops::unary_strided(shape, o, p, in, [e](T x) { return std::pow(x, e); });
            }
          } else {
            const auto e = ops::from_double<std::int64_t>(exponent);  // saturates: no UB for 1e300
            ops::unary_strided(shape, o, p, in, [e](T x) { return ops::ipow(x, e); });
          }
        });
      });
}

Tensor clamp(const Tensor& a, std::optional<double> lo, std::optional<double> hi) {
  using ops::Arg;
  ops::check_defined(a, "clamp");
  ops::check_numeric("clamp", a);
  if (!is_floating(a.dtype())) {
    if (lo) ops::check_integral_scalar("clamp", a, *lo, "lower bound");
    if (hi) ops::check_integral_scalar("clamp", a, *hi, "upper bound");
  }
  const DType dtype = a.dtype();
  return ops::map_tensor(
      "clamp", a, dtype, [dtype, lo, hi](void* out, const Arg& in, const Shape& shape) {
        ops::dispatch(dtype, [&](auto tag) {
          using T = decltype(tag);
          const T l = lo ? ops::from_double<T>(*lo) : std::numeric_limits<T>::lowest();
          const T h = hi ? ops::from_double<T>(*hi) : std::numeric_limits<T>::max();
          const bool has_lo = lo.has_value(), has_hi = hi.has_value();
          // NaN fails both comparisons and stays NaN; lo > hi gives hi everywhere, as torch.
          ops::unary_strided(shape, static_cast<T*>(out), in.ptr<const T>(), in, [=](T x) {
            if (has_lo && x < l) x = l;
            if (has_hi && x > h) x = h;
            return x;
          });
        });
      });
}

#define STREAMRT_COMPARE(Name, name, ...)                 \
  Tensor name(const Tensor& a, const Tensor& b) {         \
    return ops::compare(CompareOp::k##Name, a, b);        \
  }                                                       \
  Tensor name(const Tensor& a, double s) {                \
    return ops::compare_scalar(CompareOp::k##Name, a, s); \
  }
STREAMRT_COMPARE_OPS(STREAMRT_COMPARE)
#undef STREAMRT_COMPARE

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  using ops::Arg;
  ops::check_pair("where", a, b);
  ops::check_defined(cond, "where");
  ops::check_same_device("where", cond, a);
  if (cond.dtype() != DType::Bool) {
    throw Error("where: the condition is " + ops::describe(cond) +
                "; it must be bool (compare first, e.g. gt(x, 0))");
  }
  const DType dtype = promote_types(a.dtype(), b.dtype());
  const Shape shape =
      ops::broadcast("where", ops::broadcast("where", cond.shape(), a.shape()), b.shape());
  const Tensor x = ops::as_dtype(a, dtype), y = ops::as_dtype(b, dtype);
  Tensor out = ops::new_tensor(shape, dtype, a.device());
  void* out_data = ops::data_of(out);
  ops::submit(
      "where", a.device(), {&cond, &x, &y}, {&out},
      [out_data, ac = ops::arg(cond, shape), ax = ops::arg(x, shape), ay = ops::arg(y, shape),
       shape, dtype] {
        ops::dispatch_all(dtype, [&](auto tag) {
          using T = decltype(tag);
          T* out_p = static_cast<T*>(out_data);
          const bool* c = ac.ptr<const bool>();
          const T* p = ax.ptr<const T>();
          const T* q = ay.ptr<const T>();
          const Shape out_strides = ops::contiguous_strides(shape);
          const auto loop =
              ops::make_loop<4>(shape, {&out_strides, &ac.strides, &ax.strides, &ay.strides});
          ops::parallel_runs(loop, [&](const auto& off, std::int64_t count, const auto& inc) {
            for (std::int64_t i = 0; i < count; ++i) {
              out_p[off[0] + i * inc[0]] =
                  c[off[1] + i * inc[1]] ? p[off[2] + i * inc[2]] : q[off[3] + i * inc[3]];
            }
          });
        });
      });
  return out;
}

}  // namespace streamrt
