// Python bindings of the core: Device, Stream, StreamContext, Event, the current stream and the
// device-wide calls. Every call that waits for stream work releases the GIL first: that work may
// be a Python callable that needs it, and other Python threads should run meanwhile.
#include <pybind11/stl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bindings.hpp"
#include "py_runtime.hpp"
#include "streamrt/cpu.hpp"
#include "streamrt/error.hpp"
#include "streamrt/event.hpp"
#include "streamrt/impl/backend.hpp"
#include "streamrt/stream.hpp"
#include "streamrt/stream_context.hpp"

namespace streamrt::python {

using namespace pybind11::literals;

std::string type_name(py::handle obj) {
  py::handle type = py::type::handle_of(obj);
  const std::string module = py::str(py::getattr(type, "__module__", py::str("")));
  const std::string name = py::str(py::getattr(type, "__qualname__", py::str("?")));
  if (module.empty() || module == "builtins") return name;
  return module + "." + name;
}

std::int64_t int_arg(py::handle obj, const char* what, const char* name, std::int64_t lo,
                     std::int64_t hi, PyObject* range_error) {
  if (PyIndex_Check(obj.ptr()) == 0 || PyBool_Check(obj.ptr()) != 0) {
    throw py::type_error(std::string(what) + ": " + name + " must be an integer, got " +
                         type_name(obj));
  }
  const auto v = py::reinterpret_steal<py::object>(PyNumber_Index(obj.ptr()));
  if (!v) throw py::error_already_set();
  int overflow = 0;
  const long long n = PyLong_AsLongLongAndOverflow(v.ptr(), &overflow);
  if (n == -1 && PyErr_Occurred() != nullptr) throw py::error_already_set();
  if (overflow != 0 || n < lo || n > hi) {
    const std::string text = py::str(v);
    PyErr_SetString(range_error, (std::string(what) + ": " + name + "=" + text +
                                  " is out of range; it must be from " + std::to_string(lo) +
                                  " to " + std::to_string(hi))
                                     .c_str());
    throw py::error_already_set();
  }
  return n;
}

double float_arg(py::handle obj, const char* what, const char* name) {
  const double v = PyFloat_AsDouble(obj.ptr());
  if (v == -1.0 && PyErr_Occurred() != nullptr) {
    if (PyErr_ExceptionMatches(PyExc_OverflowError) != 0) {
      PyErr_Clear();
      std::string text = py::str(obj);
      if (text.size() > 40) {
        text = text.substr(0, 20) + "... (" + std::to_string(text.size()) + " digits)";
      }
      PyErr_SetString(PyExc_OverflowError,
                      (std::string(what) + ": " + name + "=" + text +
                       " is too large for a float (the largest is about 1.8e308)")
                          .c_str());
    } else if (PyErr_ExceptionMatches(PyExc_TypeError) != 0) {
      PyErr_Clear();
      throw py::type_error(std::string(what) + ": " + name + " must be a number, got " +
                           type_name(obj));
    }
    throw py::error_already_set();
  }
  return v;
}

Device to_device(py::handle obj, const char* what) {
  if (obj.is_none()) return Device{};
  if (py::isinstance<Device>(obj)) return obj.cast<Device>();
  if (py::isinstance<py::int_>(obj) && !py::isinstance<py::bool_>(obj)) {
    // An index, as torch accepts (torch.cuda.synchronize(0)): a CPU device here.
    const auto index = int_arg(obj, what, "device index", 0, std::numeric_limits<int>::max());
    return Device{DeviceType::CPU, static_cast<int>(index)};
  }
  if (py::isinstance<py::str>(obj)) {
    try {
      return Device::parse(obj.cast<std::string>());
    } catch (const Error& e) {
      throw py::value_error(std::string(what) + ": " + python_spelling(e.what()));
    }
  }
  throw py::type_error(std::string(what) +
                       ": expected a device such as 'cpu', 'cpu:0' or 0 (a str, int or "
                       "streamrt.Device), "
                       "got " +
                       type_name(obj));
}

namespace {

// Short enough that Ctrl-C feels immediate, long enough that a long wait costs nothing.
constexpr std::chrono::nanoseconds kWaitSlice = std::chrono::milliseconds(50);

// Streams made current by `with stream:` / `with StreamContext(...)` on this thread, so that exits
// restore them in order. nullopt entries are StreamContext(None) scopes.
thread_local std::vector<std::optional<Stream>> tls_entered;

void enter_stream(const std::optional<Stream>& s) {
  if (s) {
    tls_entered.emplace_back(current_stream(s->device()));
    set_current_stream(*s);
  } else {
    tls_entered.emplace_back(std::nullopt);
  }
}

void exit_stream(const char* what) {
  if (tls_entered.empty()) {
    throw Error(std::string(what) +
                ".__exit__: this thread did not enter it (a stream context must be entered and "
                "exited on the same thread, with `with`)");
  }
  auto previous = std::move(tls_entered.back());
  tls_entered.pop_back();
  if (previous) set_current_stream(*previous);
}

// A time-out in seconds (int or float, finite, >= 0) as nanoseconds; ValueError or TypeError
// naming the call otherwise.
std::chrono::nanoseconds to_timeout(py::handle obj, const char* what,
                                    const char* name = "timeout") {
  if (py::isinstance<py::bool_>(obj) || !(py::isinstance<py::int_>(obj) ||
                                          py::isinstance<py::float_>(obj))) {
    throw py::type_error(std::string(what) + ": " + name + " must be a number of seconds, got " +
                         type_name(obj));
  }
  // Past what nanoseconds count (about 292 years): the longest wait there is, not an overflow.
  // An int too large even for a float is such a wait too.
  constexpr double kMaxSeconds = 9.2e9;
  if (py::isinstance<py::int_>(obj) &&
      PyObject_RichCompareBool(obj.ptr(), py::int_(static_cast<long long>(kMaxSeconds)).ptr(),
                               Py_GE) == 1) {
    return std::chrono::nanoseconds::max();
  }
  const double seconds = float_arg(obj, what, name);
  if (!(seconds >= 0) || !std::isfinite(seconds)) {
    throw py::value_error(std::string(what) + ": " + name + " must be a finite number >= 0, got " +
                          std::to_string(seconds));
  }
  if (seconds >= kMaxSeconds) return std::chrono::nanoseconds::max();
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::duration<double>(seconds));
}

// A host wait with an optional time-out (seconds), GIL released while waiting: None waits until
// done (interruptibly: `wait` releases the GIL itself) and returns None; a number waits at most
// that long and returns whether it was done. The Python result is made after the GIL is back.
template <class Wait, class WaitFor>
py::object timed_wait(py::handle timeout, const char* what, Wait wait, WaitFor wait_for) {
  if (timeout.is_none()) {
    wait();
    return py::none();
  }
  return py::bool_(wait_interruptibly_for(wait_for, to_timeout(timeout, what)));
}

// The thread ident of Python's main thread, the only one that runs signal handlers.
unsigned long g_main_thread = 0;

bool on_main_thread() { return PyThread_get_thread_ident() == g_main_thread; }

// Stream.synchronize() without a time-out: waits interruptibly for the stream's end as it is now,
// then synchronizes (reports a failure as a stream sync does; returns at once unless other threads
// submitted more work meanwhile).
void synchronize_stream(const Stream& s) {
  if (on_main_thread()) {
    auto position = Stream(s).record_event().impl();  // a copy names the same stream
    auto& backend = impl::backend(position->device().type);
    wait_interruptibly(
        [&](std::chrono::nanoseconds slice) { return backend.wait_event(*position, slice); });
  }
  py::gil_scoped_release release;
  s.synchronize();
}

// Event.synchronize() without a time-out, for the record current at the call.
void synchronize_event(const Event& e) {
  auto position = e.impl();
  // A position recorded during a capture stands for a graph's replay: Event::synchronize resolves
  // it (the backend must never receive one), uninterruptibly.
  if (!position || position->captured() || !on_main_thread()) {
    py::gil_scoped_release release;
    e.synchronize();  // raises for a never-recorded event
    return;
  }
  auto& backend = impl::backend(position->device().type);
  wait_interruptibly(
      [&](std::chrono::nanoseconds slice) { return backend.wait_event(*position, slice); });
  py::gil_scoped_release release;
  backend.synchronize_event(*position, std::nullopt);  // complete: reports its failure
}

// wait_all(events) without a time-out: as streamrt::wait_all (every event first, then the first
// failure in argument order), interruptibly, for the records current at the call.
void wait_all_events(const std::vector<Event>& events) {
  std::vector<std::shared_ptr<impl::EventImpl>> positions;
  for (const auto& e : events) positions.push_back(e.impl());
  const bool unrecorded_or_captured =
      std::any_of(positions.begin(), positions.end(),
                  [](const auto& p) { return !p || p->captured(); });
  if (unrecorded_or_captured || !on_main_thread()) {
    py::gil_scoped_release release;
    wait_all(events);  // raises for a never-recorded event
    return;
  }
  for (const auto& p : positions) {
    auto& backend = impl::backend(p->device().type);
    wait_interruptibly([&](std::chrono::nanoseconds slice) { return backend.wait_event(*p, slice); });
  }
  py::gil_scoped_release release;
  for (const auto& p : positions) impl::backend(p->device().type).synchronize_event(*p, std::nullopt);
}

Stream to_stream(py::handle obj, const char* what) {
  if (py::isinstance<Stream>(obj)) return obj.cast<Stream>();
  throw py::type_error(std::string(what) + ": expected a streamrt.Stream, got " + type_name(obj));
}

std::optional<Stream> to_optional_stream(py::handle obj, const char* what) {
  if (obj.is_none()) return std::nullopt;
  if (py::isinstance<Stream>(obj)) return obj.cast<Stream>();
  throw py::type_error(std::string(what) + ": expected a streamrt.Stream or None, got " +
                       type_name(obj));
}

Stream make_stream(py::handle device, int priority) {
  const Device d = to_device(device, "Stream(device=...)");
  const auto [least, greatest] = Stream::priority_range();
  if (priority > least || priority < greatest) {
    throw py::value_error("Stream(priority=" + std::to_string(priority) +
                          "): out of range; use a value from " + std::to_string(least) +
                          " (least urgent) to " + std::to_string(greatest) +
                          " (most urgent), as returned by Stream.priority_range()");
  }
  return Stream(d, priority);
}

// What a launched callable returned, once it ran (written and read with the GIL held).
struct LaunchResult {
  SafeObject value;
  bool ran = false;
};

// Stream.launch's handle: the callable's result, and the event recorded right after it.
struct LaunchHandle {
  std::shared_ptr<LaunchResult> result;
  Event done;
};

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
      PythonException carried(e, current_stream().device().str() + " stream " +
                                     std::to_string(current_stream().id()));
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

// A completion callback: fn(event) or fn(event, error), run once after the event's record
// completes. An exception it raises goes to sys.unraisablehook (never lost, never fatal).
struct DoneCallback {
  SafeObject fn;
  SafeObject event;
  bool with_error;
  PendingPythonWork pending;

