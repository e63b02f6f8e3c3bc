// A host thread enqueues a small torch op faster than a worker runs it, and every queued op holds
// its outputs, allocated at the call: without a bound the queue (and the memory, and the tracking
// index) grows for as long as the host loops, and the worker writes outputs that are never warm
// in cache. So a host thread that finds too many items queued on its stream waits, as CUDA's
// launches do when a stream's queue is full, until half of them finished. It polls the stream's
// count (Stream::pending()) with short sleeps: the half left takes longer to run than a sleep, so
// the stream does not run dry meanwhile, and no finishing item pays for a wake-up. The wait gives
// up once the stream finished no item for a while, so that a stream held by a user event or stuck
// behind a long op never hangs the host; the thread does not wait for it again until it finished
// an item.
#include "torch_queue_limit.hpp"

#include <Python.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "streamrt/cpu.hpp"
#include "streamrt/error.hpp"

namespace streamrt::python {
namespace {

constexpr std::int64_t kDefaultLimit = 128;
// How long a stream may finish no item before the host stops waiting for it.
constexpr std::chrono::milliseconds kPatience{100};
constexpr std::chrono::microseconds kPoll{50};

std::atomic<std::int64_t> g_limit{kDefaultLimit};
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

// Waits until at most `target` items are queued on `s`; gives up (and notes the stall) when no
// item finishes within kPatience.
void wait_down_to(const Stream& s, std::uint64_t pending, std::uint64_t target) {
  using Clock = std::chrono::steady_clock;
  auto deadline = Clock::now() + kPatience;
  while (pending > target) {
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

}  // namespace

void limit_torch_queue(const Stream& s) noexcept {
  const std::int64_t limit = g_limit.load(std::memory_order_relaxed);
  // (stream work launching ops: its own stream cannot move while it waits)
  if (limit == 0 || cpu::on_worker_thread()) return;
  try {
    const std::uint64_t pending = s.pending();
    if (still_stalled(s, pending) || pending <= static_cast<std::uint64_t>(limit)) return;
    g_waits.fetch_add(1, std::memory_order_relaxed);  // (a statistic)
    // (the stream's work may need the GIL: a Python path op, a Python callback)
    PyThreadState* saved = PyGILState_Check() != 0 ? PyEval_SaveThread() : nullptr;
    try {
      wait_down_to(s, pending, static_cast<std::uint64_t>(limit / 2));
    } catch (...) {
      if (saved != nullptr) PyEval_RestoreThread(saved);
      throw;
    }
    if (saved != nullptr) PyEval_RestoreThread(saved);
  } catch (...) {
    // (a stream that can no longer say its count: nothing to wait for; the op was queued)
  }
}

void set_queue_limit(std::int64_t items) {
  if (items < 0 || items == 1) {
    throw Error(
        "streamrt.torch: the queue limit is a count of items of at least 2 (or 0 for no "
        "limit), not " +
        std::to_string(items));
  }
  g_limit.store(items, std::memory_order_relaxed);  // (launches read it on their own)
}

std::int64_t queue_limit() noexcept {
  return g_limit.load(std::memory_order_relaxed);
}

std::uint64_t queue_limit_waits() noexcept {
  return g_waits.load(std::memory_order_relaxed);
}

}  // namespace streamrt::python
