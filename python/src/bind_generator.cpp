// streamrt.Generator, the default generator, and the random numbers drawn from them (rand,
// randn): seed=, generator=, else the default generator, as torch's.
#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>

#include "args.hpp"
#include "bindings.hpp"
#include "streamrt/tensor.hpp"
#include "tensor_object.hpp"

namespace streamrt::python {

using namespace pybind11::literals;

namespace {

Generator& default_generator() {
  static auto* g = new Generator(0);  // leaked: shared with Python, used until exit
  return *g;
}

Tensor random_tensor(bool normal, const py::args& size, py::object dtype, py::object seed,
                     py::object generator, py::object device) {
  const char* what = normal ? "randn" : "rand";
  const Shape shape = sizes_from_args(size, what);
  const DType d = to_dtype_or(dtype, DType::Float32, what);
  const Device dev = tensor_device(device, what);
  if (!seed.is_none() && !generator.is_none()) {
    throw py::value_error(std::string(what) + ": pass seed= or generator=, not both");
  }
  if (!seed.is_none()) {
    const std::uint64_t v = to_seed(seed, what);
    return run_op(what, [&] { return normal ? randn(shape, v, d, dev) : rand(shape, v, d, dev); });
  }
  if (!generator.is_none() && !py::isinstance<Generator>(generator)) {
    throw py::type_error(std::string(what) + ": generator must be a streamrt.Generator, got " +
                         type_name(generator));
  }
  Generator g = generator.is_none() ? default_generator() : generator.cast<Generator>();
  return run_op(what, [&] { return normal ? randn(shape, g, d, dev) : rand(shape, g, d, dev); });
}

}  // namespace

void bind_generator(py::module_& m) {
  py::class_<Generator>(m, "Generator",
                        "Random numbers for rand/randn: a seed and an offset into a counter-based "
                        "sequence; copies share the offset.")
      .def(py::init([](py::object seed) { return Generator(to_seed(seed, "Generator")); }),
           "seed"_a = 0)
      .def_property_readonly("seed", &Generator::seed)
      .def_property_readonly("offset", &Generator::offset)
      .def(
          "manual_seed",
          [](py::object self, py::object seed) {
            self.cast<Generator&>().manual_seed(to_seed(seed, "Generator.manual_seed"));
            return self;
          },
          "seed"_a, "Restarts the sequence of `seed`; returns the generator.")
      .def("__repr__", [](const Generator& g) {
        return "streamrt.Generator(seed=" + std::to_string(g.seed()) +
               ", offset=" + std::to_string(g.offset()) + ")";
      });
  m.attr("default_generator") = py::cast(default_generator());
  m.def(
      "manual_seed",
      [](py::object seed) { default_generator().manual_seed(to_seed(seed, "manual_seed")); },
      "seed"_a, "Seeds the default generator used by rand/randn without seed= or generator=.");
  m.def(
      "randn",
      [](py::args size, py::object dtype, py::object seed, py::object generator,
         py::object device) { return random_tensor(true, size, dtype, seed, generator, device); },
      "dtype"_a = py::none(), "seed"_a = py::none(), "generator"_a = py::none(),
      "device"_a = py::none(),
      "randn(*size, dtype=None, seed=None, generator=None, device=None): standard normal numbers "
      "on the current stream; the same seed gives the same numbers on any stream.");
  m.def(
      "rand",
      [](py::args size, py::object dtype, py::object seed, py::object generator,
         py::object device) { return random_tensor(false, size, dtype, seed, generator, device); },
      "dtype"_a = py::none(), "seed"_a = py::none(), "generator"_a = py::none(),
      "device"_a = py::none(), "As randn, uniform in [0, 1).");
}

}  // namespace streamrt::python
