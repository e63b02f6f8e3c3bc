#pragma once
//! \file args.hpp
//! Python arguments to C++ values, one converter per kind of argument (integers, devices, streams,
//! time-outs, dtypes, sizes, dimensions, seeds). Each names the call (`what`) and the argument in
//! the TypeError or ValueError it raises, so no input reaches pybind11's bare cast errors. All
//! require the GIL.

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "streamrt/device.hpp"
#include "streamrt/stream.hpp"
#include "streamrt/tensor.hpp"

//! A Shape crosses to and from Python as a sequence of ints, as the std::vector it replaced (every
//! binding file that binds a Shape includes this header, so all of them use this caster).
template <>
struct pybind11::detail::type_caster<streamrt::Shape>
    : pybind11::detail::list_caster<streamrt::Shape, std::int64_t> {};

namespace streamrt::python {

namespace py = pybind11;

//! The dtypes a tensor may have, as the messages of refused dtypes list them.
inline constexpr const char* kSupportedDTypes =
    "streamrt.float32, streamrt.float64, streamrt.int32, streamrt.int64 or streamrt.bool (or the "
    "numpy equivalents)";

//! Short type name of a Python object ("int", "numpy.ndarray") for messages.
std::string type_name(py::handle obj);

//! An integer argument `name` of `what` (an int or anything with __index__, such as a numpy
//! integer; not a bool) in [lo, hi]. Raises TypeError naming the argument for other types, and
//! `range_error` (ValueError by default; IndexError for indices) naming the value and the range
//! when it is outside, however large.
std::int64_t int_arg(py::handle obj, const char* what, const char* name, std::int64_t lo,
                     std::int64_t hi, PyObject* range_error = PyExc_ValueError);

//! A number argument `name` of `what` as a double: TypeError naming it for non-numbers,
//! OverflowError naming the value and the limit for an int too large for a float (numpy's
//! exception for the same).
double float_arg(py::handle obj, const char* what, const char* name);

//! A dimension argument: any int (a far-out one is refused by the op, naming the tensor's range);
//! IndexError when it does not fit an int.
int to_dim(py::handle obj, const char* what);

//! Dimensions given as `*dims` or as one sequence (permute(1, 0) or permute((1, 0))).
std::vector<int> dims_from_args(const py::args& args, const char* what);

//! Device from None (CPU), a streamrt.Device, an index (a CPU device, as torch.cuda accepts 0) or
//! text such as "cpu", "cpu:0". Raises ValueError for malformed text and TypeError for other
//! types. Does not check that the device has a backend.
Device to_device(py::handle obj, const char* what);

//! The device of a new tensor, as to_device; streamrt.Error (not the ValueError of an argument
//! error) for a device this build has no tensors for, as for any such device.
Device tensor_device(py::handle obj, const char* what);

//! A streamrt.Stream; TypeError otherwise.
Stream to_stream(py::handle obj, const char* what);

//! A streamrt.Stream, or nullopt for None; TypeError otherwise.
std::optional<Stream> to_optional_stream(py::handle obj, const char* what);

//! A streamrt.Stream, or the current stream for None; TypeError otherwise.
Stream stream_or_current(py::handle obj, const char* what);

//! A time-out in seconds (int or float, finite, >= 0) as nanoseconds; nanoseconds::max() past
//! what nanoseconds count. TypeError or ValueError naming `name` otherwise.
std::chrono::nanoseconds to_timeout(py::handle obj, const char* what, const char* name = "timeout");

//! The dtype named by numpy's name for it ("float32", "int64", "bool"), if streamrt has it.
std::optional<DType> dtype_from_name(const std::string& name);

//! A dtype from a streamrt dtype or a numpy dtype-like (np.float32, "float64", np.dtype("i4"),
//! float, int). TypeError otherwise.
DType to_dtype(py::handle obj, const char* what);

//! to_dtype, or `fallback` for None.
DType to_dtype_or(py::handle obj, DType fallback, const char* what);

//! Sizes of a new tensor, given as one integer or a sequence of integers (each >= 0, at most
//! kMaxDims of them).
Shape to_shape(py::handle sizes, const char* what);

//! Sizes given as `*size` or as one sequence: randn(2, 3), randn((2, 3)), randn([2, 3]),
//! zeros(()) for a scalar.
Shape sizes_from_args(const py::args& args, const char* what);

//! Sizes of reshape and expand, given as `*size` or as one sequence: -1 (inferred, or kept) is
//! allowed; the op refuses other negative sizes, naming them.
Shape signed_sizes_from_args(const py::args& args, const char* what);

//! A shape (or strides) as a Python tuple of ints.
py::tuple shape_tuple(const Shape& shape);

//! A seed: an integer from 0 to 2**64 - 1; TypeError or ValueError naming `what` otherwise.
std::uint64_t to_seed(py::handle seed, const char* what);

}  // namespace streamrt::python
