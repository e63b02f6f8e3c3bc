// The user's source line behind a launch from Python, and launch-blocking waits
// (launch_origin.hpp).
#include "launch_origin.hpp"

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "py_exception.hpp"
#include "py_runtime.hpp"
#include "streamrt/impl/launch_site.hpp"

// CPython 3.11 keeps a thread's frames as _PyInterpreterFrame records that only that thread
// changes: while it is in a C call (torch releases the GIL around its kernels' dispatch, where
// the fast path enqueues) they stand still and can be read without the GIL, and without making
// a frame object. Other versions go through the public API, with the GIL only.
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
#define Py_BUILD_CORE 1
#include <internal/pycore_frame.h>
#undef Py_BUILD_CORE
#define STREAMRT_RAW_FRAMES 1
#endif

namespace streamrt::python {
namespace {

// Frames looked at before giving up (a launch deep inside skipped code names no line).
constexpr int kMaxFrames = 64;

// Whether launches look for their origin (_set_launch_origins: benchmarks compare the cost).
// Relaxed: a switch read at every launch; it publishes nothing.
std::atomic<bool> g_origins_on{true};

// Origins are interned for ever: a program has as many as it has launching lines.
std::mutex g_origins_mutex;
std::unordered_set<std::string>& origins() {
  static auto* set = new std::unordered_set<std::string>();  // leaked: used until exit
  return *set;
}

// The skipped prefixes: an immutable list replaced as a whole (copy on write); old lists are kept
// (readers may still look at them). Acquire/release: a reader sees a complete list.
std::mutex g_skip_mutex;
std::atomic<const std::vector<std::string>*> g_skip{nullptr};

std::string_view text_of(PyObject* s) noexcept {
  if (s == nullptr || !PyUnicode_Check(s) || !PyUnicode_IS_READY(s)) return {};
  if (PyUnicode_IS_COMPACT_ASCII(s)) {
    return {static_cast<const char*>(PyUnicode_DATA(s)),
            static_cast<std::size_t>(PyUnicode_GET_LENGTH(s))};
  }
  // Not ASCII: its UTF-8 form if Python made it already (making it needs the GIL).
  const auto* compact = reinterpret_cast<const PyCompactUnicodeObject*>(s);
  if (PyUnicode_IS_COMPACT(s) && compact->utf8 != nullptr) {
    return {compact->utf8, static_cast<std::size_t>(compact->utf8_length)};
  }
  return "<a file with a non-ASCII name>";
}

bool skipped(std::string_view file) noexcept {
  const auto* skip = g_skip.load(std::memory_order_acquire);
  if (skip == nullptr) return false;
  for (const std::string& prefix : *skip) {
    if (file.substr(0, prefix.size()) == prefix) return true;
  }
  return false;
}

const char* intern(std::string_view file, int line) noexcept {
  try {
    std::string text(file);
    text += ':';
    text += std::to_string(line);
    std::lock_guard lock(g_origins_mutex);
    return origins().insert(std::move(text)).first->c_str();
  } catch (...) {
    return nullptr;  // out of memory: no origin
  }
}

#ifdef STREAMRT_RAW_FRAMES

// A frame's answer, per code object and instruction: its origin, or null for a skipped file. The
// first line and file name guard against a code object freed and another made at its address.
struct Cached {
  const void* code = nullptr;
  const void* file = nullptr;
  int lasti = -1;
  int first_line = 0;
  const char* origin = nullptr;
};
thread_local std::array<Cached, 64> tls_cache;

const char* origin_of(PyCodeObject* code, int lasti) noexcept {
  const auto h = (reinterpret_cast<std::uintptr_t>(code) >> 4) ^ static_cast<std::uintptr_t>(lasti);
  Cached& c = tls_cache[(h ^ (h >> 7)) % tls_cache.size()];
  if (c.code == code && c.lasti == lasti && c.file == code->co_filename &&
      c.first_line == code->co_firstlineno) {
    return c.origin;
  }
  const std::string_view file = text_of(code->co_filename);
  const char* origin = nullptr;
  if (!skipped(file)) {
    origin = intern(file, PyCode_Addr2Line(code, lasti * static_cast<int>(sizeof(_Py_CODEUNIT))));
    if (origin == nullptr) return nullptr;  // not cached: try again next time
  }
  c = Cached{code, code->co_filename, lasti, code->co_firstlineno, origin};
  return origin;
}

// The innermost frame of this thread outside skipped files: read, never changed.
const char* find_origin() noexcept {
  PyThreadState* ts = PyGILState_GetThisThreadState();
  if (ts == nullptr || ts->cframe == nullptr) return nullptr;
  int n = 0;
  for (_PyInterpreterFrame* f = ts->cframe->current_frame; f != nullptr && n < kMaxFrames;
       f = f->previous, ++n) {
    if (_PyFrame_IsIncomplete(f)) continue;
    if (const char* origin = origin_of(f->f_code, _PyInterpreterFrame_LASTI(f))) return origin;
  }
  return nullptr;
}

#else

const char* find_origin() noexcept {
  if (!PyGILState_Check()) return nullptr;
  PyFrameObject* f = PyEval_GetFrame();  // borrowed
  Py_XINCREF(f);
  const char* origin = nullptr;
  for (int n = 0; f != nullptr && n < kMaxFrames && origin == nullptr; ++n) {
    PyCodeObject* code = PyFrame_GetCode(f);  // new reference
    const std::string_view file = text_of(code->co_filename);
    if (!skipped(file)) origin = intern(file, PyFrame_GetLineNumber(f));
    Py_DECREF(code);
    PyFrameObject* back = PyFrame_GetBack(f);  // new reference or null
    Py_DECREF(f);
    f = back;
  }
  Py_XDECREF(f);
  return origin;
}

#endif

// impl::FailureAnnotator: a note on the Python exception a failed work item carries.
std::exception_ptr add_python_note(const std::exception_ptr& e, const std::string& note) noexcept {
  try {
    std::rethrow_exception(e);
  } catch (const PythonException& pe) {
    PythonScope scope;
    if (!scope.ok()) return e;  // the interpreter is going: the exception stays as it is
    try {
      py::object value = pe.value();
      if (py::hasattr(value, "add_note")) {
        value.attr("add_note")(note);
      } else {  // before Python 3.11: kept where 3.11 keeps notes
        py::list notes =
            py::hasattr(value, "__notes__") ? py::list(value.attr("__notes__")) : py::list();
        notes.append(note);
        value.attr("__notes__") = notes;
      }
    } catch (py::error_already_set& err) {
      err.discard_as_unraisable("streamrt: adding where a failure came from");
    }
  } catch (...) {
  }
  return e;
}

// impl::DeferBlockingHook: a thread that runs Python may hold the GIL, or a caller up its stack
// may; the binding it came through waits at its end instead (finish_blocking_launches).
bool python_thread() noexcept {
  return PyGILState_GetThisThreadState() != nullptr;
}

}  // namespace

const char* launch_origin_here() noexcept {
  return g_origins_on.load(std::memory_order_relaxed) ? find_origin() : nullptr;
}

bool set_launch_origins(bool on) noexcept {
  return g_origins_on.exchange(on, std::memory_order_relaxed);
}

void add_origin_skip(const std::string& prefix) {
  std::lock_guard lock(g_skip_mutex);
  static std::vector<std::unique_ptr<std::vector<std::string>>> lists;  // kept: see g_skip
  const auto* old = g_skip.load(std::memory_order_relaxed);  // (written under g_skip_mutex only)
  auto next = std::make_unique<std::vector<std::string>>(
      old != nullptr ? *old : std::vector<std::string>());
  for (const auto& p : *next) {
    if (p == prefix) return;
  }
  next->push_back(prefix);
  lists.push_back(std::move(next));
  g_skip.store(lists.back().get(), std::memory_order_release);
}

void finish_blocking_launches() {
  if (!impl::has_deferred_launches()) return;
  py::gil_scoped_release release;
  impl::finish_deferred_launches();
}

void install_launch_site_hooks() {
  impl::set_failure_annotator(&add_python_note);
  impl::set_defer_blocking_hook(&python_thread);
}

}  // namespace streamrt::python
