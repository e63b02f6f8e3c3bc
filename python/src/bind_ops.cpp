// Python bindings of views and indexing, reductions, element-wise math, comparisons, where,
// softmax, cat and stack: Tensor methods and module functions named as in torch. Element-wise ops
// launch with the GIL held (launch_op), the others with it released (run_op); argument errors
// become ValueError (IndexError for indices).
#include "bind_ops.hpp"

#include <pybind11/stl.h>

#include <cstdint>
#include <iterator>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "streamrt/error.hpp"
#include "streamrt/ops.hpp"

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

int to_dim(py::handle d, const char* what) {
  // Any int: a far-out one is then refused by the op, naming the tensor's range.
  return static_cast<int>(int_arg(d, what, "dim", std::numeric_limits<int>::min(),
                                  std::numeric_limits<int>::max(), PyExc_IndexError));
}

std::vector<int> dims_from_args(const py::args& args, const char* what) {
  std::vector<int> dims;
  if (args.size() == 1 && PyIndex_Check(args[0].ptr()) == 0) {
    for (py::handle h : args[0]) dims.push_back(to_dim(h, what));
  } else {
    for (py::handle h : args) dims.push_back(to_dim(h, what));
  }
  return dims;
}

// ---- indexing ----------------------------------------------------------------------------------

// Index errors become IndexError (Python's iteration protocol relies on it).
template <class F>
Tensor index_op(F&& f) {
  try {
    return f();
  } catch (const Error& e) {
    throw py::index_error(e.what());
  }
}

// numpy's advanced indexing on read, as the whole index: an integer tensor, list or array
// selects along dimension 0 (a gather copy on the current stream); a bool one of the shape of
// t's leading dimensions selects the elements where it is true (a copy, flattened over those
// dimensions). nullopt for any other index (a basic one).
// True for a numpy array. Basic indices (ints, slices, tuples, None, ...) are told apart without
// touching numpy: `t[i]` is the common case and must not pay for a module lookup.
bool is_ndarray(py::handle h) {
  if (PyLong_Check(h.ptr()) || PySlice_Check(h.ptr()) || PyTuple_Check(h.ptr()) || h.is_none() ||
      h.ptr() == Py_Ellipsis) {
    return false;
  }
  return py::isinstance(h, numpy().attr("ndarray"));
}

