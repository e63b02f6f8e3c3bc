// Small-block recycling (include/streamrt/detail/block_cache.hpp). A producer thread allocates
// what a consumer thread frees (queue nodes, queued callables, storage records); through malloc
// that is a cross-thread free, which takes the allocating thread's arena lock and, contended,
// a futex wake on every op. Here a block freed on the consumer goes to the consumer's list; lists
// that grow too long hand a batch to a bounded global stock per size class, from which empty lists
// refill: one mutex per kBatch blocks, and none while a thread's list has blocks.
#include <array>
#include <bit>
#include <cstdlib>
#include <mutex>
#include <vector>

#include "streamrt/detail/block_cache.hpp"

#include "core/prefetch.hpp"
#include "core/thread_exit.hpp"

namespace streamrt::detail {
namespace {

// Requests round up to 56, 120, 248 or 504 bytes: with malloc's 8-byte header, chunks of 64, 128,
// 256 and 512 bytes (a 56-byte queue node stays one 64-byte chunk).
constexpr int kClasses = 4;
constexpr std::size_t class_bytes(int c) { return (std::size_t{64} << c) - 8; }
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
// Bytes the global stock keeps per class; beyond that blocks are freed (memory goes back after
// a burst). Enough for a burst of tens of thousands of queued items to be launched again from the
// stock rather than from malloc (a deep queue is refilled in every iteration of a training loop).
constexpr std::size_t kMaxStockBytes = std::size_t{4} << 20;
constexpr std::size_t max_stock(int c) { return kMaxStockBytes / (kBatch * (class_bytes(c) + 8)); }

struct Block {
  Block* next;
};

struct Batch {
  Block* head;
  int count;
};

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

void free_list(Block* head) noexcept {
  while (head != nullptr) {
    Block* next = head->next;
    std::free(head);
    head = next;
  }
}

// Hands a private list to the stock, or frees it when the stock is full or busy.
void give_back(int c, Block* head, int count) noexcept {
  auto& s = stock(c);
  if (s.mutex.try_lock()) {
    bool kept = false;
    if (s.batches.size() < max_stock(c)) {
      try {
        s.batches.push_back(Batch{head, count});
        kept = true;
      } catch (...) {
      }
    }
    s.mutex.unlock();
    if (kept) return;
  }
  free_list(head);
}

// A thread's free lists: trivially constructible and destructible, so that an access costs one TLS
// lookup with no initialisation guard, and stays valid while the thread exits. `state` says
// whether the flush at thread exit is registered yet (kFresh), or has run (kGone: blocks then go
// straight to and from malloc).
struct ThreadLists {
  enum State : int { kFresh, kActive, kGone };
  Batch lists[kClasses];
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
    Batch& l = t.lists[c];
    if (l.head != nullptr) give_back(c, l.head, l.count);
    l = Batch{};
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

Block* pop(Batch& list) noexcept {
  Block* b = list.head;
  list.head = b->next;
  --list.count;
  // The next block is usually cold (freed on another core) and its caller will write it: start
  // fetching it, to own, for the next call.
  if (list.head != nullptr) core::prefetch_for_write(list.head);
  return b;
}

// cached_alloc when the thread's list is empty or the thread is new or exiting. Out of line, so
// that the common path saves no registers.
[[gnu::noinline]] void* alloc_slow(int c) {
  ThreadLists* t = thread_lists();
  if (t == nullptr) return new_block(c);
  Batch& list = t->lists[c];
  if (list.head == nullptr) {
    auto& s = stock(c);
    if (s.mutex.try_lock()) {
      if (!s.batches.empty()) {
        list = s.batches.back();
        s.batches.pop_back();
      }
      s.mutex.unlock();
    }
    if (list.head == nullptr) return new_block(c);
  }
  return pop(list);
}

// cached_free when the thread is new or exiting, or its list is long enough to give a batch away.
[[gnu::noinline]] void free_slow(void* p, int c) noexcept {
  ThreadLists* t = thread_lists();
  if (t == nullptr) {
    std::free(p);
    return;
  }
  Batch& list = t->lists[c];
  auto* b = static_cast<Block*>(p);
  b->next = list.head;
  list.head = b;
  if (++list.count < 2 * kBatch) return;
  // Too many here (a consumer of another thread's blocks): hand a batch to the stock.
  Block* last = b;
  for (int i = 1; i < kBatch; ++i) last = last->next;
  list.head = last->next;
  list.count -= kBatch;
  last->next = nullptr;
  give_back(c, b, kBatch);
}

}  // namespace

void* cached_alloc(std::size_t bytes) {
  if (bytes > kMaxCachedBlock) return ::operator new(bytes);
  const int c = class_of(bytes);
  ThreadLists& t = tls_lists;  // one address computation (a call in a shared library)
  Batch& list = t.lists[c];
  if (t.state != ThreadLists::kActive || list.head == nullptr) [[unlikely]] {
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
  Batch& list = t.lists[c];
  if (t.state != ThreadLists::kActive || list.count + 1 >= 2 * kBatch) [[unlikely]] {
    free_slow(p, c);
    return;
  }
  auto* b = static_cast<Block*>(p);
  b->next = list.head;
  list.head = b;
  ++list.count;
}

}  // namespace streamrt::detail
