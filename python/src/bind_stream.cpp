// streamrt.Stream and the current and default streams (`with stream:` is stream_context.hpp's).
// Stream.launch runs Python callables on worker threads; every call that waits for stream work
// releases the GIL first: that work may be a Python callable that needs it, and other Python
// threads should run meanwhile.
#include <pybind11/pybind11.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "args.hpp"
#include "bindings.hpp"
#include "launch_handle.hpp"
#include "launch_origin.hpp"
#include "py_exception.hpp"
#include "py_runtime.hpp"
#include "stream_context.hpp"
#include "streamrt/cpu.hpp"
#include "streamrt/error.hpp"
#include "streamrt/event.hpp"
#include "streamrt/impl/launch_site.hpp"
#include "streamrt/stream.hpp"
#include "waits.hpp"

namespace streamrt::python {

using namespace pybind11::literals;

namespace {

// Stream.synchronize() without a time-out: waits interruptibly for the stream's end as it is now,
// then synchronizes (reports a failure as a stream sync does; returns at once unless other threads
// submitted more work meanwhile).
void synchronize_stream(const Stream& s) {
  // A capturing stream's synchronize() refuses, naming itself: no record to wait for first.
  if (on_main_thread() && !s.is_capturing()) {
    wait_record(Stream(s).record_event());  // a copy names the same stream
  }
  py::gil_scoped_release release;
  s.synchronize();
}

}  // namespace

Stream make_stream(py::handle device, int priority, py::handle partition) {
  const Device d = to_device(device, "Stream(device=...)");
  const auto [least, greatest] = cpu::priority_range();
  if (priority > least || priority < greatest) {
    throw py::value_error("Stream(priority=" + std::to_string(priority) +
                          "): out of range; use a value from " + std::to_string(least) +
                          " (least urgent) to " + std::to_string(greatest) +
                          " (most urgent), as returned by Stream.priority_range()");
  }
  if (partition.is_none()) return Stream(d, priority);
  if (!py::isinstance<PyPartition>(partition)) {
    throw py::type_error("Stream(partition=...): expected a streamrt.cpu.Partition, got " +
                         type_name(partition));
  }
  if (d.type != DeviceType::CPU) {
    throw py::value_error("Stream(device='" + d.str() +
                          "', partition=...): a partition holds CPU "
                          "workers; leave device as 'cpu'");
  }
  return partition.cast<PyPartition&>().partition->new_stream(priority);
}

namespace {

// A Python callable with its arguments, run in stream order on a worker thread. It takes the GIL
// only while the callable runs; its references are dropped with the GIL held when it ran, and
// through SafeObject when it was skipped (failed stream) or never ran (interpreter exit).
struct PyWork {
  SafeObject fn;
  SafeObject args;    // a tuple
  SafeObject kwargs;  // a dict, or empty
  const char* label;
  PendingPythonWork pending;
  std::shared_ptr<LaunchResult> result;
  bool keep = false;  // captured into a graph: runs at every replay, so it keeps its references

  void operator()() {
    PythonScope scope;
    if (!scope.ok()) {
      throw Error(std::string("Python callable '") + label +
                  "' was not run: the Python interpreter is shutting down (work launched after "
                  "streamrt's exit handler ran)");
    }
    try {
      PyObject* value = PyObject_Call(fn.get().ptr(), args.get().ptr(), kwargs.get().ptr());
      if (value == nullptr) throw py::error_already_set();
      result->value = SafeObject(py::reinterpret_steal<py::object>(value));
      result->ran = true;
    } catch (const py::error_already_set& e) {
      PythonException carried(
          e, current_stream().device().str() + " stream " + std::to_string(current_stream().id()));
      if (!keep) drop();
      throw carried;  // the stream fails with the original Python exception
    }
    if (!keep) drop();
  }