  void run(const std::exception_ptr& failure) {
    PythonScope scope;
    if (!scope.ok()) {
      std::fputs(
          "streamrt: a completion callback was not run: the Python interpreter is "
          "shutting down\n",
          stderr);
      return;
    }
    try {
      py::object f = fn.object();
      if (with_error) {
        f(event.object(), exception_object(failure));
      } else {
        f(event.object());
      }
    } catch (py::error_already_set& e) {
      e.discard_as_unraisable(fn.object());
    } catch (const std::exception& e) {
      PyErr_SetString(PyExc_RuntimeError, python_spelling(e.what()).c_str());
      PyErr_WriteUnraisable(fn.get().ptr());
    }
    fn.reset();
    event.reset();
  }
};

// Whether `fn` accepts (event, error): it does when its signature binds two positional arguments.
bool takes_error_argument(py::handle fn) {
  py::object signature;
  try {
    signature = py::module_::import("inspect").attr("signature")(fn);
  } catch (const py::error_already_set&) {
    return false;  // no signature (some builtins): call it with the event only
  }
  try {
    signature.attr("bind")(py::none(), py::none());
    return true;
  } catch (const py::error_already_set& e) {
    if (!e.matches(PyExc_TypeError)) throw;
  }
  try {
    signature.attr("bind")(py::none());
    return false;
  } catch (const py::error_already_set& e) {
    if (!e.matches(PyExc_TypeError)) throw;
  }
  throw py::type_error("Event.add_done_callback: fn must accept (event) or (event, error); " +
                       std::string(py::str(fn)) + " has signature " +
                       std::string(py::str(signature)));
}

std::string stream_repr(const Stream& s) {
  return "streamrt.Stream(device='" + s.device().str() + "', id=" + std::to_string(s.id()) +
         ", priority=" + std::to_string(s.priority()) + ", " + (s.query() ? "idle" : "busy") + ")";
}

std::string event_repr(const Event& e) {
  std::string out = "streamrt.Event(state='" + std::string(to_string(e.state())) + "'";
  if (auto d = e.device()) out += ", device='" + d->str() + "'";
  if (e.options().enable_timing) out += ", enable_timing=True";
  if (e.options().blocking) out += ", blocking=True";
  return out + ")";
}

// A `with` context for a stream or None (torch.StreamContext). Entering makes the stream current
// on this thread; exiting restores the previous one.
struct PyStreamContext {
  std::optional<Stream> stream;
};

}  // namespace

