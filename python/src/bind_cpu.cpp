// The CPU backend's settings from Python: how many worker threads run the streams, how long an
// idle one polls before it sleeps, and whether they run under SCHED_BATCH.
#include <pybind11/pybind11.h>

#include <chrono>
#include <cstdint>
#include <string>

#include "args.hpp"
#include "bindings.hpp"
#include "streamrt/cpu.hpp"
#include "streamrt/device.hpp"

namespace streamrt::python {

using namespace pybind11::literals;

void bind_cpu(py::module_& m) {
  m.def(
      "set_num_threads",
      [](py::object n_arg) {
        // The library's own limit; named here so that the message says it.
        constexpr std::int64_t kMaxThreads = 4096;
        const auto n = int_arg(n_arg, "set_num_threads", "n", 1, kMaxThreads);
        py::gil_scoped_release release;  // workers finishing Python work need the GIL
        cpu::set_num_threads(static_cast<int>(n));
      },
      "n"_a, "Sets the number of CPU worker threads shared by all streams.");
  m.def("get_num_threads", &cpu::num_threads, "The number of CPU worker threads.");
  m.def(
      "set_worker_spin",
      [](py::object us_arg) {
        const double us = float_arg(us_arg, "set_worker_spin", "us");
        if (!(us >= 0 && us <= 1e6)) {
          throw py::value_error("set_worker_spin(" + std::to_string(us) +
                                "): the poll time must be from 0 to 1000000 microseconds");
        }
        cpu::set_worker_spin(std::chrono::microseconds(static_cast<std::int64_t>(us)));
      },
      "us"_a,
      "Sets how long (microseconds) an idle CPU worker polls for work before it sleeps: shorter "
      "gives the cores back sooner to other threads and processes (several MPI ranks per "
      "machine), longer hands bursts of work over without a wake-up. Default 50, or "
      "STREAMRT_WORKER_SPIN_US.");
  m.def(
      "get_worker_spin", [] { return static_cast<double>(cpu::worker_spin().count()); },
      "How long (microseconds) an idle CPU worker polls before it sleeps.");
  m.def(
      "set_worker_batch", [](bool on) { cpu::set_worker_batch(on); }, "on"_a,
      "Runs the CPU workers under Linux's SCHED_BATCH (True) or the default policy (False): a "
      "batch worker woken for new work does not preempt the thread running on its core. For "
      "processes sharing the cores (several MPI ranks per machine; streamrt.distributed turns it "
      "on itself when it finds them oversubscribed). Default False, or STREAMRT_WORKER_BATCH=1.");
  m.def(
      "get_worker_batch", [] { return cpu::worker_batch(); },
      "Whether the CPU workers run under SCHED_BATCH (set_worker_batch).");
}

}  // namespace streamrt::python
