// Whitebox tests of the stream queue (src/cpu/stream_queue.*): the lock-free MPSC list keeps each
// producer's order and loses or repeats nothing with many producers and one consumer; recycled
// nodes come back clean; a stream fed by many threads at once is drained by one thread at a time,
// in each thread's order. Run under TSan by `make test-tsan` (label runtime).
#include "cpu/stream_queue.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <string_view>
#include <thread>
#include <vector>

#include "streamrt/streamrt.hpp"

namespace {

using streamrt::cpu::MpscQueue;
using streamrt::cpu::Node;
using streamrt::cpu::NodeCache;

bool sanitized() {
  return std::string_view(STREAMRT_TEST_SANITIZER).size() > 0;
}

// Producer p pushes nodes tagged (p, i) for i = 0..n-1; the consumer must see, per producer,
// exactly 0, 1, ..., n-1 in that order.
TEST(StreamQueue, ManyProducersOneConsumerKeepEachProducersOrderAndLoseNothing) {
  constexpr int kProducers = 8;
  const std::uint64_t per_producer = sanitized() ? 20000 : 200000;
  MpscQueue queue;
  std::atomic<int> ready{0};
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] {
      ready.fetch_add(1);
      while (ready.load() < kProducers) {
      }
      for (std::uint64_t i = 0; i < per_producer; ++i) {
        Node* n = NodeCache::get();
        n->set_seq((static_cast<std::uint64_t>(p) << 32) | i);
        queue.push(n);
      }
    });
  }
  std::vector<std::uint64_t> next(kProducers, 0);
  std::uint64_t received = 0, empty_polls = 0;
  const std::uint64_t total = per_producer * kProducers;
  while (received < total) {
    Node* n = queue.pop();
    if (n == nullptr) {
      ++empty_polls;
      std::this_thread::yield();
      continue;
    }
    const auto p = static_cast<int>(n->seq() >> 32);
    const auto i = n->seq() & 0xffffffffULL;
    ASSERT_GE(p, 0);
    ASSERT_LT(p, kProducers);
    ASSERT_EQ(i, next[p]) << "producer " << p << ": out of order or repeated";
    ++next[p];
    ++received;
    n->clear();
    NodeCache::put(n);
  }
  for (auto& t : producers) t.join();
  EXPECT_EQ(queue.pop(), nullptr) << "more nodes than were pushed";
  for (int p = 0; p < kProducers; ++p) EXPECT_EQ(next[p], per_producer);
}

TEST(StreamQueue, ConsumerSeesTheEntryWrittenBeforePush) {
  // The callable and its captured data are written by the producer before push and read by the
  // consumer after pop: TSan reports a race here if push/pop do not order them.
  MpscQueue queue;
  constexpr int kItems = 20000;
  std::vector<int> values(kItems, 0);
  std::thread producer([&] {
    for (int i = 0; i < kItems; ++i) {
      Node* n = NodeCache::get();
      values[i] = i + 1;  // plain write, published by push
      n->work = [&values, i] { values[i] *= 2; };
      n->set_seq(static_cast<std::uint64_t>(i));
      queue.push(n);
    }
  });
  int seen = 0;
  while (seen < kItems) {
    Node* n = queue.pop();
    if (n == nullptr) {
      std::this_thread::yield();
      continue;
    }
    n->work();
    EXPECT_EQ(values[n->seq()], 2 * static_cast<int>(n->seq() + 1));
    ++seen;
    n->clear();
    NodeCache::put(n);
  }
  producer.join();
}

TEST(StreamQueue, RecycledNodesComeBackCleared) {
  std::vector<Node*> nodes;
  for (int i = 0; i < 300; ++i) {
    Node* n = NodeCache::get();
    EXPECT_FALSE(static_cast<bool>(n->work));
    EXPECT_EQ(n->event, nullptr);
    EXPECT_EQ(n->sync, nullptr);
    n->work = [] {};
    n->clear();
    nodes.push_back(n);
  }
  // Freed on another thread (as a consumer does), then taken again here.
  std::thread([&] {
    for (Node* n : nodes) NodeCache::put(n);
  }).join();
  for (int i = 0; i < 300; ++i) {
    Node* n = NodeCache::get();
    EXPECT_FALSE(static_cast<bool>(n->work));
    NodeCache::put(n);
  }
}

// Through the runtime: many threads launch onto one stream at once. Every item checks that no
// other item of the stream runs (one drainer at a time) and that its thread's items arrive in
// order. Fails if the empty -> non-empty transition scheduled the stream twice.
TEST(StreamQueue, StreamFedByManyThreadsRunsOneItemAtATimeInEachThreadsOrder) {
  constexpr int kThreads = 6;
  const int per_thread = sanitized() ? 3000 : 30000;
  streamrt::Stream s;
  std::atomic<int> running{0};
  std::atomic<int> overlaps{0};
  std::vector<int> last(kThreads, -1);  // written only by items of s: ordered by the stream
  std::atomic<int> disorder{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < per_thread; ++i) {
        s.launch([&, t, i] {
          if (running.fetch_add(1) != 0) overlaps.fetch_add(1);
          if (last[t] != i - 1) disorder.fetch_add(1);
          last[t] = i;
          running.fetch_sub(1);
        });
        if (i % 1000 == 999) s.synchronize();  // host-run items mixed with worker drains
      }
    });
  }
  for (auto& th : threads) th.join();
  s.synchronize();
  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_EQ(disorder.load(), 0);
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(last[t], per_thread - 1);
  EXPECT_EQ(s.pending(), 0u);
}

}  // namespace
