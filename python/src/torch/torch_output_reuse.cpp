// Stream-ordered reuse of outputs' memory (docs/torch.md, "Memory"). A loop that drops each call's
// output before the call's op ran leaves those outputs held by the queued ops alone, and a host
// running ahead of its stream allocates the next ones meanwhile: the queue's run-ahead in memory.
// CUDA's caching allocator hands such a block to the next allocation on the same stream at once;
// here a new output of stream work may take the block of a storage whose only holders are ops
// that this thread launched earlier on the same stream and that have not started (the op that
// wrote it, the ops that read it):
// - those ops run before any op this thread launches there later, so their last use of the
//   memory comes first, and every other reader of the new output waits for the new output's op;
// - nothing else holds the storage (its use count is the ops' references, one each), and the ops
//   cannot give the storage out, so no one else can reach the old contents;
// - the thread restriction orders the ops: each op is listed just before this thread launches
//   it, so every op this thread finds in its list was launched before the op it allocates for.
// The block then has two holders (the old storage and the new), and goes back to the cache when
// both died. Each thread keeps its listed storages in its own lane; an op unlists its storages
// under the lane's lock as it starts, before it can drop them, so a listed storage is alive.
#include "torch_output_reuse.hpp"

#include <ATen/EmptyTensor.h>
#include <c10/util/intrusive_ptr.h>
#include <pthread.h>

#include <atomic>
#include <mutex>
#include <new>
#include <vector>

#include "torch_output_cache.hpp"
#include "torch_runner_internal.hpp"
#include "torch_spin_lock.hpp"
#include "torch_spin_pool.hpp"

namespace streamrt::python::torch_runner {
namespace {

constexpr std::size_t kMaxListed = 4;  // storages listed per op (its first ones)
constexpr int kMaxLooked = 64;         // listed storages looked at per allocation
constexpr long kMaxListedHolders = 8;  // beyond, a storage is not counted (a count costs a scan)
constexpr std::size_t kPoolSize = 1024;

struct Lane;

// One listed storage, in its lane's list (oldest first) while `listed`.
struct Node {
  Node* older = nullptr;
  Node* newer = nullptr;
  c10::StorageImpl* storage = nullptr;  // alive while listed: the op holds it until it starts
  void* block = nullptr;
  std::size_t bytes = 0;
  std::uint64_t stream = 0;
  bool listed = false;
};

// The storages of one thread's launches, under its lock (the thread lists and takes, workers
// unlist as their ops start).
struct Lane {
  SpinLock lock;
  Node* oldest = nullptr;
  Node* newest = nullptr;

