// Python objects on streamrt's threads: deferred reference drops, the interpreter gate, carried
// exceptions and the exit sequence. See py_runtime.hpp for the rules.
#include "py_runtime.hpp"

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <regex>
#include <set>
#include <vector>

#include "streamrt/device.hpp"
#include "streamrt/error.hpp"

namespace streamrt::python {
namespace {

// The gate. One mutex guards everything here; it is a leaf lock (nothing else is taken under
// it, and Python code never runs under it), so holding it never waits for the GIL.
struct Gate {
  std::mutex mutex;
  std::condition_variable idle;  // active == 0, or pending == 0
  int active = 0;                // threads inside PythonScope
  bool closed = false;           // set once at exit; never cleared
  // Releases requested without the GIL (a reference drop, a DLPack deleter), not yet run.
  std::vector<std::pair<void (*)(void*), void*>> deferred;
  bool drain_scheduled = false;  // a Py_AddPendingCall for drain() is outstanding
  long pending = 0;              // PendingPythonWork alive
};

Gate& gate() {
  static Gate* g = new Gate;  // leaked: used by threads and destructors during process exit
  return *g;
}

// Readable without the mutex by python_closed(); written under it.
std::atomic<bool> g_closed{false};
std::atomic<bool> g_have_deferred{false};

void release_deferred_locked(std::unique_lock<std::mutex>& lock) {
  std::vector<std::pair<void (*)(void*), void*>> items;
  items.swap(gate().deferred);
  g_have_deferred.store(false, std::memory_order_relaxed);
  lock.unlock();
  for (auto [fn, arg] : items) fn(arg);  // may run __del__: never under our lock
  lock.lock();
}

// Runs on the main thread with the GIL, from the interpreter's pending-call hook.
int drain(void*) {
  std::unique_lock lock(gate().mutex);
  gate().drain_scheduled = false;
  if (!gate().closed) release_deferred_locked(lock);
  return 0;
}

// With the GIL held: release what other threads dropped (cheap when there is nothing).
void drain_if_any() {
  if (!g_have_deferred.load(std::memory_order_relaxed)) return;
  std::unique_lock lock(gate().mutex);
  if (!gate().closed) release_deferred_locked(lock);
}

// A streamrt thread keeps the Python thread state of its first PythonScope until it exits:
// making and deleting one per callable costs the interpreter's frame-stack allocation (an mmap
// and a munmap) every time, which dominated a no-op launch. The kept count is one extra
// PyGILState_Ensure that is never matched while the thread lives.
struct KeptThreadState {
  bool kept = false;

