// Every op as Python sees it, named as in torch: element-wise math and its operators,
// comparisons, reductions, matmul, views and copies, softmax, joins, allclose and equal, as
// Tensor methods and module functions. Element-wise ops launch with the GIL held (launch_op),
// the others with it released (run_op); argument errors become ValueError (IndexError for
// dimensions). The arithmetic, unary and comparison operators are bound directly (def_direct):
// they are the fast path of small ops from Python.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <functional>
#include <iterator>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "args.hpp"
#include "bindings.hpp"
#include "error_text.hpp"
#include "interop.hpp"
#include "streamrt/error.hpp"
#include "streamrt/ops.hpp"
#include "streamrt/tensor.hpp"
#include "tensor_object.hpp"
#include "waits.hpp"

namespace streamrt::python {

using namespace pybind11::literals;

namespace {

// A number as a 0-d tensor to combine with `like` (torch: the tensor's dtype, unless a float
// number meets an integer or bool tensor: then float32).
Tensor scalar_tensor(py::handle s, const Tensor& like, const char* what) {
  const DType d = scalar_promoted_dtype(like.dtype(), s);
  const double v = float_arg(s, what, "scalar");
  return run_op(what, [&] { return full({}, v, d, like.device()); });
}

// Two operands of which at most one may be a number.
std::pair<Tensor, Tensor> operand_pair(py::handle a, py::handle b, const char* what) {
  const bool as = is_python_scalar(a), bs = is_python_scalar(b);
  if (as && bs) throw py::type_error(std::string(what) + ": at least one operand must be a tensor");
  if (as) {
    Tensor y = tensor_operand(b, what);
    return {scalar_tensor(a, y, what), y};
  }
  Tensor x = tensor_operand(a, what);
  if (bs) return {x, scalar_tensor(b, x, what)};
  return {x, tensor_operand(b, what)};
}

// ---- arithmetic: + - * / on tensors and numbers ----------------------------------------------

// An arithmetic operator: its names, the op on two tensors, on a tensor and a number, on a number
// and a tensor.
struct Arithmetic {
  const char* name;
  const char* dunder;
  const char* reflected;
  Tensor (*tensors)(const Tensor&, const Tensor&);
  Tensor (*tensor_scalar)(const Tensor&, double);
  Tensor (*scalar_tensor)(double, const Tensor&);
};

// The operator `Op` (std::plus<> ...) on tensors and numbers, as streamrt's C++ operators.
template <class Op>
constexpr Arithmetic arithmetic(const char* name, const char* dunder, const char* reflected) {
  return {name,
          dunder,
          reflected,
          [](const Tensor& x, const Tensor& y) { return Op()(x, y); },
          [](const Tensor& x, double s) { return Op()(x, s); },
          [](double s, const Tensor& y) { return Op()(s, y); }};
}

constexpr Arithmetic kAdd = arithmetic<std::plus<>>("add", "__add__", "__radd__");
constexpr Arithmetic kSub = arithmetic<std::minus<>>("sub", "__sub__", "__rsub__");
constexpr Arithmetic kMul = arithmetic<std::multiplies<>>("mul", "__mul__", "__rmul__");
constexpr Arithmetic kDiv = arithmetic<std::divides<>>("div", "__truediv__", "__rtruediv__");

// a op b, where at most one is a Python number (torch's promotion against it).
Tensor binary(const Arithmetic& op, py::handle a, py::handle b) {
  const char* what = op.name;
  const bool a_scalar = is_python_scalar(a);
  const bool b_scalar = is_python_scalar(b);
  if (a_scalar && b_scalar) {
    throw py::type_error(std::string(what) + ": at least one operand must be a tensor");
  }
  if (a_scalar || b_scalar) {
    py::handle scalar = a_scalar ? a : b;
    Operand t(a_scalar ? b : a, what);
    t.promote_for(scalar);
    const double s = float_arg(scalar, what, "scalar");
    return launch_op(what,
                     [&] { return a_scalar ? op.scalar_tensor(s, *t) : op.tensor_scalar(*t, s); });
  }
  Operand x(a, what);
  Operand y(b, what);
  return launch_op(what, [&] { return op.tensors(*x, *y); });
}

// For operators: NotImplemented when the other operand is not tensor-like, so Python can try the
// other side's reflected method.
py::object binary_operator(const Arithmetic& op, py::handle a, py::handle b) {
  try {
    return wrap_tensor(binary(op, a, b));
  } catch (const py::type_error&) {
    return py::reinterpret_borrow<py::object>(Py_NotImplemented);
  }
}

template <const Arithmetic* Op, bool Reflected>
py::object arithmetic_method(py::handle self, py::handle other) {
  return Reflected ? binary_operator(*Op, other, self) : binary_operator(*Op, self, other);
}

template <const Arithmetic* Op>
void def_arithmetic(py::handle cls) {
  constexpr const char* doc =
      "Element-wise, on the current stream (the other side may be a number or tensor-like); "
      "NotImplemented for anything else.";
  def_direct<arithmetic_method<Op, false>>(cls, Op->dunder, doc);
  def_direct<arithmetic_method<Op, true>>(cls, Op->reflected, doc);
}

// ---- matmul, allclose, equal -------------------------------------------------------------------

py::object matmul_operator(py::handle a, py::handle b) {
  Tensor x, y;
  try {
    x = tensor_operand(a, "matmul");
    y = tensor_operand(b, "matmul");
  } catch (const py::type_error&) {
    return py::reinterpret_borrow<py::object>(Py_NotImplemented);
  }
  return py::cast(run_op("matmul", [&] { return matmul(x, y); }));
}

void check_same_dtype(const Tensor& a, const Tensor& b, const char* what) {
  if (a.dtype() != b.dtype()) {
    throw py::value_error(std::string(what) + ": the tensors differ: " + to_string(a.shape()) +
                          " " + std::string(to_string(a.dtype())) + " vs " + to_string(b.shape()) +
                          " " + std::string(to_string(b.dtype())) + " (same dtype needed)");
  }
}

bool allclose_op(py::object a, py::object b, py::object rtol_arg, py::object atol_arg) {
  const double rtol = float_arg(rtol_arg, "allclose", "rtol");
  const double atol = float_arg(atol_arg, "allclose", "atol");
  // As numpy: either side may be a number (a 0-d operand broadcasts like any other).
  Tensor x = tensor_operand(is_python_scalar(a) ? numpy().attr("asarray")(a) : a, "allclose");
  Tensor y = tensor_operand(is_python_scalar(b) ? numpy().attr("asarray")(b) : b, "allclose");
  // Argument errors are ValueErrors; a Error from the wait below is a failure of the work
  // that produced an operand, and stays streamrt.Error.
  try {
    broadcast_shapes(x.shape(), y.shape());
  } catch (const Error& e) {
    throw py::value_error("allclose: " + python_text(e.text()));
  }
  if (!(rtol >= 0) || !(atol >= 0)) {
    throw py::value_error("allclose: rtol and atol must be >= 0 (got rtol=" + std::to_string(rtol) +
                          ", atol=" + std::to_string(atol) + ")");
  }
  if (x.device() != y.device()) {
    throw py::value_error("allclose: tensors are on different devices (" + x.device().str() +
                          " and " + y.device().str() + ")");
  }
  // Interruptibly first: the call below then waits only for its own small reduction.
  wait_tensor(x, false);
  wait_tensor(y, false);
  wait_current_stream();
  py::gil_scoped_release release;
  return allclose(x, y, rtol, atol);
}

bool equal_op(py::object a, py::object b) {
  Tensor x = tensor_operand(a, "equal");
  Tensor y = tensor_operand(b, "equal");
  check_same_dtype(x, y, "equal");
  wait_tensor(x, false);
  wait_tensor(y, false);
  wait_current_stream();
  py::gil_scoped_release release;
  return equal(x, y);
}

// ---- reductions --------------------------------------------------------------------------------

using Reduction = Tensor (*)(const Tensor&);
using DimReduction = Tensor (*)(const Tensor&, int, bool);

Tensor reduce(const char* what, py::object a, py::object dim, bool keepdim, Reduction all,
              DimReduction over) {
  Tensor x = tensor_operand(a, what);
  if (dim.is_none()) {
    if (keepdim) {
      // All dimensions kept with size 1, as torch and numpy.
      Tensor r = run_op(what, [&] { return all(x); });
      return run_op(what, [&] { return r.reshape(Shape(static_cast<std::size_t>(x.dim()), 1)); });
    }
    return run_op(what, [&] { return all(x); });
  }
  const int d = to_dim(dim, what);
  return run_op(what, [&] { return over(x, d, keepdim); });
}

Tensor sum_all(const Tensor& t) {
  return sum(t);
}
Tensor sum_dim(const Tensor& t, int d, bool k) {
  return sum(t, d, k);
}
Tensor mean_all(const Tensor& t) {
  return mean(t);
}
Tensor mean_dim(const Tensor& t, int d, bool k) {
  return mean(t, d, k);
}
Tensor max_all(const Tensor& t) {
  return max(t);
}
Tensor max_dim(const Tensor& t, int d, bool k) {
  return max(t, d, k);
}
Tensor min_all(const Tensor& t) {
  return min(t);
}
Tensor min_dim(const Tensor& t, int d, bool k) {
  return min(t, d, k);
}
Tensor argmax_all(const Tensor& t) {
  return argmax(t);
}
Tensor argmax_dim(const Tensor& t, int d, bool k) {
  return argmax(t, d, k);
}
Tensor argmin_all(const Tensor& t) {
  return argmin(t);
}
Tensor argmin_dim(const Tensor& t, int d, bool k) {
  return argmin(t, d, k);
}

struct ReductionDef {
  const char* name;
  Reduction all;
  DimReduction over;
  const char* doc;
};

const ReductionDef kReductions[] = {
    {"sum", sum_all, sum_dim,
     "Sum of all elements (a 0-d tensor), or over `dim`; float64/int64 accumulation."},
    {"mean", mean_all, mean_dim, "Mean of all elements, or over `dim` (floating dtypes)."},
    {"max", max_all, max_dim, "Largest element, or the largest values over `dim` (NaN wins)."},
    {"min", min_all, min_dim, "Smallest element, or the smallest values over `dim`."},
    {"argmax", argmax_all, argmax_dim,
     "Flat index of the largest element, or indices over `dim` (int64; first on ties)."},
    {"argmin", argmin_all, argmin_dim, "As argmax, for the smallest element."},
};
// ---- element-wise ------------------------------------------------------------------------------

using UnaryFn = Tensor (*)(const Tensor&);

struct UnaryDef {
  const char* name;
  UnaryFn fn;
  const char* dunder;  // the operator's method, if any
};

const UnaryDef kUnary[] = {
    {"exp", [](const Tensor& t) { return exp(t); }, nullptr},
    {"log", [](const Tensor& t) { return log(t); }, nullptr},
    {"tanh", [](const Tensor& t) { return tanh(t); }, nullptr},
    {"sigmoid", [](const Tensor& t) { return sigmoid(t); }, nullptr},
    {"sqrt", [](const Tensor& t) { return sqrt(t); }, nullptr},
    {"abs", [](const Tensor& t) { return abs(t); }, "__abs__"},
    {"neg", [](const Tensor& t) { return neg(t); }, "__neg__"},
    {"relu", [](const Tensor& t) { return relu(t); }, nullptr},
};

using CompareFn = Tensor (*)(const Tensor&, const Tensor&);
using CompareScalarFn = Tensor (*)(const Tensor&, double);

struct CompareDef {
  const char* name;
  const char* dunder;
  const char* reflected;  // the operator Python tries on the other side
  CompareFn fn;
  CompareScalarFn scalar;
};

const CompareDef kCompare[] = {
    {"eq", "__eq__", "__eq__", [](const Tensor& a, const Tensor& b) { return eq(a, b); },
     [](const Tensor& a, double s) { return eq(a, s); }},
    {"ne", "__ne__", "__ne__", [](const Tensor& a, const Tensor& b) { return ne(a, b); },
     [](const Tensor& a, double s) { return ne(a, s); }},
    {"lt", "__lt__", "__gt__", [](const Tensor& a, const Tensor& b) { return lt(a, b); },
     [](const Tensor& a, double s) { return lt(a, s); }},
    {"le", "__le__", "__ge__", [](const Tensor& a, const Tensor& b) { return le(a, b); },
     [](const Tensor& a, double s) { return le(a, s); }},
    {"gt", "__gt__", "__lt__", [](const Tensor& a, const Tensor& b) { return gt(a, b); },
     [](const Tensor& a, double s) { return gt(a, s); }},
    {"ge", "__ge__", "__le__", [](const Tensor& a, const Tensor& b) { return ge(a, b); },
     [](const Tensor& a, double s) { return ge(a, s); }},
};

Tensor compare(const CompareDef& def, py::handle a, py::handle b) {
  Operand x(a, def.name);
  if (is_python_scalar(b) || PyBool_Check(b.ptr())) {
    const double s = float_arg(b, def.name, "scalar");
    return launch_op(def.name, [&] { return def.scalar(*x, s); });
  }
  Operand y(b, def.name);
  return launch_op(def.name, [&] { return def.fn(*x, *y); });
}

Tensor unary(const UnaryDef& u, py::handle a) {
  Operand x(a, u.name);
  return launch_op(u.name, [&] { return u.fn(*x); });
}

// Methods bound directly (def_direct), one entry point per table row.
template <std::size_t I>
py::object unary_method(py::handle self) {
  return wrap_tensor(unary(kUnary[I], self));
}

template <std::size_t I>
void def_unary(py::handle cls) {
  constexpr const char* doc = "Element-wise, on the current stream.";
  def_direct<unary_method<I>>(cls, kUnary[I].name, doc);
  if (kUnary[I].dunder != nullptr) def_direct<unary_method<I>>(cls, kUnary[I].dunder, doc);
}

template <std::size_t... I>
void def_unary_methods(py::handle cls, std::index_sequence<I...>) {
  (def_unary<I>(cls), ...);
}

template <std::size_t I>
py::object compare_method(py::handle self, py::handle other) {
  try {
    return wrap_tensor(compare(kCompare[I], self, other));
  } catch (const py::type_error&) {
    // Not comparable with a tensor: Python tries the other side's reflected comparison.
    return py::reinterpret_borrow<py::object>(Py_NotImplemented);
  }
}

template <std::size_t... I>
void def_compare_methods(py::handle cls, std::index_sequence<I...>) {
  (def_direct<compare_method<I>>(cls, kCompare[I].dunder,
                                 "Element-wise comparison (broadcast), a bool tensor; "
                                 "NotImplemented for operands that are not tensor-like."),
   ...);
}

Tensor pow_op(py::handle a, py::handle exponent) {
  if (!is_python_scalar(exponent)) {
    throw py::type_error(
        "pow: the exponent must be a number (tensor exponents are not "
        "supported), got " +
        type_name(exponent));
  }
  Operand x(a, "pow");
  x.promote_for(exponent);
  const double e = float_arg(exponent, "pow", "exponent");
  return launch_op("pow", [&] { return pow(*x, e); });
}

py::object pow_method(py::handle self, py::handle exponent) {
  if (!is_python_scalar(exponent)) return py::reinterpret_borrow<py::object>(Py_NotImplemented);
  return wrap_tensor(pow_op(self, exponent));
}

Tensor clamp_op(py::handle a, py::object lo, py::object hi) {
  Operand x(a, "clamp");
  std::optional<double> l, h;
  for (py::handle bound : {lo, hi}) {
    if (bound.is_none()) continue;
    if (!is_python_scalar(bound)) {
      throw py::type_error("clamp: bounds must be numbers or None, got " + type_name(bound));
    }
    x.promote_for(bound);
  }
  if (!lo.is_none()) l = float_arg(lo, "clamp", "min");
  if (!hi.is_none()) h = float_arg(hi, "clamp", "max");
  return launch_op("clamp", [&] { return clamp(*x, l, h); });
}

Tensor binary_fn(const char* what, py::handle a, py::handle b,
                 Tensor (*fn)(const Tensor&, const Tensor&)) {
  // A pair, not structured bindings: clang 14 cannot capture those in a lambda.
  const auto xy = operand_pair(a, b, what);
  return run_op(what, [&] { return fn(xy.first, xy.second); });
}

Tensor where_op(py::handle cond, py::handle a, py::handle b) {
  Tensor c = tensor_operand(cond, "where");
  if (is_python_scalar(a) && is_python_scalar(b)) {
    // Two numbers: int64, or float32 if either is a float (torch's default dtypes).
    const bool floats = !py::isinstance<py::int_>(a) || !py::isinstance<py::int_>(b);
    const DType d = floats ? DType::Float32 : DType::Int64;
    const double va = float_arg(a, "where", "input"), vb = float_arg(b, "where", "other");
    return run_op("where", [&] {
      return where(c, full({}, va, d, c.device()), full({}, vb, d, c.device()));
    });
  }
  const auto xy = operand_pair(a, b, "where");
  return run_op("where", [&] { return where(c, xy.first, xy.second); });
}

std::vector<Tensor> tensor_list(py::handle seq, const char* what) {
  if (!py::isinstance<py::sequence>(seq) || py::isinstance<py::str>(seq)) {
    throw py::type_error(std::string(what) + ": expected a sequence of tensors, got " +
                         type_name(seq));
  }
  std::vector<Tensor> out;
  for (py::handle h : seq) out.push_back(tensor_operand(h, what));
  return out;
}
// ---- registration ------------------------------------------------------------------------------

// Views (no copy) and copies of one tensor.
void bind_views(py::class_<Tensor>& cls) {
  cls.def_property_readonly(
         "T", [](const Tensor& t) { return run_op("T", [&] { return t.T(); }); },
         "The view with the dimensions reversed (a matrix's transpose); no copy.")
      .def(
          "transpose",
          [](const Tensor& t, py::object dim0, py::object dim1) {
            const int d0 = to_dim(dim0, "transpose"), d1 = to_dim(dim1, "transpose");
            return run_op("transpose", [&] { return t.transpose(d0, d1); });
          },
          "dim0"_a, "dim1"_a, "A view with two dimensions swapped; no copy.")
      .def(
          "permute",
          [](const Tensor& t, py::args dims) {
            const auto d = dims_from_args(dims, "permute");
            return run_op("permute", [&] { return t.permute(d); });
          },
          "A view with the dimensions reordered; no copy.")
      .def(
          "unsqueeze",
          [](const Tensor& t, py::object dim) {
            const int d = to_dim(dim, "unsqueeze");
            return run_op("unsqueeze", [&] { return t.unsqueeze(d); });
          },
          "dim"_a, "A view with a size-1 dimension inserted at `dim`.")
      .def(
          "squeeze",
          [](const Tensor& t, py::object dim) {
            const int d = to_dim(dim, "squeeze");
            return run_op("squeeze", [&] { return t.squeeze(d); });
          },
          "dim"_a, "A view without size-1 dimension `dim`.")
      .def(
          "expand",
          [](const Tensor& t, py::args sizes) {
            // -1 keeps a size; anything else below is refused by expand, naming it.
            const Shape s = signed_sizes_from_args(sizes, "expand");
            return run_op("expand", [&] { return t.expand(s); });
          },
          "A view broadcast to the sizes (stride 0 along expanded dimensions; -1 keeps a size).")
      .def(
          "reshape",
          [](const Tensor& t, py::args shape) {
            Shape s = signed_sizes_from_args(shape, "reshape");
            return run_op("reshape", [&] { return t.reshape(std::move(s)); });
          },
          "A view with another shape (one size may be -1).")
      .def("is_contiguous", &Tensor::is_contiguous)
      .def(
          "stride",
          [](const Tensor& t, py::object d) -> py::object {
            if (d.is_none()) return shape_tuple(t.strides());
            const int dim = to_dim(d, "stride");
            if (dim < -t.dim() || dim >= t.dim()) {
              throw py::index_error("Tensor.stride: dimension " + std::to_string(dim) +
                                    " is out of range for a " + std::to_string(t.dim()) +
                                    "-dimensional tensor");
            }
            return py::int_(t.strides()[static_cast<std::size_t>(dim < 0 ? dim + t.dim() : dim)]);
          },
          "dim"_a = py::none(), "Strides in elements (a tuple, or one dimension's).")
      .def("storage_offset", &Tensor::storage_offset, "Offset of the first element (elements).");
}

// Copies, conversions and fills, on the current stream.
void bind_copies(py::class_<Tensor>& cls) {
  cls.def(
         "contiguous",
         [](const Tensor& t) { return run_op("contiguous", [&] { return t.contiguous(); }); },
         "Itself when contiguous, else a contiguous copy made on the current stream.")
      .def("clone", [](const Tensor& t) { return run_op("clone", [&] { return t.clone(); }); })
      .def(
          "to",
          [](const Tensor& t, py::object dtype) {
            const DType d = to_dtype(dtype, "Tensor.to");
            return run_op("to", [&] { return t.to(d); });
          },
          "dtype"_a)
      .def(
          "copy_",
          [](py::object self, py::object src) {
            Tensor& t = self.cast<Tensor&>();
            Tensor s = tensor_operand(src, "copy_");
            run_op("copy_", [&] { return t.copy_(s); });
            return self;
          },
          "src"_a, "Copies `src` into this tensor on the current stream; returns self.")
      .def(
          "fill_",
          [](py::object self, py::object value_arg) {
            Tensor& t = self.cast<Tensor&>();
            const double value = float_arg(value_arg, "fill_", "value");
            run_op("fill_", [&] { return t.fill_(value); });
            return self;
          },
          "value"_a, "Sets every element on the current stream; returns self.");
}

// The view functions of the module (torch.transpose ...).
void bind_view_functions(py::module_& m) {
  m.def(
      "transpose",
      [](py::object a, py::object dim0, py::object dim1) {
        const int d0 = to_dim(dim0, "transpose"), d1 = to_dim(dim1, "transpose");
        Tensor x = tensor_operand(a, "transpose");
        return run_op("transpose", [&] { return x.transpose(d0, d1); });
      },
      "input"_a, "dim0"_a, "dim1"_a, "A view with two dimensions swapped.");
  m.def(
      "permute",
      [](py::object a, py::object dims) {
        Tensor x = tensor_operand(a, "permute");
        std::vector<int> d;
        for (py::handle h : dims) d.push_back(to_dim(h, "permute"));
        return run_op("permute", [&] { return x.permute(d); });
      },
      "input"_a, "dims"_a, "A view with the dimensions reordered.");
  m.def(
      "unsqueeze",
      [](py::object a, py::object dim) {
        const int d = to_dim(dim, "unsqueeze");
        Tensor x = tensor_operand(a, "unsqueeze");
        return run_op("unsqueeze", [&] { return x.unsqueeze(d); });
      },
      "input"_a, "dim"_a, "A view with a size-1 dimension inserted.");
}

// + - * / and @, as operators (bound directly) and as module functions.
void bind_arithmetic(py::class_<Tensor>& cls, py::module_& m) {
  for (auto def : {def_arithmetic<&kAdd>, def_arithmetic<&kSub>, def_arithmetic<&kMul>,
                   def_arithmetic<&kDiv>}) {
    def(cls);
  }
  for (const Arithmetic* op : {&kAdd, &kSub, &kMul, &kDiv}) {
    m.def(
        op->name, [op](py::object a, py::object b) { return binary(*op, a, b); }, "a"_a, "b"_a,
        "Element-wise, on the current stream (either side may be a number).");
  }
  cls.def("__matmul__", [](py::object a, py::object b) { return matmul_operator(a, b); })
      .def("__rmatmul__", [](py::object a, py::object b) { return matmul_operator(b, a); });
  m.def(
      "matmul",
      [](py::object a, py::object b) {
        Tensor x = tensor_operand(a, "matmul");
        Tensor y = tensor_operand(b, "matmul");
        return run_op("matmul", [&] { return matmul(x, y); });
      },
      "a"_a, "b"_a, "Matrix product on the current stream; returns at once.");
}

// Element-wise functions of one tensor and of a tensor and numbers.
void bind_elementwise(py::class_<Tensor>& cls, py::module_& m) {
  for (const auto& u : kUnary) {
    m.def(
        u.name, [&u](py::handle a) { return unary(u, a); }, "input"_a);
  }
  def_unary_methods(cls, std::make_index_sequence<std::size(kUnary)>());
  cls.def("pow", &pow_op, "exponent"_a, "Element-wise power by a number.");
  def_direct<pow_method>(cls, "__pow__",
                         "Element-wise power by a number; NotImplemented for anything else.");
  m.def("pow", &pow_op, "input"_a, "exponent"_a, "Element-wise power by a number.");
  cls.def("clamp", &clamp_op, "min"_a = py::none(), "max"_a = py::none(),
          "Element-wise clamp to [min, max] (either may be None); NaN kept.");
  m.def("clamp", &clamp_op, "input"_a, "min"_a = py::none(), "max"_a = py::none(),
        "Element-wise clamp to [min, max] (either may be None); NaN kept.");
  m.def(
      "maximum",
      [](py::object a, py::object b) {
        return binary_fn("maximum", a, b,
                         [](const Tensor& x, const Tensor& y) { return maximum(x, y); });
      },
      "input"_a, "other"_a, "Element-wise larger value (broadcast; NaN propagates).");
  m.def(
      "minimum",
      [](py::object a, py::object b) {
        return binary_fn("minimum", a, b,
                         [](const Tensor& x, const Tensor& y) { return minimum(x, y); });
      },
      "input"_a, "other"_a, "Element-wise smaller value (broadcast; NaN propagates).");
  m.def("where", &where_op, "condition"_a, "input"_a, "other"_a,
        "condition ? input : other, element-wise (bool condition; all three broadcast).");
}

// Comparisons, element-wise and of whole tensors, and truth.
void bind_comparisons(py::class_<Tensor>& cls, py::module_& m) {
  for (const auto& c : kCompare) {
    m.def(
        c.name, [c](py::object a, py::object b) { return compare(c, a, b); }, "input"_a, "other"_a,
        "Element-wise comparison (broadcast), a bool tensor.");
  }
  def_compare_methods(cls, std::make_index_sequence<std::size(kCompare)>());
  // Truth of a one-element tensor is its value; of others, ambiguous (as torch and numpy), so
  // `if a > b:` on many elements raises instead of being silently true.
  cls.def("__bool__", [](const Tensor& t) {
    if (t.numel() != 1) {
      throw py::value_error("the truth value of a tensor with " + std::to_string(t.numel()) +
                            " elements is ambiguous; use streamrt.equal, .max() or .min()");
    }
    Tensor b = run_op("__bool__", [&] { return ne(t, 0.0); });
    wait_tensor(b, false);  // interruptibly
    py::gil_scoped_release release;
    return b.item<bool>();
  });
  // Element-wise __eq__ makes Tensor unhashable by default; hash by identity, as torch.
  cls.attr("__hash__") = py::cpp_function(
      [](py::handle self) { return reinterpret_cast<std::intptr_t>(self.ptr()) >> 4; },
      py::is_method(cls));
  m.def("allclose", &allclose_op, "a"_a, "b"_a, "rtol"_a = 1e-5, "atol"_a = 1e-8,
        "True when |a - b| <= atol + rtol * |b| everywhere (numpy's allclose: the operands "
        "broadcast, dtypes may differ, NaN is never close). Waits (GIL released) for the answer.");
  m.def("equal", &equal_op, "a"_a, "b"_a,
        "True when shapes and all elements are equal (numpy's array_equal: different shapes are "
        "not equal, no broadcasting). Waits (GIL released).");
}

// Reductions as methods and functions; softmax, cat, stack and promote_types.
void bind_reductions_and_joins(py::class_<Tensor>& cls, py::module_& m) {
  for (const auto& r : kReductions) {
    auto fn = [r](py::object a, py::object dim, bool keepdim) {
      return reduce(r.name, a, dim, keepdim, r.all, r.over);
    };
    cls.def(r.name, fn, "dim"_a = py::none(), "keepdim"_a = false, r.doc);
    m.def(r.name, fn, "input"_a, "dim"_a = py::none(), "keepdim"_a = false, r.doc);
  }
  for (bool log : {false, true}) {
    const char* name = log ? "log_softmax" : "softmax";
    auto fn = [name, log](py::object a, py::object dim_arg) {
      const int dim = to_dim(dim_arg, name);
      Tensor x = tensor_operand(a, name);
      return run_op(name, [&] { return log ? log_softmax(x, dim) : softmax(x, dim); });
    };
    cls.def(name, fn, "dim"_a);
    m.def(name, fn, "input"_a, "dim"_a,
          log ? "log(softmax(input, dim)), computed stably." : "Softmax along `dim`.");
  }
  m.def(
      "cat",
      [](py::object tensors, py::object dim_arg) {
        const int dim = to_dim(dim_arg, "cat");
        auto ts = tensor_list(tensors, "cat");
        return run_op("cat", [&] { return cat(ts, dim); });
      },
      "tensors"_a, "dim"_a = py::int_(0), "The tensors joined along `dim` (dtypes promote).");
  m.def(
      "stack",
      [](py::object tensors, py::object dim_arg) {
        const int dim = to_dim(dim_arg, "stack");
        auto ts = tensor_list(tensors, "stack");
        return run_op("stack", [&] { return stack(ts, dim); });
      },
      "tensors"_a, "dim"_a = py::int_(0),
      "The tensors (equal shapes) stacked along a new dimension.");
  m.def(
      "promote_types",
      [](py::object a, py::object b) {
        return promote_types(to_dtype(a, "promote_types"), to_dtype(b, "promote_types"));
      },
      "type1"_a, "type2"_a, "The dtype of an op on tensors of these dtypes (torch's rule).");
}

}  // namespace

void bind_ops(py::module_& m) {
  auto cls = py::reinterpret_borrow<py::class_<Tensor>>(m.attr("Tensor"));
  bind_views(cls);
  bind_copies(cls);
  bind_view_functions(m);
  bind_arithmetic(cls, m);
  bind_elementwise(cls, m);
  bind_comparisons(cls, m);
  bind_reductions_and_joins(cls, m);
}

}  // namespace streamrt::python
