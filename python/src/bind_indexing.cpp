// Tensor.__getitem__ and __setitem__, as numpy's: ints, slices (any nonzero step), None and
// Ellipsis make views; one integer or bool tensor, list or array as the whole index selects a
// copy (advanced indexing, read only). Index errors are IndexError (Python's iteration protocol
// relies on it).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "args.hpp"
#include "bindings.hpp"
#include "error_text.hpp"
#include "interop.hpp"
#include "streamrt/error.hpp"
#include "streamrt/ops.hpp"
#include "streamrt/tensor.hpp"
#include "tensor_object.hpp"

namespace streamrt::python {

using namespace pybind11::literals;

namespace {

// Index errors become IndexError (Python's iteration protocol relies on it); a refusal of the OS
// (memory for the result, a worker thread) is no index error and is raised as it is.
template <class F>
Tensor index_op(F&& f) {
  try {
    return f();
  } catch (const ResourceUnavailable&) {
    throw;
  } catch (const Error& e) {
    throw py::index_error(python_text(e.text()));
  }
}

// True for a numpy array. Basic indices (ints, slices, tuples, None, ...) are told apart without
// touching numpy: `t[i]` is the common case and must not pay for a module lookup.
bool is_ndarray(py::handle h) {
  if (PyLong_Check(h.ptr()) || PySlice_Check(h.ptr()) || PyTuple_Check(h.ptr()) || h.is_none() ||
      h.ptr() == Py_Ellipsis) {
    return false;
  }
  return py::isinstance(h, numpy().attr("ndarray"));
}

// numpy's advanced indexing on read, as the whole index: an integer tensor, list or array
// selects along dimension 0 (a gather copy on the current stream); a bool one of the shape of
// t's leading dimensions selects the elements where it is true (a copy, flattened over those
// dimensions). nullopt for any other index (a basic one).
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
      const auto i =
          int_arg(h, "Tensor.__getitem__", "index", std::numeric_limits<std::int64_t>::min(),
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

}  // namespace

void bind_indexing(py::module_& m) {
  auto cls = py::reinterpret_borrow<py::class_<Tensor>>(m.attr("Tensor"));
  cls.def(
         "__getitem__", [](const Tensor& t, py::object index) { return get_item(t, index); },
         "Views for ints, slices (negative steps too), None and ...; no copy.")
      .def(
          "__setitem__",
          [](const Tensor& t, py::object index, py::object value) { set_item(t, index, value); },
          "Writes a number or a (broadcast) tensor into the indexed view, on the current stream.");
}

}  // namespace streamrt::python