std::optional<Tensor> advanced_item(const Tensor& t, py::handle index) {
  const bool is_tensor = py::isinstance<Tensor>(index);
  if (!is_tensor && !py::isinstance<py::list>(index) && !is_ndarray(index)) return std::nullopt;
  if (t.dim() == 0) throw py::index_error("a 0-d tensor cannot be indexed with an array");
  py::object arr;  // the index on the host, where it must be read there
  if (is_tensor) {
    const Tensor& idx = index.cast<const Tensor&>();
    if (idx.dtype() != DType::Bool) {
      if (idx.dtype() != DType::Int64 && idx.dtype() != DType::Int32) {
        throw py::index_error("Tensor indices must be integer or bool tensors, got " +
                              std::string(to_string(idx.dtype())));
      }
      // Entries are only known when the gather runs: one out of range fails the stream with
      // an Error naming it and the size.
      return run_op("__getitem__", [&] { return index_select(t, 0, idx.reshape({idx.numel()})); })
          .reshape([&] {
            Shape s = idx.shape();
            s.insert(s.end(), t.shape().begin() + 1, t.shape().end());
            return s;
          }());
    }
    arr = index.attr("numpy")(false);  // waits for the mask's writer, as numpy/torch must
  }
  py::module_ np = numpy();  // an integer tensor index (above) never needs it
  if (!is_tensor) {
    arr = np.attr("asarray")(index);
  }
  const std::string kind = py::str(arr.attr("dtype").attr("kind"));
  const auto ndim = arr.attr("ndim").cast<int>();
  if (kind == "b") {
    // Boolean mask over the leading dimensions: numpy requires their exact sizes.
    if (ndim > t.dim()) {
      throw py::index_error("too many indices: a " + std::to_string(ndim) +
                            "-d boolean index for a tensor of dimension " +
                            std::to_string(t.dim()));
    }
    const auto mshape = arr.attr("shape").cast<std::vector<std::int64_t>>();
    for (int d = 0; d < ndim; ++d) {
      if (mshape[static_cast<std::size_t>(d)] != t.shape()[static_cast<std::size_t>(d)]) {
        throw py::index_error(
            "boolean index did not match the tensor along dimension " + std::to_string(d) +
            ": the dimension is " + std::to_string(t.shape()[static_cast<std::size_t>(d)]) +
            " but the boolean index has " + std::to_string(mshape[static_cast<std::size_t>(d)]) +
            " (tensor " + to_string(t.shape()) + ")");
      }
    }
    // The masked dimensions as one (by count, not -1: a trailing size 0 leaves -1 undefined).
    std::int64_t lead = 1;
    for (int d = 0; d < ndim; ++d) lead *= t.shape()[static_cast<std::size_t>(d)];
    Shape flat = {lead};
    flat.insert(flat.end(), t.shape().begin() + ndim, t.shape().end());
    Tensor where = tensor_operand(np.attr("flatnonzero")(arr), "__getitem__");
    return run_op("__getitem__", [&] { return index_select(t.reshape(flat), 0, where); });
  }
  if (kind != "i" && kind != "u") {
    if (py::isinstance<py::list>(index) && arr.attr("size").cast<std::int64_t>() == 0) {
      arr = np.attr("zeros")(0, "dtype"_a = "int64");  // t[[]]: numpy selects nothing
    } else {
      throw py::index_error("arrays used as indices must be of integer or boolean type, got " +
                            std::string(py::str(arr.attr("dtype"))));
    }
  }
  // Host data: out-of-range entries are an IndexError now, naming the entry and the size.
  const std::int64_t size = t.shape()[0];
  py::object flat_idx = np.attr("asarray")(arr.attr("reshape")(-1), "dtype"_a = "int64");
  const auto entries = flat_idx.cast<std::vector<std::int64_t>>();
  for (std::int64_t v : entries) {
    if (v < -size || v >= size) {
      throw py::index_error("index " + std::to_string(v) + " is out of bounds for dimension 0 " +
                            "with size " + std::to_string(size) + " (tensor " +
                            to_string(t.shape()) + ")");
    }
  }
  Tensor idx = tensor_operand(flat_idx, "__getitem__");
  Shape out = arr.attr("shape").cast<Shape>();
  out.insert(out.end(), t.shape().begin() + 1, t.shape().end());
  return run_op("__getitem__", [&] { return index_select(t, 0, idx).reshape(out); });
}

// t[index] for ints, slices (any nonzero step), None and Ellipsis, alone or in a tuple: always
// a view.
Tensor get_item(const Tensor& t, py::handle index) {
  if (auto picked = advanced_item(t, index)) return *picked;
  std::vector<py::handle> items;
  if (py::isinstance<py::tuple>(index)) {
    for (py::handle h : index) items.push_back(h);
  } else {
    items.push_back(index);
  }
  int consumed = 0;
  bool ellipsis = false;
  for (py::handle h : items) {
    if (h.is(py::ellipsis())) {
      if (ellipsis) throw py::index_error("an index can only have a single ellipsis ('...')");
      ellipsis = true;
    } else if (!h.is_none()) {
      if (py::isinstance<py::bool_>(h) ||
          (PyIndex_Check(h.ptr()) == 0 && !py::isinstance<py::slice>(h))) {
        throw py::type_error(
            "Tensor indices must be integers, slices, None or ..., or one integer or bool "
            "tensor, list or array as the whole index (t[idx]), got " +
            type_name(h));
      }
      ++consumed;
    }
  }
  if (consumed > t.dim()) {
    throw py::index_error("too many indices for a tensor of dimension " + std::to_string(t.dim()) +
                          " (" + std::to_string(consumed) + " given)");
  }
  Tensor out = t;
  int d = 0;
  for (py::handle h : items) {
    if (h.is(py::ellipsis())) {
      d += t.dim() - consumed;
    } else if (h.is_none()) {
      out = index_op([&] { return out.unsqueeze(d); });
      ++d;
    } else if (py::isinstance<py::slice>(h)) {
      // Unpacked, not adjusted: the defaults come out as the extremes (start PY_SSIZE_T_MAX
      // and stop PY_SSIZE_T_MIN for a negative step), which slice() clamps as numpy does.
      Py_ssize_t start = 0, stop = 0, step = 0;
      if (PySlice_Unpack(h.ptr(), &start, &stop, &step) < 0) throw py::error_already_set();
      out = index_op([&] { return out.slice(d, start, stop, step); });
      ++d;
    } else {
      const auto i = int_arg(h, "Tensor.__getitem__", "index",
                             std::numeric_limits<std::int64_t>::min(),
                             std::numeric_limits<std::int64_t>::max(), PyExc_IndexError);
      out = index_op([&] { return out.select(d, i); });
    }
  }
  return out;
}