bool wait_interruptibly_for(const std::function<bool(std::chrono::nanoseconds)>& try_wait,
                            std::chrono::nanoseconds timeout) {
  if (!on_main_thread()) {
    py::gil_scoped_release release;
    return try_wait(timeout);
  }
  // Each slice that times out changes nothing (the waits promise it), so slices add up to one
  // wait of `timeout` that Ctrl-C can end. Time left is timeout minus time waited: no deadline
  // sum that a huge time-out could overflow.
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  for (;;) {
    const auto waited = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start);
    if (waited >= timeout) return try_wait(std::chrono::nanoseconds::zero());
    bool done = false;
    {
      py::gil_scoped_release release;
      done = try_wait(std::min<std::chrono::nanoseconds>(timeout - waited, kWaitSlice));
    }
    if (done) return true;
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
  }
}

void wait_interruptibly(const std::function<bool(std::chrono::nanoseconds)>& try_wait) {
  if (!on_main_thread()) {
    py::gil_scoped_release release;
    while (!try_wait(std::chrono::hours(1))) {
    }
    return;
  }
  for (;;) {
    bool done = false;
    {
      py::gil_scoped_release release;
      done = try_wait(kWaitSlice);
    }
    if (done) return;
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
  }
}

void bind_core(py::module_& m) {
  g_main_thread = py::module_::import("threading").attr("main_thread")().attr("ident").cast<unsigned long>();
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

  py::class_<Stream>(m, "Stream",
                     "An in-order queue of work on a device; streams run concurrently with each "
                     "other. Copies of a handle name the same stream.")
      .def(py::init(&make_stream), "device"_a = "cpu", "priority"_a = 0,
           "A NEW stream on `device` with `priority` (lower = more urgent).")
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
      .def_static("priority_range", [] { return cpu::priority_range(); },
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
           "Launched items not finished yet (queued or running). A snapshot; never blocks.")
      .def(
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
            s.launch(label, std::move(work));
            handle.done.record(s);
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

  py::class_<PyStreamContext>(m, "StreamContext",
                              "with StreamContext(stream): makes `stream` current on this thread "
                              "for the block (None: does nothing), then restores the previous one.")
      .def(py::init([](py::object s) {
             return PyStreamContext{to_optional_stream(s, "StreamContext")};
           }),
           "stream"_a)
      .def_property_readonly(
          "stream", [](const PyStreamContext& c) { return c.stream; },
          "The stream made current (None for a no-op context).")
      .def("__enter__",
           [](PyStreamContext& c) {
             enter_stream(c.stream);
             return c.stream;
           })
      .def("__exit__",
           [](PyStreamContext&, py::args) {
             exit_stream("StreamContext");
             return false;
           })
      .def("__repr__", [](const PyStreamContext& c) {
        return "streamrt.StreamContext(" + (c.stream ? stream_repr(*c.stream) : "None") + ")";
      });

  m.def(
      "stream", [](py::object s) { return PyStreamContext{to_optional_stream(s, "stream")}; },
      "stream"_a, "StreamContext(stream): `with streamrt.stream(s):` makes `s` current.");
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
  m.def(
      "synchronize",
      [](py::object device) {
        const Device d = to_device(device, "synchronize");
        // In slices on the main thread, so that Ctrl-C interrupts it (see wait_interruptibly).
        wait_interruptibly([&](std::chrono::nanoseconds slice) { return synchronize_for(slice, d); });
      },
      "device"_a = py::none(),
      "Blocks (GIL released) until all work submitted to every stream of the device has "
      "finished; re-raises the first failure found.");
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
  m.def("get_worker_batch", [] { return cpu::worker_batch(); },
        "Whether the CPU workers run under SCHED_BATCH (set_worker_batch).");

  py::class_<Event>(m, "Event",
                    "A marker recorded in a stream: poll it, wait for it, time it, reset it.")
      .def(py::init([](bool enable_timing, bool blocking, bool interprocess, py::object device) {
             if (interprocess) {
               throw Error(
                   "Event(interprocess=True): an interprocess event shares a CUDA event with "
                   "another process through an IPC handle; streamrt's CPU events live inside one "
                   "process, so there is nothing to share. Signal other processes with "
                   "multiprocessing (e.g. multiprocessing.Event) once this event completes");
             }
             if (!device.is_none()) {
               const Device d = to_device(device, "Event(device=...)");
               // Raises streamrt.Error naming what exists for a device without a backend (cuda)
               // or an index that does not exist; the event then records on any stream of it.
               (void)default_stream(d);
             }
             return Event(EventOptions{enable_timing, blocking});
           }),
           "enable_timing"_a = false, "blocking"_a = false, "interprocess"_a = false,
           "device"_a = py::none(),
           "An event (torch.Event / torch.cuda.Event arguments). `device` is checked (a CPU "
           "device; the record decides where the event is); interprocess=True raises "
           "streamrt.Error: CPU events are not shared between processes.")
      .def(
          "record",
          [](Event& e, py::object stream) {
            if (stream.is_none()) {
              e.record();
              return;
            }
            if (!py::isinstance<Stream>(stream)) {
              throw py::type_error(
                  "Event.record: expected a streamrt.Stream or None, got " + type_name(stream) +
                  ". record() marks the current end of the stream: call it right after the ops "
                  "to wait for or time, with no argument (current stream) or with a stream");
            }
            e.record(stream.cast<const Stream&>());
          },
          "stream"_a = py::none(),
          "Records the event at the current end of `stream` (default: the current stream), "
          "replacing an earlier record. Returns at once.")
      .def(
          "wait",
          [](const Event& e, py::object stream) {
            if (stream.is_none()) {
              e.wait();
            } else {
              e.wait(to_stream(stream, "Event.wait"));
            }
          },
          "stream"_a = py::none(),
          "Stream-side wait (as torch): work submitted later to `stream` (default: the current "
          "stream) waits for this event. Returns at once; to block the host use synchronize().")
      .def("query", &Event::query,
           "True when recorded and the work before the record has finished. Never blocks.")
      .def_property_readonly("completed", &Event::completed, "Same as query().")
      .def(
          "synchronize",
          [](const Event& e, py::object timeout) {
            return timed_wait(
                timeout, "Event.synchronize", [&] { synchronize_event(e); },
                [&](std::chrono::nanoseconds t) { return e.wait_for(t); });
          },
          "timeout"_a = py::none(),
          "Blocks (GIL released) until complete; re-raises the failure of the work before it. "
          "With timeout (seconds): returns False if not complete by then, True when complete.")
      .def(
          "wait_for",
          [](const Event& e, py::object timeout_s) {
            const auto timeout = to_timeout(timeout_s, "Event.wait_for", "timeout_s");
            py::gil_scoped_release release;
            return e.wait_for(timeout);
          },
          "timeout_s"_a,
          "As synchronize(), but returns False after timeout_s seconds, True when complete.")
      .def(
          "elapsed_time",
          [](const Event& start, py::object end) {
            if (py::isinstance<Stream>(end)) {
              throw py::type_error(
                  "Event.elapsed_time(end) takes the end Event, not a Stream: record a second "
                  "timing event after the work and call start.elapsed_time(end)");
            }
            if (!py::isinstance<Event>(end)) {
              throw py::type_error("Event.elapsed_time: expected a streamrt.Event, got " +
                                   type_name(end));
            }
            return start.elapsed_time(end.cast<const Event&>());
          },
          "end"_a,
          "Milliseconds from this event to `end`; both need enable_timing=True, a record and "
          "completion, else streamrt.Error. Never blocks.")
      .def("reset", &Event::reset, "Back to never-recorded. Never blocks.")
      .def_property_readonly("device", &Event::device, "The device recorded on; None before.")
      .def_property_readonly("enable_timing",
                             [](const Event& e) { return e.options().enable_timing; })
      .def_property_readonly("blocking", [](const Event& e) { return e.options().blocking; })
      .def_property_readonly(
          "state", [](const Event& e) { return std::string(to_string(e.state())); },
          "'not_recorded', 'pending', 'complete', 'failed' or 'cancelled'.")
      .def(
          "add_done_callback",
          [](py::object self, py::object fn) {
            if (!PyCallable_Check(fn.ptr())) {
              throw py::type_error("Event.add_done_callback: fn must be callable, got " +
                                   type_name(fn));
            }
            refuse_python_work_at_exit("Event.add_done_callback");
            const bool with_error = takes_error_argument(fn);
            const Event& e = self.cast<const Event&>();
            auto cb = std::make_shared<DoneCallback>(DoneCallback{
                SafeObject(std::move(fn)), SafeObject(std::move(self)), with_error, {}});
            e.on_complete([cb](std::exception_ptr failure) { cb->run(failure); });
          },
          "fn"_a,
          "Calls fn(event) or fn(event, error) once the current record completes (error: the "
          "exception of the work before it, or None), on a worker thread holding the GIL, or at "
          "once if already complete. Exceptions fn raises go to sys.unraisablehook.")
      .def("__repr__", &event_repr);  // identity eq/hash: each Python Event is one event

  py::class_<LaunchHandle>(m, "LaunchHandle",
                           "What Stream.launch(fn, ...) returns: fn's result once it ran "
                           "(concurrent.futures.Future's calls).")
      .def(
          "result",
          [](const LaunchHandle& h, py::object timeout) -> py::object {
            if (timeout.is_none()) {
              synchronize_event(h.done);  // raises fn's exception, or the failure that skipped it
            } else if (!timed_wait(
                            timeout, "LaunchHandle.result", [] {},
                            [&](std::chrono::nanoseconds t) { return h.done.wait_for(t); })
                            .cast<bool>()) {
              PyErr_SetString(PyExc_TimeoutError,
                              "LaunchHandle.result: the launched callable has not run yet");
              throw py::error_already_set();
            } else {
              synchronize_event(h.done);  // complete: raises its failure, if any
            }
            if (!h.result->ran) {
              throw Error("LaunchHandle.result: the launched callable did not run");
            }
            return h.result->value.object();
          },
          "timeout"_a = py::none(),
          "Blocks (GIL released) until the callable has run and returns what it returned; raises "
          "its exception (or the failure of earlier work that made the stream skip it). With "
          "timeout (seconds): TimeoutError if it has not run by then.")
      .def(
          "exception",
          [](py::object self, py::object timeout) -> py::object {
            try {
              self.attr("result")(timeout);
            } catch (py::error_already_set& e) {
              if (e.matches(PyExc_TimeoutError)) throw;
              return e.value();
            }
            return py::none();
          },
          "timeout"_a = py::none(),
          "As result(), but returns the exception (None when the callable returned).")
      .def(
          "done", [](const LaunchHandle& h) { return h.done.query(); },
          "True when the callable has run (or was skipped). Never blocks.")
      .def_property_readonly(
          "event", [](const LaunchHandle& h) { return h.done; },
          "The streamrt.Event recorded right after the callable: other streams can wait on it.")
      .def("__repr__", [](const LaunchHandle& h) {
        return std::string("streamrt.LaunchHandle(") + (h.done.query() ? "done" : "pending") + ")";
      });

  m.def(
      "wait_all",
      [](py::iterable events, py::object timeout) {
        std::vector<Event> list;
        std::size_t i = 0;
        for (py::handle item : events) {
          if (!py::isinstance<Event>(item)) {
            throw py::type_error("wait_all: item " + std::to_string(i) + " is " + type_name(item) +
                                 ", not a streamrt.Event");
          }
          list.push_back(item.cast<Event>());
          ++i;
        }
        return timed_wait(
            timeout, "wait_all", [&] { wait_all_events(list); },
            [&](std::chrono::nanoseconds t) { return wait_all_for(list, t); });
      },
      "events"_a, "timeout"_a = py::none(),
      "Blocks (GIL released) until every event has completed; re-raises the first failure in "
      "the order given. streamrt.Error, before waiting, if one was never recorded. With timeout "
      "(seconds): returns False if not all completed by then (without raising), True when they "
      "have.");
}

}  // namespace streamrt::python