  void push(Node* n) noexcept {
    n->older = newest;
    n->newer = nullptr;
    (newest != nullptr ? newest->newer : oldest) = n;
    newest = n;
    n->listed = true;
  }
  void remove(Node* n) noexcept {
    (n->older != nullptr ? n->older->newer : oldest) = n->newer;
    (n->newer != nullptr ? n->newer->older : newest) = n->older;
    n->listed = false;
  }
};

}  // namespace

struct ReuseTicket {
  Lane* lane = nullptr;
  std::size_t count = 0;
  Node nodes[kMaxListed];
};

namespace {

// Lanes and tickets live for the process: a lane of a thread that exited goes to the next new
// thread (its listed ops were launched before anything that thread launches), tickets to a pool.
struct Shared {
  SpinLock lock;
  std::vector<Lane*> all;
  std::vector<Lane*> free_lanes;
  SpinPool<ReuseTicket, kPoolSize> tickets;
};

Shared& shared() {
  static Shared* const s = [] {
    auto* made = new Shared;  // leaked: ops are freed during interpreter exit too
    // fork(): the child's only thread holds nothing; streamrt's own handler waited for the
    // queued work, so no op is listed either.
    pthread_atfork(nullptr, nullptr, [] {
      shared().lock.reset_in_child();
      for (Lane* l : shared().all) l->lock.reset_in_child();
      shared().tickets.reset_in_child();
    });
    return made;
  }();
  return *s;
}

struct LaneOfThread {
  Lane* lane = nullptr;
  ~LaneOfThread() {
    if (lane == nullptr) return;
    Shared& s = shared();
    const std::lock_guard guard(s.lock);
    s.free_lanes.push_back(lane);  // (reserved with `all`: never allocates)
  }
};
thread_local LaneOfThread tls_lane;

Lane* this_lane() {
  if (tls_lane.lane != nullptr) return tls_lane.lane;
  Shared& s = shared();
  {
    const std::lock_guard guard(s.lock);
    if (!s.free_lanes.empty()) {
      tls_lane.lane = s.free_lanes.back();
      s.free_lanes.pop_back();
      return tls_lane.lane;
    }
  }
  auto* lane = new Lane;
  const std::lock_guard guard(s.lock);
  s.all.push_back(lane);
  s.free_lanes.reserve(s.all.size());
  tls_lane.lane = lane;
  return lane;
}

ReuseTicket* new_ticket() {
  ReuseTicket* t = shared().tickets.take();
  return t != nullptr ? t : new ReuseTicket;
}

// (a switch for measurements and tests: no order needed)
std::atomic<bool> g_on{true};

// Under the lane's lock: how many of the first kMaxLooked listed entries are `storage` on
// `stream`.
long listed_on(const Lane& lane, const c10::StorageImpl* storage, std::uint64_t stream) noexcept {
  long count = 0;
  int looked = 0;
  for (const Node* n = lane.oldest; n != nullptr && looked < kMaxLooked; n = n->newer, ++looked) {
    count += n->storage == storage && n->stream == stream ? 1 : 0;
  }
  return count;
}

// Under the lane's lock: unlists every entry of `storage` (so that its block is handed on once).
void unlist_all(Lane& lane, const c10::StorageImpl* storage) noexcept {
  for (Node* n = lane.oldest; n != nullptr;) {
    Node* const next = n->newer;
    if (n->storage == storage) lane.remove(n);
    n = next;
  }
}

// Under the lane's lock: a listed block of `bytes` for stream `stream` whose storage only ops
// listed for that stream hold, held for the caller and unlisted; null when none.
void* take_locked(Lane& lane, std::uint64_t stream, std::size_t bytes) noexcept {
  int looked = 0;
  for (Node* n = lane.oldest; n != nullptr && looked < kMaxLooked; n = n->newer, ++looked) {
    if (n->stream != stream || n->bytes != bytes) continue;
    // Each listed op holds one reference of its own; a user's tensor, a view, an op of another
    // stream or thread, a started op or a second argument of one op would each add one more.
    const long uses = c10::raw::intrusive_ptr::use_count(n->storage);
    if (uses > kMaxListedHolders || uses != listed_on(lane, n->storage, stream)) continue;
    hold_block(n->block);
    unlist_all(lane, n->storage);
    return n->block;
  }
  return nullptr;
}

}  // namespace

ReuseTicket* list_reusable(const c10::Storage* const* storages, std::size_t n,
                           std::uint64_t stream_id) {
  if (stream_id == 0 || !g_on.load(std::memory_order_relaxed)) return nullptr;
  ReuseTicket* t = nullptr;
  for (std::size_t i = 0; i < n; ++i) {
    void* block = reusable_block(*storages[i]);
    if (block == nullptr) continue;
    c10::StorageImpl* impl = storages[i]->unsafeGetStorageImpl();
    if (t == nullptr) {
      t = new_ticket();
    } else if (t->count == kMaxListed) {
      break;
    }
    bool seen = false;  // (an op with the same storage twice lists it once)
    for (std::size_t k = 0; k < t->count; ++k) seen = seen || t->nodes[k].storage == impl;
    if (seen) continue;
    Node& node = t->nodes[t->count++];
    node.storage = impl;
    node.block = block;
    node.bytes = block_bytes(block);
    node.stream = stream_id;
  }
  if (t == nullptr) return nullptr;
  t->lane = this_lane();
  const std::lock_guard guard(t->lane->lock);
  for (std::size_t k = 0; k < t->count; ++k) t->lane->push(&t->nodes[k]);
  return t;
}

void reusable_started(ReuseTicket* ticket) noexcept {
  if (ticket == nullptr || ticket->lane == nullptr) return;
  const std::lock_guard guard(ticket->lane->lock);
  for (std::size_t k = 0; k < ticket->count; ++k) {
    if (ticket->nodes[k].listed) ticket->lane->remove(&ticket->nodes[k]);
  }
}

void free_reusable(ReuseTicket* ticket) noexcept {
  if (ticket == nullptr) return;
  reusable_started(ticket);
  ticket->lane = nullptr;
  ticket->count = 0;
  shared().tickets.give(ticket);
}

at::Tensor empty_stream_output(at::IntArrayRef sizes, at::IntArrayRef strides,
                               at::ScalarType dtype) {
  if (!g_on.load(std::memory_order_relaxed) || !output_cache_on()) {
    return empty_output(sizes, strides, dtype);
  }
  const std::size_t bytes =
      output_block_size(at::detail::computeStorageNbytes(sizes, strides, c10::elementSize(dtype)));
  if (bytes < kReusableBlock || tls_lane.lane == nullptr)
    return empty_output(sizes, strides, dtype);
  const std::uint64_t stream = host()->current_stream_id();
  if (stream == 0) return empty_output(sizes, strides, dtype);
  void* block = nullptr;
  {
    const std::lock_guard guard(tls_lane.lane->lock);
    block = take_locked(*tls_lane.lane, stream, bytes);
  }
  if (block == nullptr) return empty_output(sizes, strides, dtype);
  return output_on_block(block, sizes, strides, dtype);
}

void use_output_reuse(bool on) noexcept {
  g_on.store(on, std::memory_order_relaxed);
}

}  // namespace streamrt::python::torch_runner
