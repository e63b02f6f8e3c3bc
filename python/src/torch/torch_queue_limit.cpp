// A host thread enqueues a small torch op faster than a worker runs it, and every queued op holds
// its outputs, allocated at the call: without a bound the queue (and the memory, and the tracking
// index) grows for as long as the host loops, and the worker writes outputs that are never warm
// in cache. So a host thread that finds too many items, or too many bytes of new outputs, queued
// on its stream waits, as CUDA's launches do when a stream's queue is full, until half of each
// finished. It polls the stream's counts with short sleeps: the half left takes longer to run
// than a sleep, so the stream does not run dry meanwhile, and no finishing item pays for a
// wake-up. The wait gives up once the stream finished no item for a while, so that a stream held
// by a user event or stuck behind a long op never hangs the host; the thread does not wait for it
// again until it finished an item.
#include "torch_queue_limit.hpp"

#include <Python.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

#include "streamrt/cpu.hpp"
#include "streamrt/error.hpp"

namespace streamrt::python {

struct QueuedBytes {
  std::atomic<std::int64_t> bytes{0};
};

namespace {

constexpr std::int64_t kDefaultItems = 128;
constexpr std::int64_t kDefaultBytes = std::int64_t{32} << 20;
// How long a stream may finish no item before the host stops waiting for it.
constexpr std::chrono::milliseconds kPatience{100};
constexpr std::chrono::microseconds kPoll{50};

std::atomic<std::int64_t> g_items{kDefaultItems};
std::atomic<std::int64_t> g_bytes{kDefaultBytes};
std::atomic<std::uint64_t> g_waits{0};

// The stream this thread gave up waiting for: its id, its count then, and this thread's launches
// on it since (it progressed once its count is below the two together).
struct Stalled {
  std::uint64_t id = 0;
  std::uint64_t pending = 0;
  std::uint64_t launched = 0;
};
thread_local Stalled t_stalled;

// True while this thread does not wait for `s` again: it gave up on it and it finished no item
// since (counting the launch just made).
bool still_stalled(const Stream& s, std::uint64_t pending) {
  if (t_stalled.id == 0 || t_stalled.id != s.id()) return false;
  ++t_stalled.launched;
  if (pending >= t_stalled.pending + t_stalled.launched) return true;
  t_stalled = {};
  return false;
}

struct Limits {
  std::uint64_t items;  // 0: none
  std::int64_t bytes;   // 0: none
  bool over(std::uint64_t pending, std::int64_t queued) const {
    return (items != 0 && pending > items) || (bytes != 0 && queued > bytes);
  }
  Limits half() const { return {items / 2, bytes / 2}; }
};

// Waits until `s` is within `target`; gives up (and notes the stall) when no item finishes within
// kPatience.
void wait_down_to(const Stream& s, const QueuedBytes& q, std::uint64_t pending, Limits target) {
  using Clock = std::chrono::steady_clock;
  auto deadline = Clock::now() + kPatience;
  // Relaxed: a count polled for progress; the memory it stands for is not read here.
  while (target.over(pending, q.bytes.load(std::memory_order_relaxed))) {
    std::this_thread::sleep_for(kPoll);
    const std::uint64_t now_pending = s.pending();
    if (now_pending < pending) {
      deadline = Clock::now() + kPatience;
    } else if (Clock::now() > deadline) {
      t_stalled = {s.id(), now_pending, 0};
      return;
    }
    pending = now_pending;
  }
}

// Waits as limit_torch_queue() says, with the GIL released if this thread holds it.
void wait_without_gil(const Stream& s, const QueuedBytes& q, std::uint64_t pending, Limits target) {
  g_waits.fetch_add(1, std::memory_order_relaxed);  // (a statistic)
  // (the stream's work may need the GIL: a Python path op, a Python callback)
  PyThreadState* saved = PyGILState_Check() != 0 ? PyEval_SaveThread() : nullptr;
  try {
    wait_down_to(s, q, pending, target);
  } catch (...) {
    if (saved != nullptr) PyEval_RestoreThread(saved);
    throw;
  }
  if (saved != nullptr) PyEval_RestoreThread(saved);
}

}  // namespace

QueuedBytes* queued_bytes_of(const Stream& s) {
  static std::mutex mutex;
  static auto* counts = new std::unordered_map<std::uint64_t, QueuedBytes*>;  // leaked
  thread_local std::uint64_t last_id = 0;
  thread_local QueuedBytes* last = nullptr;
  const std::uint64_t id = s.id();
  if (last != nullptr && last_id == id) return last;
  const std::lock_guard lock(mutex);
  QueuedBytes*& q = (*counts)[id];
  if (q == nullptr) q = new QueuedBytes;
  last_id = id;
  last = q;
  return q;
}

// Relaxed: a count read only to decide whether to wait; the memory it stands for is not read.
void add_queued_bytes(QueuedBytes* q, std::size_t n) noexcept {
  if (n != 0) q->bytes.fetch_add(static_cast<std::int64_t>(n), std::memory_order_relaxed);
}

void remove_queued_bytes(QueuedBytes* q, std::size_t n) noexcept {
  if (n != 0) q->bytes.fetch_sub(static_cast<std::int64_t>(n), std::memory_order_relaxed);
}

void limit_torch_queue(const Stream& s) noexcept {
  const Limits limits{static_cast<std::uint64_t>(g_items.load(std::memory_order_relaxed)),
                      g_bytes.load(std::memory_order_relaxed)};
  // (stream work launching ops: its own stream cannot move while it waits)
  if ((limits.items == 0 && limits.bytes == 0) || cpu::on_worker_thread()) return;
  try {
    const QueuedBytes& q = *queued_bytes_of(s);
    const std::uint64_t pending = s.pending();
    // (every launch counts towards the stall's progress test, within the limits or not)
    if (still_stalled(s, pending)) return;
    if (!limits.over(pending, q.bytes.load(std::memory_order_relaxed))) return;
    wait_without_gil(s, q, pending, limits.half());
  } catch (...) {
    // (a stream that can no longer say its count, no memory for one: the op was queued anyway)
  }
}

void set_queue_limit(std::int64_t items) {
  if (items < 0 || items == 1) {
    throw Error(
        "streamrt.torch: the queue limit is a count of items of at least 2 (or 0 for no "
        "limit), not " +
        std::to_string(items));
  }
  g_items.store(items, std::memory_order_relaxed);  // (launches read it on their own)
}

void set_queue_bytes_limit(std::int64_t bytes) {
  if (bytes < 0) {
    throw Error("streamrt.torch: the queue's byte limit is 0 (no limit) or more, not " +
                std::to_string(bytes));
  }
  g_bytes.store(bytes, std::memory_order_relaxed);  // (launches read it on their own)
}

std::int64_t queue_limit() noexcept {
  return g_items.load(std::memory_order_relaxed);
}

std::int64_t queue_bytes_limit() noexcept {
  return g_bytes.load(std::memory_order_relaxed);
}

std::uint64_t queue_limit_waits() noexcept {
  return g_waits.load(std::memory_order_relaxed);
}

}  // namespace streamrt::python
