// Small-block recycling (include/streamrt/detail/block_cache.hpp). A producer thread allocates
// what a consumer thread frees (queue nodes, queued callables, storage records); through malloc
// that is a cross-thread free, which takes the allocating thread's arena lock and, contended,
// a futex wake on every op. Here a block freed on the consumer goes to the consumer's list; lists
// that grow too long hand a batch to a bounded global stock per size class, from which empty lists
// refill: one mutex per kBatch blocks, and none while a thread's list has blocks.
#include "streamrt/detail/block_cache.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cstdlib>
#include <mutex>
#include <vector>

#include "core/prefetch.hpp"
#include "core/thread_exit.hpp"

namespace streamrt::detail {
namespace {

// Requests round up to 56, 120, 248 or 504 bytes: with malloc's 8-byte header, chunks of 64, 128,
// 256 and 512 bytes (a 56-byte queue node stays one 64-byte chunk).
constexpr int kClasses = 4;
constexpr std::size_t class_bytes(int c) {
  return (std::size_t{64} << c) - 8;
}
static_assert(class_bytes(kClasses - 1) == kMaxCachedBlock);

// The smallest class whose blocks hold `bytes` (<= kMaxCachedBlock): class c holds up to
// 64 * 2^c - 8 bytes. A bit count instead of a loop over the classes: this runs on every queued
// item and every tensor.
constexpr int class_of(std::size_t bytes) {
  return static_cast<int>(std::bit_width((bytes + 7) >> 6));
}
// Checked against the definition for every size a block can have.
constexpr bool classes_match() {
  for (std::size_t b = 0; b <= kMaxCachedBlock; ++b) {
    const int c = class_of(b);
    if (c < 0 || c >= kClasses || b > class_bytes(c) || (c > 0 && b <= class_bytes(c - 1))) {
      return false;
    }
  }
  return true;
}
static_assert(classes_match());

// Blocks moved between a thread's list and the global stock at a time.
constexpr int kBatch = 64;
// A thread's list holds up to this many blocks; a free that fills it hands kBatch to the stock.
constexpr int kListCapacity = 2 * kBatch;
// Blocks fetched ahead of use: an allocation prefetches the block it will hand out this many
// allocations later. The lists hold addresses, not links through the blocks, so the next blocks
// are known without touching them: a block freed on another core (a launch's node, freed by the
// worker that ran it) is a cache miss of its own, and fetched one at a time they stalled a
// launching host for most of that miss on every launch.
constexpr int kFetchAhead = 8;
// Blocks malloc'd at a time when a thread's list and the stock are empty (one stock look per
// that many allocations rather than one per allocation).
constexpr int kRefill = 16;
// Bytes the global stock keeps per class; beyond that blocks are freed (memory goes back after
// a burst). Enough for a burst of a hundred thousand queued nodes to be launched again from the
// stock rather than from malloc (a deep queue is refilled in every iteration of a training loop).
constexpr std::size_t kMaxStockBytes = std::size_t{8} << 20;
constexpr std::size_t max_stock(int c) {
  return kMaxStockBytes / (kBatch * (class_bytes(c) + 8));
}

using Batch = std::array<void*, kBatch>;

// The global stock. try_lock only: in a child of fork() it may be held by a thread that no
// longer exists, and then blocks are simply allocated and freed.
struct Stock {
  std::mutex mutex;
  std::vector<Batch> batches;  // guarded by mutex
};
Stock& stock(int c) {
  // Leaked: used by threads that exit after static destructors.
  static auto* const s = new std::array<Stock, kClasses>;
  return (*s)[static_cast<std::size_t>(c)];
}

void free_blocks(void* const* blocks, int count) noexcept {
  for (int i = 0; i < count; ++i) std::free(blocks[i]);
}

// Hands `count` blocks (kBatch, or fewer at thread exit) to the stock, or frees them when the
// stock is full or busy.
void give_back(int c, void* const* blocks, int count) noexcept {
  auto& s = stock(c);
  if (count == kBatch && s.mutex.try_lock()) {
    bool kept = false;
    if (s.batches.size() < max_stock(c)) {
      try {
        Batch& b = s.batches.emplace_back();
        std::copy(blocks, blocks + kBatch, b.begin());
        kept = true;
      } catch (...) {
      }
    }
    s.mutex.unlock();
    if (kept) return;
  }
  free_blocks(blocks, count);
}

// One size class of a thread's list: a stack of block addresses.
struct List {
  void* blocks[kListCapacity];
  int count;
};

// A thread's free lists: trivially constructible and destructible, so that an access costs one TLS
// lookup with no initialisation guard, and stays valid while the thread exits. `state` says
// whether the flush at thread exit is registered yet (kFresh), or has run (kGone: blocks then go
// straight to and from malloc).
struct ThreadLists {
  enum State : int { kFresh, kActive, kGone };
  List lists[kClasses];
  int state;
};
constinit thread_local ThreadLists tls_lists{};

// A thread-exit hook (core/thread_exit.hpp, registered on a thread's first cached block): hands
// the lists to the stock. Not a thread_local destructor: registering one allocates, and glibc
// ends the process when that fails.
void flush_at_exit(void*) {
  ThreadLists& t = tls_lists;
  t.state = ThreadLists::kGone;
  for (int c = 0; c < kClasses; ++c) {
    List& l = t.lists[c];
    for (int at = 0; at < l.count; at += kBatch) {
      give_back(c, l.blocks + at, std::min(kBatch, l.count - at));
    }
    l.count = 0;
  }
}

// The calling thread's lists, or null once it is exiting (or when no exit hook was left for it:
// its blocks then go straight to and from malloc).
ThreadLists* thread_lists() {
  ThreadLists& t = tls_lists;
  if (t.state == ThreadLists::kActive) [[likely]] {
    return &t;
  }
  if (t.state == ThreadLists::kGone) return nullptr;
  if (!core::at_thread_exit(flush_at_exit, nullptr)) {
    t.state = ThreadLists::kGone;
    return nullptr;
  }
  t.state = ThreadLists::kActive;
  return &t;
}

void* new_block(int c) {
  void* p = std::malloc(class_bytes(c));
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

// Starts fetching, to own, the first 64 bytes of a block (two cache lines: malloc aligns blocks
// to 16 bytes only, so a 56-byte node straddles a line boundary more often than not).
void prefetch_block(void* b) noexcept {
  core::prefetch_for_write(b);
  core::prefetch_for_write(static_cast<char*>(b) + 63);
}

// The block on top of `list`, which must not be empty.
void* pop(List& list) noexcept {
  void* b = list.blocks[--list.count];
  // The block handed out kFetchAhead allocations from now is usually cold (freed on another
  // core), and its caller will write it.
  if (list.count >= kFetchAhead) prefetch_block(list.blocks[list.count - kFetchAhead]);
  return b;
}

// Fills an empty list: a batch from the stock, else kRefill new blocks (at least one, or
// bad_alloc).
void refill(int c, List& list) {
  auto& s = stock(c);
  if (s.mutex.try_lock()) {
    if (!s.batches.empty()) {
      std::copy(s.batches.back().begin(), s.batches.back().end(), list.blocks);
      list.count = kBatch;
      s.batches.pop_back();
    }
    s.mutex.unlock();
  }
  if (list.count == 0) {
    list.blocks[list.count++] = new_block(c);
    for (; list.count < kRefill; ++list.count) {
      void* p = std::malloc(class_bytes(c));
      if (p == nullptr) break;  // the one block is enough for this call
      list.blocks[list.count] = p;
    }
  }
  for (int i = 1; i <= kFetchAhead && i <= list.count; ++i) {
    prefetch_block(list.blocks[list.count - i]);
  }
}

// cached_alloc when the thread's list is empty or the thread is new or exiting. Out of line, so
// that the common path saves no registers.
[[gnu::noinline]] void* alloc_slow(int c) {
  ThreadLists* t = thread_lists();
  if (t == nullptr) return new_block(c);
  List& list = t->lists[c];
  if (list.count == 0) refill(c, list);
  return pop(list);
}

// cached_free when the thread is new or exiting, or its list is full.
[[gnu::noinline]] void free_slow(void* p, int c) noexcept {
  ThreadLists* t = thread_lists();
  if (t == nullptr) {
    std::free(p);
    return;
  }
  List& list = t->lists[c];
  if (list.count == kListCapacity) {
    // Too many here (a consumer of another thread's blocks): hand the older half to the stock
    // and keep the ones freed last, which are still in this core's cache.
    give_back(c, list.blocks, kBatch);
    std::copy(list.blocks + kBatch, list.blocks + kListCapacity, list.blocks);
    list.count -= kBatch;
  }
  list.blocks[list.count++] = p;
}

}  // namespace

void* cached_alloc(std::size_t bytes) {
  if (bytes > kMaxCachedBlock) return ::operator new(bytes);
  const int c = class_of(bytes);
  ThreadLists& t = tls_lists;  // one address computation (a call in a shared library)
  List& list = t.lists[c];
  if (t.state != ThreadLists::kActive || list.count == 0) [[unlikely]] {
    return alloc_slow(c);
  }
  return pop(list);
}

void cached_free(void* p, std::size_t bytes) noexcept {
  if (p == nullptr) return;
  if (bytes > kMaxCachedBlock) {
    ::operator delete(p);
    return;
  }
  const int c = class_of(bytes);
  ThreadLists& t = tls_lists;
  List& list = t.lists[c];
  if (t.state != ThreadLists::kActive || list.count == kListCapacity) [[unlikely]] {
    free_slow(p, c);
    return;
  }
  list.blocks[list.count++] = p;
}

}  // namespace streamrt::detail
