// streamrt.Device and the device-wide synchronize.
#include <pybind11/pybind11.h>

#include <chrono>
#include <limits>
#include <string>

#include "args.hpp"
#include "bindings.hpp"
#include "streamrt/device.hpp"
#include "streamrt/error.hpp"
#include "streamrt/stream.hpp"
#include "waits.hpp"

namespace streamrt::python {

using namespace pybind11::literals;

void bind_device(py::module_& m) {
  py::class_<Device>(m, "Device",
                     "A device: type ('cpu' or 'cuda') and index. streamrt.Device('cpu:0').")
      .def(py::init([](py::object spec) { return to_device(spec, "Device"); }), "device"_a)
      .def(py::init([](const std::string& type, py::object index_arg) {
             const auto index =
                 int_arg(index_arg, "Device", "index", 0, std::numeric_limits<int>::max());
             Device d = to_device(py::str(type), "Device");
             d.index = static_cast<int>(index);
             return d;
           }),
           "type"_a, "index"_a)
      .def_property_readonly(
          "type", [](const Device& d) { return std::string(to_string(d.type)); },
          "'cpu' or 'cuda'.")
      .def_property_readonly(
          "index", [](const Device& d) { return d.index; }, "The index.")
      .def("__str__", &Device::str)
      .def("__repr__",
           [](const Device& d) {
             return "streamrt.Device(type='" + std::string(to_string(d.type)) +
                    "', index=" + std::to_string(d.index) + ")";
           })
      .def("__eq__",
           [](const Device& a, py::object b) -> py::object {
             if (py::isinstance<Device>(b)) return py::bool_(a == b.cast<Device>());
             if (py::isinstance<py::str>(b)) {
               try {
                 return py::bool_(a == Device::parse(b.cast<std::string>()));
               } catch (const Error&) {
                 return py::bool_(false);
               }
             }
             return py::reinterpret_borrow<py::object>(Py_NotImplemented);
           })
      .def("__hash__", [](const Device& d) { return std::hash<Device>()(d); });

  m.def(
      "synchronize",
      [](py::object device) {
        const Device d = to_device(device, "synchronize");
        // In slices on the main thread, so that Ctrl-C interrupts it (see wait_interruptibly).
        wait_interruptibly(
            [&](std::chrono::nanoseconds slice) { return synchronize_for(slice, d); });
      },
      "device"_a = py::none(),
      "Blocks (GIL released) until all work submitted to every stream of the device has "
      "finished; re-raises the first failure found.");
}

}  // namespace streamrt::python
