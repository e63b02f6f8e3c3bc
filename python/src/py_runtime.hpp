#pragma once
//! \file py_runtime.hpp
//! How Python objects live on streamrt's threads: references that any thread may drop, the gate
//! that lets worker threads take the GIL only while the interpreter is alive, and the shutdown
//! done at interpreter exit. Python exceptions carried through the C++ runtime are in
//! py_exception.hpp.
//!
//! Rules that keep this deadlock-free: a thread never waits for the GIL while it holds a runtime
//! lock (work, callbacks and destructors run outside them), and code that waits for C++ work
//! releases the GIL first (that work may need it).

#include <pybind11/pybind11.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <utility>

namespace streamrt::python {

namespace py = pybind11;

//! A strong reference to a Python object that may be dropped on any thread, with or without the
//! GIL: with it the reference goes at once, without it the drop is handed to the interpreter
//! (Py_AddPendingCall) so no thread ever blocks on the GIL in a destructor. Once the interpreter
//! is shutting down, references are leaked instead (touching Python then is undefined).
//! Move-only; not thread-safe (one owner at a time).
class SafeObject {
 public:
  //! Empty. Never blocks.
  SafeObject() noexcept = default;
  //! Takes over `o`'s reference. Requires the GIL.
  explicit SafeObject(py::object o) noexcept : ptr_(o.release().ptr()) {}
  //! Moves the reference.
  SafeObject(SafeObject&& other) noexcept : ptr_(std::exchange(other.ptr_, nullptr)) {}
  //! Drops ours, takes `other`'s.
  SafeObject& operator=(SafeObject&& other) noexcept {
    if (this != &other) {
      reset();
      ptr_ = std::exchange(other.ptr_, nullptr);
    }
    return *this;
  }
  SafeObject(const SafeObject&) = delete;
  SafeObject& operator=(const SafeObject&) = delete;
  //! Drops the reference (see the class comment). Never blocks on the GIL.
  ~SafeObject() { reset(); }

  //! Drops the reference now (see the class comment). Never blocks on the GIL.
  void reset() noexcept;
  //! The object, borrowed. Never blocks.
  py::handle get() const noexcept { return ptr_; }
  //! A new reference to the object. Requires the GIL.
  py::object object() const { return py::reinterpret_borrow<py::object>(ptr_); }
  //! True when a reference is held.
  explicit operator bool() const noexcept { return ptr_ != nullptr; }

 private:
  PyObject* ptr_ = nullptr;
};

//! Runs `fn(arg)` with the GIL held: at once when this thread holds it, else later on the main
//! thread (Py_AddPendingCall) or the next thread that enters Python through streamrt. Never
//! blocks on the GIL, so it is safe in destructors and on worker threads. After the interpreter
//! started shutting down it never runs (what `arg` owns is leaked). In a child of fork(), until
//! release_after_fork_in_child(), it is held back (the parent's dropped work is destroyed while
//! the interpreter's GIL may still await a hand-over to a thread that is gone). Thread-safe.
void call_with_gil(void (*fn)(void*), void* arg) noexcept;

//! Holds the GIL for a scope on any thread (worker or not; nests), unless the interpreter has
//! started shutting down, in which case it holds nothing and ok() is false. Blocks until the GIL is
//! free. Never take it while holding a lock another thread may need in order to release the GIL.
class PythonScope {
 public:
  //! Takes the GIL when the interpreter is still open for streamrt's threads.
  PythonScope() noexcept;
  //! Gives the GIL back.
  ~PythonScope();
  PythonScope(const PythonScope&) = delete;
  PythonScope& operator=(const PythonScope&) = delete;
  //! True when the GIL is held (the interpreter was open).
  bool ok() const noexcept { return entered_; }

 private:
  bool entered_;
  PyGILState_STATE state_{};
};

//! Counts one unit of Python work still to run (a launched callable, a completion callback) for
//! as long as it lives; interpreter exit waits until none is left. Move-only. Never blocks.
class PendingPythonWork {
 public:
  //! Counts one more.
  PendingPythonWork() noexcept;
  //! Counts one less, if this one still counts.
  ~PendingPythonWork();
  //! Transfers the count.
  PendingPythonWork(PendingPythonWork&& other) noexcept
      : counted_(std::exchange(other.counted_, false)), generation_(other.generation_) {}
  PendingPythonWork& operator=(PendingPythonWork&&) = delete;
  PendingPythonWork(const PendingPythonWork&) = delete;
  PendingPythonWork& operator=(const PendingPythonWork&) = delete;

 private:
  bool counted_ = true;
  unsigned generation_ = 0;  // the process's fork generation when counted
};

//! Raises RuntimeError naming `what` once interpreter exit has begun, unless the calling thread is
//! running Python work or a callback for the runtime (a chain of stages, which exit waits for):
//! work queued by other threads after that (a daemon thread launching in a loop) could keep exit
//! waiting for ever. Requires the GIL.
void refuse_python_work_at_exit(const char* what);

//! Adds the fork handlers that keep the gate usable in a child of fork() to the runtime's own
//! (impl::add_fork_handlers): they take its lock before the fork (so no thread of the parent holds
//! it there) and, in the child, forget the parent's threads and pending work. Once per process;
//! at module import. Never blocks.
void install_fork_handlers();

//! Runs, with the GIL, the releases held back in a child of fork() since the fork (see
//! call_with_gil), and lets later ones run at once again. Called from os.register_at_fork's
//! after_in_child hook, once the interpreter has made its locks usable in the child. Requires the
//! GIL.
void release_after_fork_in_child();

//! A stable C string naming callable `fn` for the profiler ("module.qualname"); interned for the
//! life of the process (at most a few thousand names, then "python"). Requires the GIL.
const char* callable_label(py::handle fn);

//! Interpreter exit, called by the package's atexit handler with the GIL held. From now on
//! Python work is refused (daemon threads); it waits, the GIL released in slices, until every
//! pending Python work has run and all CPU streams are idle, reporting failures nobody
//! synchronized on (Python tracebacks included, never the same one twice in a row), then closes the
//! gate so streamrt's threads never touch Python again, and returns "done". Ctrl-C during the wait
//! returns "interrupted", and the wait passing `timeout` returns "timed out": the gate stays open
//! then, and the caller ends the process without the rest (docs/reliability.md, "Exit"). A second
//! call after "done" returns "done" at once. Never a busy loop.
const char* shutdown_at_exit(std::optional<std::chrono::nanoseconds> timeout);

//! True once shutdown_at_exit() has closed the gate. Never blocks.
bool python_closed() noexcept;

}  // namespace streamrt::python
