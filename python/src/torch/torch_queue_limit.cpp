// A host thread enqueues a small torch op faster than a worker runs it, and every queued op holds
// its outputs, allocated at the call: without a bound the queue (and the memory, and the tracking
// index) grows for as long as the host loops, and the worker writes outputs that are never warm
// in cache. So a host thread that finds too many items, or too many bytes of new outputs, queued
// on its stream waits, as CUDA's launches do when a stream's queue is full, until half of each
// finished. It polls the stream's counts with sleeps sized from the rate the stream finishes ops
// at: the half left takes longer to run than a sleep, so the stream does not run dry meanwhile,
// no finishing item pays for a wake-up, and the host wakes only a few times per wait. The wait
// gives up once the stream finished no torch op for a while, so that a stream held by a user event
// or stuck behind a long op never hangs the host; no launch waits for it again until it finished
// one.
#include "torch_queue_limit.hpp"

#include <Python.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

#include "streamrt/cpu.hpp"
#include "streamrt/error.hpp"

namespace streamrt::python {

namespace {
constexpr std::uint64_t kNotStalled = ~std::uint64_t{0};
}  // namespace

struct QueuedBytes {
  std::atomic<std::int64_t> bytes{0};
  std::atomic<std::uint64_t> finished{0};  // torch ops gone from the queue so far
  // `finished` when a wait for this stream last gave up; kNotStalled once it moved since.
  std::atomic<std::uint64_t> stalled_at{kNotStalled};
};

namespace {

constexpr std::int64_t kDefaultItems = 128;
// Above one large layer's outputs (a transformer layer's call writes tens of MB), so that a thread
// feeding two streams keeps both busy, and low enough that a loop that never synchronizes stays
// near eager's memory (docs/torch.md, "Memory").
constexpr std::int64_t kDefaultBytes = std::int64_t{96} << 20;
// How long a stream may finish no item before the host stops waiting for it.
constexpr std::chrono::milliseconds kPatience{100};
constexpr std::chrono::microseconds kPoll{50};
// The longest sleep of a wait: a rate measured over a long wait (the worker busy with another
// stream meanwhile) says little about the next millisecond.
constexpr std::chrono::microseconds kMaxNap{1000};

std::atomic<std::int64_t> g_items{kDefaultItems};
std::atomic<std::int64_t> g_bytes{kDefaultBytes};
std::atomic<std::uint64_t> g_waits{0};

// True while no launch waits for the stream of `q`: a wait for it gave up and it finished no
// torch op since.
// Relaxed, here and below: counts compared with later loads of themselves, guarding no memory.
bool still_stalled(QueuedBytes& q) {
  const std::uint64_t stalled = q.stalled_at.load(std::memory_order_relaxed);
  if (stalled == kNotStalled) return false;
  if (q.finished.load(std::memory_order_relaxed) == stalled) return true;
  q.stalled_at.store(kNotStalled, std::memory_order_relaxed);
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

// How long to sleep before looking at the stream again: a quarter of the time its `pending` items
// take at the rate it finished `done` torch ops in `waited`, so that the half left never runs dry
// while the host sleeps, yet the host wakes a few times per wait instead of once per kPoll (each
// wake-up takes a core from a worker). kPoll until an op finished (no rate yet).
std::chrono::nanoseconds next_nap(std::chrono::nanoseconds waited, std::uint64_t pending,
                                  std::uint64_t done) {
  if (done == 0) return kPoll;
  const auto quarter =
      waited * static_cast<std::int64_t>(pending) / (4 * static_cast<std::int64_t>(done));
  return std::clamp<std::chrono::nanoseconds>(quarter, kPoll, kMaxNap);
}

// Waits until `s` is within `target`; gives up (and notes the stall) when it finishes no torch op
// within kPatience.
void wait_down_to(const Stream& s, QueuedBytes& q, std::uint64_t pending, Limits target) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  auto deadline = start + kPatience;
  const std::uint64_t first = q.finished.load(std::memory_order_relaxed);
  std::uint64_t finished = first;
  while (target.over(pending, q.bytes.load(std::memory_order_relaxed))) {
    std::this_thread::sleep_for(next_nap(Clock::now() - start, pending, finished - first));
    pending = s.pending();
    const std::uint64_t now_finished = q.finished.load(std::memory_order_relaxed);
    if (now_finished != finished) {
      finished = now_finished;
      deadline = Clock::now() + kPatience;
    } else if (Clock::now() > deadline) {
      q.stalled_at.store(finished, std::memory_order_relaxed);
      return;
    }
  }
}

// Waits as limit_torch_queue() says, with the GIL released if this thread holds it.
void wait_without_gil(const Stream& s, QueuedBytes& q, std::uint64_t pending, Limits target) {
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

// Relaxed: counts read only to decide whether to wait; the memory they stand for is not read.
void add_queued_bytes(QueuedBytes* q, std::size_t n) noexcept {
  if (n != 0) q->bytes.fetch_add(static_cast<std::int64_t>(n), std::memory_order_relaxed);
}

void finish_queued(QueuedBytes* q, std::size_t n) noexcept {
  if (n != 0) q->bytes.fetch_sub(static_cast<std::int64_t>(n), std::memory_order_relaxed);
  q->finished.fetch_add(1, std::memory_order_relaxed);
}

void limit_torch_queue(const Stream& s, QueuedBytes& q) noexcept {
  const Limits limits{static_cast<std::uint64_t>(g_items.load(std::memory_order_relaxed)),
                      g_bytes.load(std::memory_order_relaxed)};
  // (stream work launching ops: its own stream cannot move while it waits)
  if ((limits.items == 0 && limits.bytes == 0) || cpu::on_worker_thread()) return;
  try {
    const std::uint64_t pending = s.pending();
    if (!limits.over(pending, q.bytes.load(std::memory_order_relaxed)) || still_stalled(q)) return;
    wait_without_gil(s, q, pending, limits.half());
  } catch (...) {
    // (a stream that can no longer say its count: the op was queued anyway)
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
