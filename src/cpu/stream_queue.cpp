// Node recycling for the stream queue: per-thread free lists and a small global stock.
#include "stream_queue.hpp"

#include <mutex>
#include <vector>

namespace streamrt::cpu {
namespace {

// Nodes moved between a thread's list and the global stock at a time.
constexpr int kBatch = 64;
// Batches the global stock keeps; beyond that nodes are freed (memory goes back after a burst).
constexpr std::size_t kMaxStock = 64;

struct Batch {
  Node* head;
  int count;
};

// The global stock. A mutex taken once per kBatch nodes. try_lock only: in a child of fork() it
// may be held by a thread that no longer exists, and then nodes are simply allocated and freed.
struct Stock {
  std::mutex mutex;
  std::vector<Batch> batches;  // guarded by mutex
};
Stock& stock() {
  static auto* const s = new Stock;  // leaked: used by threads that exit after static destructors
  return *s;
}

void free_list(Node* head) noexcept {
  while (head != nullptr) {
    Node* next = head->next.load(std::memory_order_relaxed);  // a private list
    delete head;
    head = next;
  }
}

struct ThreadList {
  Node* head = nullptr;
  int count = 0;
  ~ThreadList();
};

// Trivially destructible, so readable while the thread exits: nodes freed after the list's
// destructor ran are deleted instead of cached.
thread_local bool tls_list_gone = false;
thread_local ThreadList tls_list;

ThreadList::~ThreadList() {
  tls_list_gone = true;
  auto& s = stock();
  if (head != nullptr && s.mutex.try_lock()) {
    if (s.batches.size() < kMaxStock) {
      s.batches.push_back(Batch{head, count});
      head = nullptr;
    }
    s.mutex.unlock();
  }
  free_list(head);
}

}  // namespace

Node* NodeCache::get() {
  if (tls_list_gone) return new Node;
  ThreadList& list = tls_list;
  if (list.head == nullptr) {
    auto& s = stock();
    if (s.mutex.try_lock()) {
      if (!s.batches.empty()) {
        list.head = s.batches.back().head;
        list.count = s.batches.back().count;
        s.batches.pop_back();
      }
      s.mutex.unlock();
    }
    if (list.head == nullptr) return new Node;
  }
  Node* n = list.head;
  // Relaxed: the free list is private to this thread.
  list.head = n->next.load(std::memory_order_relaxed);
  --list.count;
  return n;
}

void NodeCache::put(Node* n) noexcept {
  if (tls_list_gone) {
    delete n;
    return;
  }
  ThreadList& list = tls_list;
  n->next.store(list.head, std::memory_order_relaxed);  // private to this thread
  list.head = n;
  if (++list.count < 2 * kBatch) return;
  // Too many here (a consumer of another thread's nodes): hand a batch to the stock. Relaxed:
  // the list is private to this thread; the stock's mutex publishes the batch.
  Node* first = list.head;
  Node* last = first;
  for (int i = 1; i < kBatch; ++i) last = last->next.load(std::memory_order_relaxed);
  list.head = last->next.load(std::memory_order_relaxed);
  list.count -= kBatch;
  last->next.store(nullptr, std::memory_order_relaxed);
  auto& s = stock();
  if (s.mutex.try_lock()) {
    bool kept = false;
    if (s.batches.size() < kMaxStock) {
      try {
        s.batches.push_back(Batch{first, kBatch});
        kept = true;
      } catch (...) {
      }
    }
    s.mutex.unlock();
    if (kept) return;
  }
  free_list(first);
}

}  // namespace streamrt::cpu
