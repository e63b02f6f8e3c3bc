// Per-thread trace buffers. Each thread appends to its own buffer (an uncontended mutex, only
// while tracing); the profiler drains all buffers when it collects.
#include "trace.hpp"

#include <atomic>
#include <memory>
#include <mutex>
#include <new>

#include "registry.hpp"

namespace streamrt::core {
namespace {

struct Buffer {
  std::mutex mutex;
  std::vector<impl::TraceItem> records;  // guarded by mutex
  bool orphan = false;                   // guarded by the list's mutex: its thread has exited
};

struct BufferList {
  std::mutex mutex;
  std::vector<std::unique_ptr<Buffer>> buffers;  // guarded by mutex; never shrinks
};

// Leaked on purpose: work finished during process exit may still trace.
BufferList& buffer_list() {
  static BufferList* r = new BufferList;
  return *r;
}

// A buffer for this thread: reuses one whose thread has exited, else adds one.
Buffer* acquire_buffer() {
  auto& r = buffer_list();
  std::lock_guard lock(r.mutex);
  for (auto& b : r.buffers) {
    if (b->orphan) {
      b->orphan = false;
      return b.get();
    }
  }
  r.buffers.push_back(std::make_unique<Buffer>());
  return r.buffers.back().get();
}

// Trivially destructible, so still readable while the thread (or the process) exits; the holder
// hands the buffer back for reuse when the thread ends.
thread_local Buffer* tls_buffer = nullptr;
thread_local bool tls_exited = false;

struct BufferReturn {
  ~BufferReturn() {
    if (tls_buffer != nullptr) {
      auto& r = buffer_list();
      std::lock_guard lock(r.mutex);
      tls_buffer->orphan = true;
    }
    tls_buffer = nullptr;
    tls_exited = true;
  }
};

Buffer* this_thread_buffer() {
  if (tls_buffer != nullptr) return tls_buffer;
  if (tls_exited) return nullptr;  // thread exit: the caller uses the shared fallback
  thread_local BufferReturn returner;
  tls_buffer = acquire_buffer();
  return tls_buffer;
}

// For threads past their thread-local destructors (process exit): one shared buffer.
Buffer& late_buffer() {
  static Buffer* b = [] {
    auto& r = buffer_list();
    std::lock_guard lock(r.mutex);
    r.buffers.push_back(std::make_unique<Buffer>());
    return r.buffers.back().get();
  }();
  return *b;
}

// Whether tracing is on, for tracing_start()'s exclusivity; the backends keep their own flags.
std::mutex g_switch_mutex;
bool g_on = false;  // guarded by g_switch_mutex

}  // namespace

bool tracing_start() {
  std::lock_guard lock(g_switch_mutex);
  if (g_on) return false;
  g_on = true;
  set_tracing_in_backends(true);
  return true;
}

void tracing_stop() {
  std::lock_guard lock(g_switch_mutex);
  g_on = false;
  set_tracing_in_backends(false);
}

std::vector<impl::TraceItem> tracing_collect() {
  auto& r = buffer_list();
  std::vector<Buffer*> buffers;
  {
    std::lock_guard lock(r.mutex);
    for (auto& b : r.buffers) buffers.push_back(b.get());
  }
  std::vector<impl::TraceItem> out;
  for (Buffer* b : buffers) {
    std::lock_guard lock(b->mutex);
    out.insert(out.end(), b->records.begin(), b->records.end());
    b->records.clear();
  }
  return out;
}

}  // namespace streamrt::core

namespace streamrt::impl {

void trace_item(const TraceItem& item) noexcept {
  using namespace core;
  try {
    Buffer* b = this_thread_buffer();
    if (b == nullptr) b = &late_buffer();
    std::lock_guard lock(b->mutex);
    b->records.push_back(item);
  } catch (...) {
    // Out of memory: the profiler loses this item (the work itself ran and was accounted for).
  }
}

}  // namespace streamrt::impl