  // With the GIL held: release the callable and its arguments now, not later on another thread.
  void drop() noexcept {
    fn.reset();
    args.reset();
    kwargs.reset();
  }
};

std::string stream_repr(const Stream& s) {
  return "streamrt.Stream(device='" + s.device().str() + "', id=" + std::to_string(s.id()) +
         ", priority=" + std::to_string(s.priority()) + ", " + (s.query() ? "idle" : "busy") + ")";
}

// The stream's identity, ordering and waits.
void bind_stream_queue(py::class_<Stream>& cls) {
  cls.def(py::init([](py::handle device, int priority, py::handle partition) {
            return make_stream(device, priority, partition);
          }),
          "device"_a = "cpu", "priority"_a = 0, py::kw_only(), "partition"_a = py::none(),
          "A NEW stream on `device` with `priority` (lower = more urgent); with `partition` (a "
          "streamrt.cpu.Partition), its work runs only on that partition's workers.")
      .def_property_readonly("device", &Stream::device, "The stream's device.")
      .def_property_readonly("priority", &Stream::priority, "The priority given at creation.")
      .def_property_readonly("id", &Stream::id, "Unique per device while alive; 0 = default.")
      .def_property_readonly("stream_id", &Stream::id, "Same as id (torch.Stream.stream_id).")
      .def_property_readonly(
          "device_index", [](const Stream& s) { return s.device().index; },
          "The device's index (torch.Stream.device_index).")
      .def_property_readonly(
          "device_type", [](const Stream& s) { return static_cast<int>(s.device().type); },
          "The device type as torch's c10 DeviceType number: 0 = CPU, 1 = CUDA "
          "(torch.Stream.device_type).")
      .def_static(
          "priority_range", [] { return cpu::priority_range(); },
          "(least urgent, most urgent) priorities accepted.")
      .def("query", &Stream::query,
           "True when all work submitted so far has finished. Never blocks.")
      .def(
          "synchronize",
          [](const Stream& s, py::object timeout) {
            return timed_wait(
                timeout, "Stream.synchronize", [&] { synchronize_stream(s); },
                [&](std::chrono::nanoseconds t) { return s.synchronize_for(t); });
          },
          "timeout"_a = py::none(),
          "Blocks (GIL released) until the work submitted before this call has finished; "
          "re-raises the first failure not yet reported, as raised. With timeout (seconds): "
          "returns False if that work has not finished by then (nothing changes; a failure "
          "stays for a later wait), True when it has.")
      .def("wait_event", &Stream::wait_event, "event"_a,
           "Work submitted later waits for `event` as recorded now. Returns at once.")
      .def("wait_stream", &Stream::wait_stream, "stream"_a,
           "Work submitted later waits for all work submitted to `stream` so far. Returns at "
           "once.")
      .def("cancel", &Stream::cancel,
           "Drops the queued work that has not started (the running item finishes) and returns "
           "how many items were dropped. Events recorded after dropped work complete with "
           "streamrt.Cancelled; this stream's synchronize() does not raise for it. Returns at "
           "once.")
      .def("pending", &Stream::pending,
           "Launched items not finished yet (queued or running). A snapshot; never blocks.");
}

// Work on the stream (events, Python callables), `with stream:` and the Python protocols.
void bind_stream_work(py::class_<Stream>& cls) {
  cls.def(
         "record_event",
         [](Stream& s, py::object event) -> py::object {
           if (event.is_none()) return py::cast(s.record_event());
           if (!py::isinstance<Event>(event)) {
             throw py::type_error("Stream.record_event: expected a streamrt.Event or None, got " +
                                  type_name(event));
           }
           s.record_event(event.cast<Event&>());
           return event;
         },
         "event"_a = py::none(),
         "Records `event` (a new one when None) at the current end of the stream; returns it.")
      .def(
          "launch",
          [](Stream& s, py::object fn, py::args args, py::kwargs kwargs) {
            if (!PyCallable_Check(fn.ptr())) {
              throw py::type_error("Stream.launch: fn must be callable, got " + type_name(fn));
            }
            refuse_python_work_at_exit("Stream.launch");
            const char* label = callable_label(fn);
            LaunchHandle handle{std::make_shared<LaunchResult>(), Event()};
            PyWork work{SafeObject(std::move(fn)),
                        SafeObject(std::move(args)),
                        kwargs.empty() ? SafeObject() : SafeObject(std::move(kwargs)),
                        label,
                        {},
                        handle.result};
            if (s.is_capturing()) {
              // Kept by a graph, maybe until exit: not counted as pending work (exit would wait).
              work.keep = true;
              PendingPythonWork uncounted(std::move(work.pending));
            }
            {
              const impl::LaunchOriginScope origin(launch_origin_here());
              s.launch(label, std::move(work));
            }
            handle.done.record(s);
            finish_blocking_launches();  // launch-blocking mode: raises fn's exception here
            return handle;
          },
          "fn"_a,
          "Runs fn(*args, **kwargs) on the stream after the work submitted before, on a worker "
          "thread that holds the GIL only while fn runs. Returns at once, with a LaunchHandle "
          "whose result() is fn's return value once it ran. An exception fn raises fails the "
          "stream and is re-raised, as raised, by the first wait that reports it (result(), "
          "synchronize()).")
      .def("__enter__",
           [](Stream& s) {
             enter_stream(s);
             return s;
           })
      .def("__exit__",
           [](Stream&, py::args) {
             exit_stream("Stream");
             return false;
           })
      .def("__eq__",
           [](const Stream& a, py::object b) -> py::object {
             if (!py::isinstance<Stream>(b)) {
               return py::reinterpret_borrow<py::object>(Py_NotImplemented);
             }
             return py::bool_(a == b.cast<const Stream&>());
           })
      .def("__hash__", [](const Stream& s) { return std::hash<Stream>()(s); })
      .def("__repr__", &stream_repr);
}

}  // namespace

void bind_stream(py::module_& m) {
  py::class_<Stream> cls(m, "Stream",
                         "An in-order queue of work on a device; streams run concurrently with "
                         "each other. Copies of a handle name the same stream.");
  bind_stream_queue(cls);
  bind_stream_work(cls);
  m.def(
      "current_stream",
      [](py::object device) { return current_stream(to_device(device, "current_stream")); },
      "device"_a = py::none(),
      "This thread's current stream (the default stream until set; inside launched work, the "
      "stream running it).");
  m.def(
      "default_stream",
      [](py::object device) { return default_stream(to_device(device, "default_stream")); },
      "device"_a = py::none(), "The device's default stream (id 0).");
  m.def(
      "set_stream", [](py::object s) { set_current_stream(to_stream(s, "set_stream")); },
      "stream"_a, "Makes `stream` this thread's current stream for its device.");
}

}  // namespace streamrt::python
