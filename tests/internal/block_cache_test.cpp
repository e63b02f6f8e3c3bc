// Whitebox tests of the block cache (src/core/block_cache.cpp): blocks of every size class are
// usable over their whole size and distinct while live, one thread may free what another
// allocated, a batch freed on one thread is handed out on another (the point of the cache), and
// threads that exit give their blocks back. Run under ASan and TSan by the sanitizer builds.
#include "streamrt/detail/block_cache.hpp"

#include <gtest/gtest.h>
#include <malloc.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace {

using streamrt::detail::cached_alloc;
using streamrt::detail::cached_free;
using streamrt::detail::kMaxCachedBlock;

TEST(BlockCache, BlocksOfEverySizeAreWritableAlignedAndDistinctWhileLive) {
  std::vector<std::pair<unsigned char*, std::size_t>> live;
  for (std::size_t bytes :
       {std::size_t{1}, std::size_t{56}, std::size_t{57}, std::size_t{120}, std::size_t{200},
        kMaxCachedBlock, kMaxCachedBlock + 1, std::size_t{4096}}) {
    for (int i = 0; i < 300; ++i) {
      auto* p = static_cast<unsigned char*>(cached_alloc(bytes));
      EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % __STDCPP_DEFAULT_NEW_ALIGNMENT__, 0u);
      std::memset(p, static_cast<int>(live.size() & 0xff), bytes);
      live.emplace_back(p, bytes);
    }
  }
  // Every block still holds its own pattern: none overlaps another.
  for (std::size_t k = 0; k < live.size(); ++k) {
    const auto [p, bytes] = live[k];
    EXPECT_TRUE(std::all_of(p, p + bytes, [&](unsigned char c) { return c == (k & 0xff); }))
        << "block " << k << " of " << bytes << " bytes was overwritten";
  }
  for (const auto& [p, bytes] : live) cached_free(p, bytes);
}

// Bytes malloc counts as in use, over all arenas.
std::size_t malloc_in_use() {
  return mallinfo2().uordblks;
}

// Thread A allocates, thread B frees, thread C (with an empty list) allocates: B's frees keep the
// blocks (malloc still counts them in use: without the cache they would go back, bar the few its
// per-thread cache keeps), and C's first blocks are the batches B handed to the shared stock.
TEST(BlockCache, ABatchFreedOnOneThreadIsKeptAndHandedOutOnAnother) {
  constexpr std::size_t kBytes = kMaxCachedBlock;  // a class nothing else in this process uses
  constexpr int kBlocks = 256;
  std::vector<void*> blocks;
  blocks.reserve(kBlocks);
  std::thread([&] {
    for (int i = 0; i < kBlocks; ++i) blocks.push_back(cached_alloc(kBytes));
  }).join();
  const std::set<void*> freed(blocks.begin(), blocks.end());
  const std::size_t before = malloc_in_use();
  // B frees everything, then exits: its list goes to the stock too.
  std::thread([&] {
    for (void* p : blocks) cached_free(p, kBytes);
  }).join();
  const std::size_t after = malloc_in_use();
  EXPECT_GE(after + kBlocks / 4 * kBytes, before)
      << "freed blocks went back to malloc: " << before << " -> " << after << " bytes in use";
  std::vector<void*> got;
  std::thread([&] {
    for (int i = 0; i < 64; ++i) got.push_back(cached_alloc(kBytes));
  }).join();
  for (void* p : got) EXPECT_TRUE(freed.count(p) == 1) << p << " is not one of the freed blocks";
  for (void* p : got) cached_free(p, kBytes);
}

// Producer/consumer pairs pass blocks through a queue, as launches pass queued callables to a
// worker; the consumer checks the producer's pattern before freeing (a block handed out twice
// would be overwritten). Sanitizers check the rest.
TEST(BlockCache, CrossThreadFreesUnderLoadLoseAndShareNothing) {
  constexpr int kPairs = 2;
  constexpr int kPerProducer = 50000;
  std::vector<std::thread> threads;
  for (int pair = 0; pair < kPairs; ++pair) {
    threads.emplace_back([pair] {
      std::vector<unsigned char*> handoff;
      std::mutex mutex;
      bool done = false;
      std::thread consumer([&] {
        for (;;) {
          std::vector<unsigned char*> batch;
          {
            std::lock_guard lock(mutex);
            batch.swap(handoff);
            if (batch.empty() && done) return;
          }
          for (unsigned char* p : batch) {
            const unsigned char tag = p[0];
            for (std::size_t i = 1; i < 120; ++i) ASSERT_EQ(p[i], tag);
            cached_free(p, 120);
          }
        }
      });
      for (int i = 0; i < kPerProducer; ++i) {
        auto* p = static_cast<unsigned char*>(cached_alloc(120));
        std::memset(p, (i + pair) & 0xff, 120);
        std::lock_guard lock(mutex);
        handoff.push_back(p);
      }
      {
        std::lock_guard lock(mutex);
        done = true;
      }
      consumer.join();
    });
  }
  for (auto& t : threads) t.join();
}

// Over-aligned objects (a CpuStream's cache-line sections) through CachedAllocator: aligned as
// their type asks, writable over their whole size, distinct while alive, and freed to the block
// they came from (ASan in CI checks the frees against the allocations).
template <std::size_t kAlign, std::size_t kSize>
struct alignas(kAlign) Aligned {
  unsigned char bytes[kSize];
};

template <class T>
void check_over_aligned() {
  std::vector<std::shared_ptr<T>> live;
  std::set<const void*> seen;
  for (int i = 0; i < 200; ++i) {
    auto p = std::allocate_shared<T>(streamrt::detail::CachedAllocator<T>{});
    ASSERT_EQ(reinterpret_cast<std::uintptr_t>(p.get()) % alignof(T), 0u) << alignof(T);
    std::memset(p->bytes, i & 0xff, sizeof p->bytes);
    EXPECT_TRUE(seen.insert(p.get()).second);
    live.push_back(std::move(p));
  }
  for (std::size_t i = 0; i < live.size(); ++i) {
    const auto tag = static_cast<unsigned char>(i & 0xff);
    ASSERT_TRUE(std::all_of(live[i]->bytes, live[i]->bytes + sizeof live[i]->bytes,
                            [&](unsigned char b) { return b == tag; }));
  }
  // Freed on another thread, as a stream's last handle may be.
  std::thread([&] { live.clear(); }).join();
}

TEST(BlockCache, OverAlignedObjectsAreAlignedWritableAndDistinct) {
  check_over_aligned<Aligned<32, 40>>();
  check_over_aligned<Aligned<64, 64>>();
  check_over_aligned<Aligned<64, 448>>();   // with its gap, still a cached block
  check_over_aligned<Aligned<64, 1024>>();  // past the cache: operator new
  check_over_aligned<Aligned<128, 200>>();
  check_over_aligned<Aligned<4096, 100>>();
}

}  // namespace