  ~KeptThreadState() {
    if (!kept) return;
    {
      std::lock_guard lock(gate().mutex);
      if (gate().closed) return;  // finalization deletes every thread state itself
      ++gate().active;            // holds exit back while the state is deleted
    }
    const PyGILState_STATE state = PyGILState_Ensure();  // count 2, GIL taken
    PyGILState_Release(PyGILState_LOCKED);               // count 1, GIL kept
    PyGILState_Release(state);                           // count 0: deleted, GIL given back
    std::lock_guard lock(gate().mutex);
    if (--gate().active == 0) gate().idle.notify_all();
  }
};

thread_local KeptThreadState tls_kept_state;

}  // namespace

void attach_traceback(const py::error_already_set& e) {
  if (!e.trace()) return;
  PyObject* tb = PyException_GetTraceback(e.value().ptr());  // new reference or null
  if (tb == nullptr) {
    PyException_SetTraceback(e.value().ptr(), e.trace().ptr());
  } else {
    Py_DECREF(tb);
  }
}

bool python_closed() noexcept {
  return g_closed.load(std::memory_order_acquire);
}

void call_with_gil(void (*fn)(void*), void* arg) noexcept {
  Gate& g = gate();
  std::unique_lock lock(g.mutex);
  // Closed: the interpreter is finalizing or gone, so Python may not be touched. Leak.
  if (g.closed) return;
  // Before the gate closes, PyGILState_Check is reliable; with the GIL held the interpreter
  // cannot finalize under us, so running at once is safe.
  if (PyGILState_Check() != 0) {
    lock.unlock();
    fn(arg);
    return;
  }
  g.deferred.emplace_back(fn, arg);
  g_have_deferred.store(true, std::memory_order_relaxed);
  if (!g.drain_scheduled && Py_AddPendingCall(drain, nullptr) == 0) g.drain_scheduled = true;
  // When the interpreter's pending-call queue is full, the next PythonScope drains instead.
}

void SafeObject::reset() noexcept {
  if (ptr_ == nullptr) return;
  call_with_gil([](void* p) { Py_DECREF(static_cast<PyObject*>(p)); },
                std::exchange(ptr_, nullptr));
}

PythonScope::PythonScope() noexcept {
  {
    std::lock_guard lock(gate().mutex);
    entered_ = !gate().closed;
    if (entered_) ++gate().active;
  }
  if (entered_) {
    const bool fresh = !tls_kept_state.kept && PyGILState_GetThisThreadState() == nullptr;
    state_ = PyGILState_Ensure();
    if (fresh) {
      PyGILState_Ensure();  // the kept count: the matching Release never deletes the state
      tls_kept_state.kept = true;
    }
    drain_if_any();
  }
}

PythonScope::~PythonScope() {
  if (!entered_) return;
  PyGILState_Release(state_);
  std::lock_guard lock(gate().mutex);
  if (--gate().active == 0) gate().idle.notify_all();
}

PendingPythonWork::PendingPythonWork() noexcept {
  std::lock_guard lock(gate().mutex);
  ++gate().pending;
}

PendingPythonWork::~PendingPythonWork() {
  if (!counted_) return;
  std::lock_guard lock(gate().mutex);
  if (--gate().pending == 0) gate().idle.notify_all();
}

PythonException::PythonException(const py::error_already_set& e, std::string where)
    : value_(std::make_shared<SafeObject>(e.value())), where_(std::move(where)) {
  attach_traceback(e);
  PyObject* tb = PyException_GetTraceback(e.value().ptr());  // new reference or null
  if (tb != nullptr) {
    traceback_ = std::make_shared<SafeObject>(py::reinterpret_steal<py::object>(tb));
  }
  try {
    message_ = std::string(py::str(py::type::handle_of(e.value()).attr("__name__")));
    const std::string text = py::str(e.value());
    if (!text.empty()) message_ += ": " + text;
  } catch (const py::error_already_set&) {
    message_ = "a Python exception (its str() failed)";
  }
}

namespace {

// A new exception of the same type as `original`, with the same args and attributes, or null
// when the type cannot be made that way (then the original is raised again). Requires the GIL.
py::object fresh_copy(const py::object& original) {
  try {
    py::handle cls = py::type::handle_of(original);
    py::object fresh = cls.attr("__new__")(cls);
    fresh.attr("args") = original.attr("args");
    if (py::hasattr(original, "__dict__") && py::hasattr(fresh, "__dict__")) {
      fresh.attr("__dict__").attr("update")(original.attr("__dict__"));
    }
    if (PyExceptionInstance_Check(fresh.ptr()) == 0) return py::object();
    return fresh;
  } catch (const py::error_already_set&) {
    return py::object();
  }
}

}  // namespace

void PythonException::restore() const {
  py::object value = value_->object();
  // The traceback of the raise on the worker only: a raise through the caller's frames appends
  // them to the traceback it starts from, so starting from the captured one never accumulates.
  PyException_SetTraceback(value.ptr(), traceback_ ? traceback_->get().ptr() : Py_None);
  py::object raised = value;
  if (raises_->fetch_add(1, std::memory_order_relaxed) > 0) {
    try {
      if (py::object fresh = fresh_copy(value)) {
        const std::string note =
            "streamrt: raised again. This failure of work on " +
            (where_.empty() ? std::string("a stream") : where_) +
            " was already raised by an earlier wait (the exception above). The work that "
            "depended on it was skipped, so its results are not valid: submit that work again; "
            "work submitted after the earlier wait runs normally.";
        if (py::hasattr(fresh, "add_note")) fresh.attr("add_note")(note);
        PyException_SetCause(fresh.ptr(), value.inc_ref().ptr());  // steals the reference
        raised = fresh;
      }
    } catch (const py::error_already_set&) {
      raised = value;  // the note could not be added: raise the original, as raised
    }
  }
  py::object type = py::reinterpret_borrow<py::object>(py::type::handle_of(raised));
  PyObject* tb = raised.is(value) ? PyException_GetTraceback(value.ptr()) : nullptr;
  PyErr_Restore(type.release().ptr(), raised.release().ptr(), tb);
}

py::object exception_object(const std::exception_ptr& e) {
  if (!e) return py::none();
  try {
    std::rethrow_exception(e);
  } catch (const PythonException& pe) {
    return pe.value();  // the original object: handing it to a callback is no raise
  } catch (...) {
  }
  // Let pybind11 translate it exactly as if a bound function had thrown it (registered
  // translators included): call a tiny bound function that rethrows, and catch the result.
  py::cpp_function thrower([e]() { std::rethrow_exception(e); });
  try {
    thrower();
  } catch (const py::error_already_set& err) {
    attach_traceback(err);
    return err.value();
  }
  return py::none();  // unreachable: the thrower always throws
}

std::string python_spelling(std::string message) {
  // Whole phrases first, then the general "Class::member" and "DType::Name" forms.
  static const std::pair<std::regex, const char*> kRules[] = {
      {std::regex(R"(EventOptions\{\s*\.enable_timing\s*=\s*true\s*\})"),
       "Event(enable_timing=True)"},
      {std::regex(R"(enable_timing\s*=\s*true)"), "enable_timing=True"},
      {std::regex(R"(Device\{\} or Device::parse\("cpu"\))"), "\"cpu\""},
      {std::regex(R"(Device\{DeviceType::CPU\})"), "\"cpu\""},
      {std::regex(R"(Device::parse\(("[^"]*")\))"), "$1"},
      {std::regex(R"(DType::Float32)"), "streamrt.float32"},
      {std::regex(R"(DType::Float64)"), "streamrt.float64"},
      {std::regex(R"(DType::Int32)"), "streamrt.int32"},
      {std::regex(R"(DType::Int64)"), "streamrt.int64"},
      // Graph capture: the C++ calls' names, as the Python calls that make them.
      {std::regex(R"(\bend_capture throws\b)"),
       "Graph.capture_end(), or the end of the streamrt.graph block, raises"},
      {std::regex(R"(\bbegin_capture\b)"), "Graph.capture_begin"},
      {std::regex(R"(\bend_capture\b)"), "Graph.capture_end"},
      {std::regex(R"(\bexec\.launch\(\))"), "Graph.replay()"},
      {std::regex(R"(\bGraph::instantiate\b)"), "Graph.capture_end"},
      {std::regex(R"(\bGraph::clear\b)"), "Graph.reset"},
      {std::regex(R"(\bGraphExec::launch\b)"), "Graph.replay"},
      {std::regex(R"(\bGraphExec::(\w+))"), "Graph.$1"},
      {std::regex(R"(streamrt::(\w+))"), "streamrt.$1"},
      {std::regex(R"(\b(Stream|Event|Tensor|Profiler|Generator|Device)::(\w+))"), "$1.$2"},
  };
  for (const auto& [pattern, replacement] : kRules) {
    message = std::regex_replace(message, pattern, replacement);
  }
  return message;
}

const char* callable_label(py::handle fn) {
  static std::mutex mutex;
  static auto* names = new std::set<std::string>;  // leaked: labels outlive queued work
  constexpr std::size_t kMaxNames = 4096;
  std::string name;
  try {
    py::object qual = py::getattr(fn, "__qualname__", py::none());
    if (qual.is_none()) qual = py::getattr(py::type::handle_of(fn), "__qualname__", py::none());
    name = qual.is_none() ? std::string("python") : std::string(py::str(qual));
  } catch (const py::error_already_set&) {
    name = "python";
  }
  std::lock_guard lock(mutex);
  auto it = names->find(name);
  if (it == names->end()) {
    if (names->size() >= kMaxNames) return "python";
    it = names->insert(std::move(name)).first;
  }
  return it->c_str();
}

namespace {

// Prints a failure nobody synchronized on, at exit, with its Python traceback when it has one.
void report_at_exit(const std::exception_ptr& e) {
  py::object exc = exception_object(e);
  py::module_ sys = py::module_::import("sys");
  py::module_ traceback = py::module_::import("traceback");
  py::object err = sys.attr("stderr");
  err.attr("write")("streamrt: at exit, a failure in stream work that was never synchronized:\n");
  traceback.attr("print_exception")(exc, py::arg("file") = err);
}

}  // namespace

void shutdown_at_exit() {
  Gate& g = gate();
  if (g_closed.load(std::memory_order_acquire)) return;
  // Each round: let every pending Python callable and callback run (they need the GIL, so it is
  // released), then finish all CPU stream work. A callback may queue more, hence the loop.
  constexpr int kMaxReports = 100;
  int reports = 0;
  for (;;) {
    drain_if_any();
    std::exception_ptr failure;
    {
      py::gil_scoped_release release;
      {
        std::unique_lock lock(g.mutex);
        g.idle.wait(lock, [&] { return g.pending == 0; });
      }
      try {
        streamrt::synchronize(Device{});
      } catch (...) {
        failure = std::current_exception();
      }
    }
    if (failure) {
      if (++reports <= kMaxReports) {
        try {
          report_at_exit(failure);
        } catch (const py::error_already_set& e) {
          PyErr_Clear();
        }
      }
      continue;  // one failure per synchronize(): look for more
    }
    std::lock_guard lock(g.mutex);
    if (g.pending == 0) break;
  }
  drain_if_any();
  py::gil_scoped_release release;
  std::unique_lock lock(g.mutex);
  g.closed = true;
  g_closed.store(true, std::memory_order_release);
  // Threads already inside a PythonScope finish first (they hold or wait for the GIL we gave up).
  g.idle.wait(lock, [&] { return g.active == 0; });
}

}  // namespace streamrt::python