void set_item(const Tensor& t, py::handle index, py::handle value) {
  if (py::isinstance<Tensor>(index) || py::isinstance<py::list>(index) || is_ndarray(index)) {
    // t[idx] reads a copy; writing into it would be lost.
    throw py::type_error(
        "Tensor.__setitem__: assigning through a tensor, list or array index is not supported "
        "(only reading is: t[idx] is a copy); index with ints, slices, None and ... to write");
  }
  Tensor view = get_item(t, index);
  if (is_python_scalar(value) || py::isinstance<py::bool_>(value)) {
    const double v = float_arg(value, "Tensor.__setitem__", "value");
    run_op("__setitem__", [&] { return view.fill_(v); });
    return;
  }
  Tensor src = tensor_operand(value, "__setitem__");
  run_op("__setitem__", [&] { return view.copy_(src); });
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

}  // namespace

void bind_ops(py::module_& m) {
  auto cls = py::reinterpret_borrow<py::class_<Tensor>>(m.attr("Tensor"));

  // ---- views
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
            Shape s;
            // -1 keeps a size; anything else below is refused by expand, naming it.
            const auto size_of = [](py::handle h) {
              return int_arg(h, "expand", "size", std::numeric_limits<std::int64_t>::min(),
                             std::numeric_limits<std::int64_t>::max());
            };
            if (sizes.size() == 1 && PyIndex_Check(sizes[0].ptr()) == 0) {
              for (py::handle h : sizes[0]) s.push_back(size_of(h));
            } else {
              for (py::handle h : sizes) s.push_back(size_of(h));
            }
            return run_op("expand", [&] { return t.expand(s); });
          },
          "A view broadcast to the sizes (stride 0 along expanded dimensions; -1 keeps a size).")
      .def(
          "contiguous",
          [](const Tensor& t) { return run_op("contiguous", [&] { return t.contiguous(); }); },
          "Itself when contiguous, else a contiguous copy made on the current stream.")
      .def("is_contiguous", &Tensor::is_contiguous)
      .def(
          "stride",
          [](const Tensor& t, py::object d) -> py::object {
            if (d.is_none()) return shape_to_tuple(t.strides());
            const int dim = to_dim(d, "stride");
            if (dim < -t.dim() || dim >= t.dim()) {
              throw py::index_error("Tensor.stride: dimension " + std::to_string(dim) +
                                    " is out of range for a " + std::to_string(t.dim()) +
                                    "-dimensional tensor");
            }
            return py::int_(t.strides()[static_cast<std::size_t>(dim < 0 ? dim + t.dim() : dim)]);
          },
          "dim"_a = py::none(), "Strides in elements (a tuple, or one dimension's).")
      .def("storage_offset", &Tensor::storage_offset, "Offset of the first element (elements).")
      .def(
          "__getitem__", [](const Tensor& t, py::object index) { return get_item(t, index); },
          "Views for ints, slices (negative steps too), None and ...; no copy.")
      .def(
          "__setitem__",
          [](const Tensor& t, py::object index, py::object value) { set_item(t, index, value); },
          "Writes a number or a (broadcast) tensor into the indexed view, on the current stream.");

  // ---- reductions, as methods and functions
  for (const auto& r : kReductions) {
    auto fn = [r](py::object a, py::object dim, bool keepdim) {
      return reduce(r.name, a, dim, keepdim, r.all, r.over);
    };
    cls.def(r.name, fn, "dim"_a = py::none(), "keepdim"_a = false, r.doc);
    m.def(r.name, fn, "input"_a, "dim"_a = py::none(), "keepdim"_a = false, r.doc);
  }

  // ---- element-wise
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

  // ---- softmax, cat, stack, view functions
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
      "tensors"_a, "dim"_a = py::int_(0), "The tensors (equal shapes) stacked along a new dimension.");
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
  m.def(
      "promote_types",
      [](py::object a, py::object b) {
        return promote_types(dtype_arg(a, "promote_types"), dtype_arg(b, "promote_types"));
      },
      "type1"_a, "type2"_a, "The dtype of an op on tensors of these dtypes (torch's rule).");
}

}  // namespace streamrt::python
