// Python objects on streamrt's threads: deferred reference drops, the interpreter gate and the
// exit sequence. See py_runtime.hpp for the rules.
#include "py_runtime.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <new>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "py_exception.hpp"
#include "streamrt/device.hpp"
#include "streamrt/error.hpp"
#include "streamrt/impl/hooks.hpp"

namespace streamrt::python {
namespace {

// The gate. One mutex guards the counts; it is a leaf lock (nothing else is taken under it, and
// Python code never runs under it), so holding it never waits for the GIL. Reference drops
// without the GIL never take it (they happen under stream locks, and the fork handlers take this
// mutex before the CPU backend's take the stream locks).
struct Gate {
  std::mutex mutex;
  std::condition_variable idle;  // active == 0, or pending == 0
  int active = 0;                // threads inside PythonScope
  bool closed = false;           // set once at exit; never cleared
  bool exiting = false;          // exit began: no more Python work may be queued
  long pending = 0;              // PendingPythonWork alive, made in this process
  unsigned generation = 0;       // bumped in a fork child: the parent's counts are not its own
};

Gate& gate() {
  static Gate* g = new Gate;  // leaked: used by threads and destructors during process exit
  return *g;
}

// A release requested without the GIL (a reference drop, a DLPack deleter), not yet run: a node
// of a lock-free stack, run by the next thread that holds the GIL.
struct Deferred {
  void (*fn)(void*);
  void* arg;
  Deferred* next;
};

// Readable without the mutex by python_closed(); written under it.
std::atomic<bool> g_closed{false};
std::atomic<Deferred*> g_deferred{nullptr};
std::atomic<bool> g_drain_scheduled{false};  // a Py_AddPendingCall for drain() is outstanding
// Threads inside call_with_gil: exit closes the gate only once none is left (see there).
std::atomic<int> g_in_call{0};
// Set in a child of fork() by the runtime's child handler, cleared by the interpreter's
// after_in_child hook (release_after_fork_in_child). In between, the child drops the parent's
// pending work (CpuBackend::after_fork_in_child), whose Python references must not be released
// yet: the forking thread holds the GIL, but a parent thread that was waiting for it left a
// hand-over request, and a release that lets the GIL go (torch's tensor dealloc does) would wait
// for ever for that thread to take it. Python clears that state only after the fork handlers.
// Relaxed: the child is single-threaded until the hook runs.
std::atomic<bool> g_fork_child_holding{false};

// With the GIL held: runs the releases other threads deferred, oldest first.
void release_deferred() {
  if (g_closed.load(std::memory_order_acquire)) return;
  // Acquire: pairs with the pushes' release, so each node's fields are visible.
  Deferred* list = g_deferred.exchange(nullptr, std::memory_order_acquire);
  Deferred* fifo = nullptr;
  while (list != nullptr) {
    Deferred* next = list->next;
    list->next = fifo;
    fifo = list;
    list = next;
  }
  while (fifo != nullptr) {
    Deferred* next = fifo->next;
    fifo->fn(fifo->arg);  // may run __del__: no lock of ours is held
    delete fifo;
    fifo = next;
  }
}

// Runs on the main thread with the GIL, from the interpreter's pending-call hook.
int drain(void*) {
  // Relaxed: a drop pushed after this store schedules another call, a harmless extra one.
  g_drain_scheduled.store(false, std::memory_order_relaxed);
  release_deferred();
  return 0;
}

// With the GIL held: release what other threads dropped (cheap when there is nothing).
void drain_if_any() {
  // Relaxed: a hint; a drop missed here is run by the scheduled pending call.
  if (g_deferred.load(std::memory_order_relaxed) != nullptr) release_deferred();
}

// Pushes a release for a later holder of the GIL; false when out of memory (then leaked).
bool push_deferred(void (*fn)(void*), void* arg) noexcept {
  auto* node = new (std::nothrow) Deferred{fn, arg, nullptr};
  if (node == nullptr) return false;  // out of memory: leaked, never dropped unsafely
  node->next = g_deferred.load(std::memory_order_relaxed);
  // Release: publishes the node's fields to the acquire exchange in release_deferred().
  while (!g_deferred.compare_exchange_weak(node->next, node, std::memory_order_release,
                                           std::memory_order_relaxed)) {
  }
  return true;
}

void defer(void (*fn)(void*), void* arg) noexcept {
  if (!push_deferred(fn, arg)) return;
  // acq_rel: one thread wins the right to schedule; a failed Py_AddPendingCall (its queue is
  // full) gives it back, and the next PythonScope drains instead.
  if (!g_drain_scheduled.exchange(true, std::memory_order_acq_rel) &&
      Py_AddPendingCall(drain, nullptr) != 0) {
    g_drain_scheduled.store(false, std::memory_order_relaxed);
  }
}

// fork(): the parent's threads do not exist in the child, so whatever they held or counted must
// not stay held or counted there. The prepare handler takes the mutex (so no other thread holds
// it at the fork), the child resets the counts of threads and work that are gone. They run inside
// the runtime's own handlers (impl::add_fork_handlers): the mutex after the stream locks, since a
// reference drop under a stream lock may take it, and the child's reset before the runtime drops
// the parent's work there (which counts down pending work, under this mutex).
void lock_for_fork() {
  gate().mutex.lock();
}
void unlock_in_parent() {
  gate().mutex.unlock();
}
void reset_in_child() {
  Gate& g = gate();
  g.active = 0;
  g.pending = 0;
  ++g.generation;
  g.mutex.unlock();
  g_in_call.store(0, std::memory_order_relaxed);  // single-threaded here
  g_drain_scheduled.store(false, std::memory_order_relaxed);
  g_fork_child_holding.store(true, std::memory_order_relaxed);  // see its declaration
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

// PythonScopes open on this thread: Python work or a callback the runtime runs here.
constinit thread_local int tls_scope_depth = 0;

}  // namespace

bool python_closed() noexcept {
  return g_closed.load(std::memory_order_acquire);
}

void call_with_gil(void (*fn)(void*), void* arg) noexcept {
  // seq_cst here and in shutdown_at_exit (store of g_closed, then load of g_in_call): either the
  // exit sees this thread counted and waits for it, or this thread sees the gate closed.
  g_in_call.fetch_add(1, std::memory_order_seq_cst);
  if (g_closed.load(std::memory_order_seq_cst)) {
    // The interpreter is finalizing or gone, so Python may not be touched: leaked.
  } else if (g_fork_child_holding.load(std::memory_order_relaxed)) {
    // A fork child before the interpreter's after-fork clean-up: held back, no pending call
    // (its lock may be one a parent thread held at the fork).
    (void)push_deferred(fn, arg);
  } else if (PyGILState_Check() != 0) {
    // Before the gate closes PyGILState_Check is reliable, and with the GIL held the interpreter
    // cannot finalize under us: running at once is safe.
    fn(arg);
  } else {
    defer(fn, arg);
  }
  // Release: the exit's wait for zero sees everything this call did.
  g_in_call.fetch_sub(1, std::memory_order_release);
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
    ++tls_scope_depth;
    drain_if_any();
  }
}

PythonScope::~PythonScope() {
  if (!entered_) return;
  --tls_scope_depth;
  PyGILState_Release(state_);
  std::lock_guard lock(gate().mutex);
  if (--gate().active == 0) gate().idle.notify_all();
}

PendingPythonWork::PendingPythonWork() noexcept {
  std::lock_guard lock(gate().mutex);
  ++gate().pending;
  generation_ = gate().generation;
}

PendingPythonWork::~PendingPythonWork() {
  if (!counted_) return;
  std::lock_guard lock(gate().mutex);
  // Work of the parent, dropped in a fork child: the child's count never included it.
  if (generation_ != gate().generation) return;
  if (--gate().pending == 0) gate().idle.notify_all();
}

void refuse_python_work_at_exit(const char* what) {
  // Work and callbacks the runtime runs during exit may queue more (a chain of stages): exit
  // waits for it. Other threads (daemon threads) could keep it waiting for ever.
  if (tls_scope_depth > 0) return;
  std::lock_guard lock(gate().mutex);
  if (gate().exiting) {
    // RuntimeError, as for an interpreter that is shutting down.
    throw std::runtime_error(
        std::string(what) +
        ": the interpreter is exiting, so Python work can no longer be "
        "queued on streams (is a daemon thread still launching work? join it before the "
        "program ends)");
  }
}

void release_after_fork_in_child() {
  g_fork_child_holding.store(false, std::memory_order_relaxed);  // see its declaration
  release_deferred();
}

void install_fork_handlers() {
  static const bool installed =
      (impl::add_fork_handlers(lock_for_fork, unlock_in_parent, reset_in_child), true);
  (void)installed;
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

// The label of a failure's Python exception ("ZeroDivisionError: division by zero"): exit
// prints the traceback of the first failure with a label and counts the others.
std::string label_of(const py::object& exc) {
  std::string label = py::str(py::type::handle_of(exc).attr("__name__"));
  if (const std::string text = py::str(exc); !text.empty()) label += ": " + text;
  return label;
}

// Prints a failure nobody synchronized on, at exit, with its Python traceback when it has one.
void report_at_exit(const py::object& exc) {
  py::module_ sys = py::module_::import("sys");
  py::module_ traceback = py::module_::import("traceback");
  py::object err = sys.attr("stderr");
  err.attr("write")("streamrt: at exit, a failure in stream work that was never synchronized:\n");
  traceback.attr("print_exception")(exc, py::arg("file") = err);
}

// The failures exit reported, by label, in the order first seen. Many streams failing the same
// way (the same function launched on each) print one traceback and a count, not one each.
class ExitReports {
 public:
  // Reports the failure `e`: its traceback the first time its label comes, a count after that.
  void add(const std::exception_ptr& e) {
    py::object exc = exception_object(e);
    const std::string label = label_of(exc);
    for (auto& [seen, count] : counts_) {
      if (seen == label) {
        ++count;
        return;
      }
    }
    counts_.emplace_back(label, 1);
    report_at_exit(exc);
  }

  // One line per label that came more than once: "ZeroDivisionError: division by zero x2".
  void print_repeats() const {
    py::object err = py::module_::import("sys").attr("stderr");
    for (const auto& [label, count] : counts_) {
      if (count < 2) continue;
      err.attr("write")("streamrt: at exit, " + label + " x" + std::to_string(count) +
                        " (failures of stream work never synchronized; the first one's "
                        "traceback is above)\n");
    }
  }

 private:
  std::vector<std::pair<std::string, int>> counts_;
};

}  // namespace

namespace {

// How exit's wait went (shutdown_at_exit).
constexpr const char* kDone = "done";
constexpr const char* kInterrupted = "interrupted";
constexpr const char* kTimedOut = "timed out";

// Short enough that Ctrl-C at exit feels immediate; waits in between cost nothing.
constexpr auto kExitSlice = std::chrono::milliseconds(50);
// After this long, exit says what it waits for and how to leave.
constexpr auto kExitNotice = std::chrono::seconds(10);

void print_exit_notice(long pending) {
  std::fprintf(stderr,
               "streamrt: exit is waiting for stream work still queued or running (%ld Python "
               "callables among it). Press Ctrl-C to leave without it, or set "
               "STREAMRT_EXIT_TIMEOUT (seconds) to bound the wait (docs/reliability.md, "
               "\"Exit\").\n",
               pending);
  std::fflush(stderr);
}

// Waits, the GIL released in slices, until no Python work is pending and every CPU stream is
// idle. Between slices, with the GIL: runs deferred drops and the signal handlers (Ctrl-C ends
// the wait: kInterrupted), checks `timeout` (kTimedOut). A failure of stream work is thrown for
// the caller to report.
const char* wait_idle_at_exit(std::optional<std::chrono::nanoseconds> timeout,
                              std::chrono::steady_clock::time_point start, bool& noticed) {
  Gate& g = gate();
  for (;;) {
    bool idle = false;
    long pending = 0;
    {
      py::gil_scoped_release release;
      std::unique_lock lock(g.mutex);
      const bool no_python = g.idle.wait_for(lock, kExitSlice, [&] { return g.pending == 0; });
      pending = g.pending;
      lock.unlock();
      if (no_python) idle = streamrt::synchronize_for(kExitSlice, Device{});
    }
    if (idle) return kDone;
    drain_if_any();
    const auto waited = std::chrono::steady_clock::now() - start;
    if (timeout && waited >= *timeout) return kTimedOut;
    if (!noticed && waited >= kExitNotice) {
      print_exit_notice(pending);
      noticed = true;
    }
    if (PyErr_CheckSignals() != 0) {
      PyErr_Clear();  // the KeyboardInterrupt is the user's answer: leave
      return kInterrupted;
    }
  }
}

// Prints the counts of repeated failures; a failure to print is dropped (exit goes on).
void print_repeats_of(const ExitReports& reported) {
  try {
    reported.print_repeats();
  } catch (const py::error_already_set&) {
    PyErr_Clear();
  }
}

}  // namespace

const char* shutdown_at_exit(std::optional<std::chrono::nanoseconds> timeout) {
  Gate& g = gate();
  if (g_closed.load(std::memory_order_acquire)) return kDone;
  {
    std::lock_guard lock(g.mutex);
    g.exiting = true;  // from now on Python work is refused (refuse_python_work_at_exit)
  }
  // Each round: let every pending Python callable and callback run and all CPU stream work
  // finish, then report one failure nobody synchronized on. A callback may queue more work,
  // hence the loop; it ends when a round finds nothing, or on Ctrl-C or the time-out. Every
  // failure is reported, also one with the same text as the one before (the same function
  // failing on several streams); only a refusal that every synchronize repeats (a capture left
  // open from C++) would come back for ever, hence the bound.
  constexpr int kMaxReports = 1000;
  int reports = 0;
  bool noticed = false;
  ExitReports reported;
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    drain_if_any();
    std::exception_ptr failure;
    try {
      const char* how = wait_idle_at_exit(timeout, start, noticed);
      if (how != kDone) {
        print_repeats_of(reported);
        return how;  // the gate stays open: the caller ends the process
      }
      py::gil_scoped_release release;
      streamrt::synchronize(Device{});  // idle: reports a failure, if one is left
    } catch (py::error_already_set&) {
      throw;
    } catch (...) {
      failure = std::current_exception();
    }
    if (failure) {
      if (++reports > kMaxReports) {
        std::fprintf(stderr,
                     "streamrt: at exit, stopped reporting after %d failures: the device still "
                     "reports one at every synchronize (a refusal such as a capture left open, "
                     "rather than failed work)\n",
                     kMaxReports);
        break;  // never a busy loop
      }
      try {
        reported.add(failure);
      } catch (const py::error_already_set&) {
        PyErr_Clear();
      }
      continue;  // one failure per synchronize(): look for more
    }
    std::lock_guard lock(g.mutex);
    if (g.pending == 0) break;
  }
  print_repeats_of(reported);
  drain_if_any();
  py::gil_scoped_release release;
  {
    std::unique_lock lock(g.mutex);
    g.closed = true;
    // seq_cst: see call_with_gil.
    g_closed.store(true, std::memory_order_seq_cst);
    // Threads already inside a PythonScope finish first (they hold or wait for the GIL we gave
    // up).
    g.idle.wait(lock, [&] { return g.active == 0; });
  }
  // And those inside call_with_gil, which decided before the gate closed (a few instructions).
  while (g_in_call.load(std::memory_order_seq_cst) != 0) std::this_thread::yield();
  return kDone;
}

}  // namespace streamrt::python
