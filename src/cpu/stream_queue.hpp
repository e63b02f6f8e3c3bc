#pragma once
// The queue of a CPU stream: intrusive nodes that carry the entry inline (the callable in
// a small buffer), pushed lock-free by any number of threads and taken by one
// consumer at a time (D. Vyukov's intrusive MPSC list). Nodes are recycled through a per-thread
// cache (NodeCache). See docs/design.md, "The stream queue".
#include <atomic>
#include <cstdint>
#include <memory>

#include "streamrt/detail/work.hpp"

namespace streamrt::cpu {

class CpuEvent;
struct SyncPoint;

// Size of a cache line: producer and consumer fields are kept this far apart.
inline constexpr std::size_t kCacheLine = 64;

// The callable a node carries: detail::kQueueInlineBytes inline; a larger callable goes to the
// heap (see Node).
using NodeWork = detail::QueueWork;

// One queue entry. Owned by its producer until pushed, then by the consumer until recycled.
// 56 bytes, one 64-byte malloc chunk per queued item (the QueueMemory benchmark): the kind shares
// a word with the position, and the callable, the event and the sync point share their storage
// (which one is live follows the kind).
struct Node {
  // kDropped: work removed by cancel() (its callable is gone); kMark: the end of a cancel.
  enum class Kind : std::uint8_t { kWork, kWait, kStamp, kSync, kDropped, kMark };

  Node() noexcept { ::new (&work) NodeWork(); }
  ~Node() { destroy_payload(); }
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  std::atomic<Node*> next{nullptr};
  const char* label = nullptr;  // kWork

  std::uint64_t seq() const noexcept { return seq_kind_ >> 8; }
  void set_seq(std::uint64_t seq) noexcept { seq_kind_ = seq << 8 | (seq_kind_ & 0xff); }
  Kind kind() const noexcept { return static_cast<Kind>(seq_kind_ & 0xff); }
  // kWork -> kDropped or kMark (the callable was moved out or never set): the storage keeps an
  // empty NodeWork.
  void set_kind_keeping_work(Kind k) noexcept {
    seq_kind_ = (seq_kind_ & ~std::uint64_t{0xff}) | static_cast<std::uint8_t>(k);
  }
  // A kWait or kStamp node on `e`; the node must be cleared (kWork, no callable).
  void set_event(Kind k, std::shared_ptr<CpuEvent> e) noexcept {
    work.~NodeWork();
    ::new (&event) std::shared_ptr<CpuEvent>(std::move(e));
    set_kind_keeping_work(k);
  }
  // A kSync node; the node must be cleared.
  void set_sync(std::shared_ptr<SyncPoint> s) noexcept {
    work.~NodeWork();
    ::new (&sync) std::shared_ptr<SyncPoint>(std::move(s));
    set_kind_keeping_work(Kind::kSync);
  }

  // Back to a freshly allocated state (captured state released), for reuse.
  void clear() noexcept {
    destroy_payload();
    ::new (&work) NodeWork();
    label = nullptr;
    seq_kind_ = 0;  // kWork
  }

  union {
    NodeWork work;                    // kWork, kDropped, kMark
    std::shared_ptr<CpuEvent> event;  // kWait: waited on; kStamp: to stamp
    std::shared_ptr<SyncPoint> sync;  // kSync
  };

 private:
  void destroy_payload() noexcept {
    switch (kind()) {
      case Kind::kWait:
      case Kind::kStamp:
        event.~shared_ptr();
        break;
      case Kind::kSync:
        sync.~shared_ptr();
        break;
      default:
        work.~NodeWork();
    }
  }

  std::uint64_t seq_kind_ = 0;  // position << 8 | kind
};
static_assert(sizeof(Node) <= 56, "a node must fit one 64-byte malloc chunk");

// Node allocation through the block cache (include/streamrt/detail/block_cache.hpp): a node freed
// by a consumer goes to the consumer's free list, lists that grow too long hand a batch to a
// bounded global stock, from which empty lists refill, so a producer thread and a consumer thread
// on a steady stream allocate nothing.
class NodeCache {
 public:
  // A cleared node (from this thread's list, the global stock, or new). Thread-safe.
  static Node* get();
  // Takes back a node, destroying what it still carries (callers normally clear it first, to
  // release captured state outside their locks). Thread-safe.
  static void put(Node* n) noexcept;
};

// Multi-producer single-consumer intrusive queue. push() is wait-free (one exchange and one store);
// pop() is for one consumer at a time (the caller guarantees it) and may return null while a
// producer is between its exchange and its link store, even if later nodes were pushed: the
// consumer then looks again.
class MpscQueue {
 public:
  MpscQueue() noexcept = default;
  MpscQueue(const MpscQueue&) = delete;
  MpscQueue& operator=(const MpscQueue&) = delete;

  void push(Node* n) noexcept {
    n->next.store(nullptr, std::memory_order_relaxed);  // published by the exchange below
    // acq_rel: release publishes n (its entry and its null next) to the producer that links after
    // it; acquire makes prev's initialisation visible before we write prev->next.
    Node* prev = head_.exchange(n, std::memory_order_acq_rel);
    // Release: the consumer's acquire load of prev->next sees n's entry.
    prev->next.store(n, std::memory_order_release);
  }

  // The oldest linked node, or null. Consumer only.
  Node* pop() noexcept {
    Node* tail = tail_;
    // Acquire (here and below): pairs with push's release store, so the node's entry is visible.
    Node* next = tail->next.load(std::memory_order_acquire);
    if (tail == &stub_) {
      if (next == nullptr) return nullptr;
      tail_ = next;
      tail = next;
      next = next->next.load(std::memory_order_acquire);
    }
    if (next != nullptr) {
      tail_ = next;
      return tail;
    }
    // tail is the last linked node. Unless it is also the last pushed one, a producer is between
    // its exchange and its link: come back later.
    if (tail != head_.load(std::memory_order_acquire)) return nullptr;
    push(&stub_);  // so that tail can leave: the stub takes its place as the last node
    next = tail->next.load(std::memory_order_acquire);
    if (next != nullptr) {
      tail_ = next;
      return tail;
    }
    return nullptr;
  }

  // The node the next pop() returns if it is linked already, or null. Consumer only; a hint (for
  // a prefetch): it reads no node.
  Node* peek() const noexcept { return tail_ == &stub_ ? nullptr : tail_; }

  // In a child of fork(): forget every node (they belong to the parent's work; leaked).
  void reset_in_fork_child() noexcept {
    stub_.next.store(nullptr, std::memory_order_relaxed);
    head_.store(&stub_, std::memory_order_relaxed);
    tail_ = &stub_;
  }

 private:
  Node stub_;
  alignas(kCacheLine) std::atomic<Node*> head_{&stub_};  // producers: the last pushed node
  alignas(kCacheLine) Node* tail_ = &stub_;              // consumer: the oldest node
};

}  // namespace streamrt::cpu
