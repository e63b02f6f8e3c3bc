// The CPU backend's settings from Python: how many worker threads run the streams, how long an
// idle one polls before it sleeps, whether they run under SCHED_BATCH, and partitions of them.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "args.hpp"
#include "bindings.hpp"
#include "py_runtime.hpp"
#include "streamrt/cpu.hpp"
#include "streamrt/device.hpp"

namespace streamrt::python {

using namespace pybind11::literals;

PyPartition::~PyPartition() {
  if (!partition) return;
  if (Py_IsInitialized() && PyGILState_Check()) {
    py::gil_scoped_release release;
    partition.reset();
  } else {
    partition.reset();
  }
}

namespace {

// The core ids of Partition(cores=...): a sequence of ints, each once (ValueError otherwise).
std::vector<int> core_list(py::handle cores) {
  if (!py::isinstance<py::sequence>(cores) || py::isinstance<py::str>(cores)) {
    throw py::type_error("Partition(cores=...): expected a sequence of core ids (ints), got " +
                         type_name(cores));
  }
  std::vector<int> ids;
  for (py::handle c : cores) {
    const auto id = int_arg(c, "Partition", "cores", 0, 1 << 20);
    if (std::find(ids.begin(), ids.end(), id) != ids.end()) {
      throw py::value_error("Partition(cores=...): core " + std::to_string(id) +
                            " is named twice; name each core once (one worker is pinned to each)");
    }
    ids.push_back(static_cast<int>(id));
  }
  if (ids.empty()) {
    throw py::value_error(
        "Partition(cores=[]): name at least one core (one worker is pinned to "
        "each)");
  }
  return ids;
}

std::unique_ptr<PyPartition> make_partition(py::handle workers, py::handle cores) {
  if (workers.is_none() == cores.is_none()) {
    throw py::type_error(
        "Partition(): give exactly one of workers= (a count of unpinned workers) "
        "or cores= (a list of core ids, one pinned worker each)");
  }
  auto out = std::make_unique<PyPartition>();
  if (!workers.is_none()) {
    const auto n = int_arg(workers, "Partition", "workers", 1, 4096);
    py::gil_scoped_release release;  // it waits for shared workers, which may need the GIL
    out->partition.emplace(static_cast<int>(n));
  } else {
    auto ids = core_list(cores);
    py::gil_scoped_release release;
    out->partition.emplace(cpu::Partition::pinned(std::move(ids)));
  }
  return out;
}

void bind_partition(py::module_& m) {
  py::class_<PyPartition>(
      m, "Partition",
      "A set of CPU workers reserved for the streams created in it: other streams' work never "
      "runs there, and an op of its streams splits only over its workers. The shared pool gives "
      "up as many workers while it lives (get_num_threads() stays the total).")
      .def(py::init(&make_partition), "workers"_a = py::none(), py::kw_only(),
           "cores"_a = py::none(),
           "Partition(workers) reserves that many unpinned workers; Partition(cores=[...]) one "
           "worker pinned to each named core. Raises streamrt.Error when the shared pool would "
           "keep no worker, a core is not one this process may run on, or it is pinned by another "
           "live partition.")
      .def_property_readonly(
          "num_workers", [](const PyPartition& p) { return p.partition->num_workers(); },
          "The number of workers reserved.")
      .def_property_readonly(
          "cores", [](const PyPartition& p) { return p.partition->cores(); },
          "The cores the workers are pinned to (empty when unpinned).")
      .def(
          "new_stream",
          [](py::object self, int priority) { return make_stream(py::str("cpu"), priority, self); },
          "priority"_a = 0,
          "A NEW stream whose work runs only on this partition's workers (as "
          "Stream(priority=priority, partition=self)).")
      .def("__repr__", [](const PyPartition& p) {
        std::string cores;
        for (int c : p.partition->cores()) cores += (cores.empty() ? "" : ", ") + std::to_string(c);
        return "streamrt.cpu.Partition(workers=" + std::to_string(p.partition->num_workers()) +
               (cores.empty() ? "" : ", cores=[" + cores + "]") + ")";
      });
}

void bind_fork(py::module_& m) {
  m.def(
      "set_fork_timeout",
      [](py::object seconds_arg) {
        constexpr double kMaxSeconds = 86400;  // the library's own limit, named in the message
        const double seconds = float_arg(seconds_arg, "set_fork_timeout", "seconds");
        if (!(seconds >= 0 && seconds <= kMaxSeconds)) {
          throw py::value_error("set_fork_timeout(" + std::to_string(seconds) +
                                "): the time-out must be from 0 to 86400 seconds (0: os.fork() "
                                "does not wait for stream work)");
        }
        cpu::set_fork_timeout(std::chrono::duration_cast<std::chrono::nanoseconds>(
            std::chrono::duration<double>(seconds)));
      },
      "seconds"_a,
      "Sets how long os.fork() (multiprocessing, DataLoader workers) waits for the stream work "
      "queued when it is called, so that the child reads finished results. Work still pending "
      "after it runs in the parent only; the child's reads of it raise Cancelled saying why. "
      "Default 10, or STREAMRT_FORK_TIMEOUT; 0: no wait.");
  m.def(
      "get_fork_timeout", [] { return std::chrono::duration<double>(cpu::fork_timeout()).count(); },
      "How long (seconds) os.fork() waits for queued stream work (set_fork_timeout).");
  // The os.register_at_fork(before=...) hook (streamrt/__init__.py): os.fork() holds the GIL
  // through the pthread_atfork handlers, and stream work may need it (Python callables, ops that
  // call back into Python), so the wait happens here, without it; the handler then does not wait.
  m.def(
      "_finish_work_before_fork", [] { cpu::finish_work_before_fork(); },
      py::call_guard<py::gil_scoped_release>());
  // The after_in_child hook: the interpreter's locks work again, so the Python references of the
  // parent's work dropped in the child are released now (release_after_fork_in_child).
  m.def("_after_fork_in_child", [] { release_after_fork_in_child(); });
}

}  // namespace

void bind_cpu(py::module_& m) {
  bind_partition(m);
  m.def(
      "set_num_threads",
      [](py::object n_arg) {
        // The library's own limit; named here so that the message says it.
        constexpr std::int64_t kMaxThreads = 4096;
        const auto n = int_arg(n_arg, "set_num_threads", "n", 1, kMaxThreads);
        py::gil_scoped_release release;  // workers finishing Python work need the GIL
        cpu::set_num_threads(static_cast<int>(n));
      },
      "n"_a,
      "Sets the number of CPU worker threads, partitions' workers included (the shared pool gets "
      "the rest; it must keep at least one).");
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
      "on itself when it finds them oversubscribed), and for a Python thread enqueuing torch ops "
      "(streamrt.torch.install() turns it on). Default False, or STREAMRT_WORKER_BATCH=1.");
  m.def(
      "get_worker_batch", [] { return cpu::worker_batch(); },
      "Whether the CPU workers run under SCHED_BATCH (set_worker_batch).");
  bind_fork(m);
  m.def(
      "set_launch_blocking", [](bool on) { cpu::set_launch_blocking(on); }, "on"_a,
      "Launch-blocking mode, for debugging (True): every op and launch waits for its own work at "
      "its call, so a failure of stream work is raised by the line that queued it (as "
      "CUDA_LAUNCH_BLOCKING=1). Slow: work no longer overlaps Python. Default False, or "
      "STREAMRT_LAUNCH_BLOCKING=1.");
  m.def(
      "get_launch_blocking", [] { return cpu::launch_blocking(); },
      "Whether launch-blocking mode is on (set_launch_blocking).");
}

}  // namespace streamrt::python
