// Per-thread trace buffers. Each thread appends to its own buffer (an uncontended mutex, only
// while tracing); the profiler drains all buffers when it collects.
#include "tracing.hpp"

#include <memory>
#include <mutex>
#include <new>

namespace streamrt::cpu {
namespace tracing_detail {
std::atomic<bool> enabled{false};
}  // namespace tracing_detail

namespace {

struct Buffer {
  std::mutex mutex;
  std::vector<RawTrace> records;  // guarded by mutex
  bool orphan = false;            // guarded by the registry's mutex: its thread has exited
};

struct Registry {
  std::mutex mutex;
  std::vector<std::unique_ptr<Buffer>> buffers;  // guarded by mutex; never shrinks
  std::atomic<std::uint64_t> dropped{0};
};

// Leaked on purpose: work finished during process exit may still trace.
Registry& registry() {
  static Registry* r = new Registry;
  return *r;
}

// A buffer for this thread: reuses one whose thread has exited, else adds one.
Buffer* acquire_buffer() {
  auto& r = registry();
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
      auto& r = registry();
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
    auto& r = registry();
    std::lock_guard lock(r.mutex);
    r.buffers.push_back(std::make_unique<Buffer>());
    return r.buffers.back().get();
  }();
  return *b;
}

}  // namespace

bool tracing_start() noexcept {
  bool expected = false;
  // Relaxed is enough: see tracing_enabled(); the exchange itself makes start() exclusive.
  return tracing_detail::enabled.compare_exchange_strong(expected, true, std::memory_order_relaxed);
}

void tracing_stop() noexcept {
  tracing_detail::enabled.store(false, std::memory_order_relaxed);
}

void trace_item(const RawTrace& record) noexcept {
  try {
    Buffer* b = this_thread_buffer();
    if (b == nullptr) b = &late_buffer();
    std::lock_guard lock(b->mutex);
    b->records.push_back(record);
  } catch (...) {
    registry().dropped.fetch_add(1, std::memory_order_relaxed);
  }
}

std::vector<RawTrace> tracing_collect() {
  auto& r = registry();
  std::vector<Buffer*> buffers;
  {
    std::lock_guard lock(r.mutex);
    for (auto& b : r.buffers) buffers.push_back(b.get());
  }
  std::vector<RawTrace> out;
  for (Buffer* b : buffers) {
    std::lock_guard lock(b->mutex);
    out.insert(out.end(), b->records.begin(), b->records.end());
    b->records.clear();
  }
  return out;
}

std::uint64_t tracing_dropped() noexcept {
  return registry().dropped.load(std::memory_order_relaxed);
}

}  // namespace streamrt::cpu
