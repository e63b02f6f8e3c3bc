// The outputs of stream work are allocated by the host at the op's call and most often freed by a
// worker, when the work that last held them finishes. Through glibc's malloc that pattern leaves
// holes in the host's heap that never go back to the system (freed in completion order while the
// host allocates the next ones) and costs the host the arena lock, consolidations and fresh pages
// at every op. Here freed blocks are kept by rounded size and handed out again newest first
// (warm in cache, pages already mapped), up to a byte limit past which the oldest kept blocks go
// back to the system. A block is free only once its last tensor died: work holds the tensors it
// uses until it finishes, so no queued work can still touch a kept block.
// Large blocks are mapped directly, so that freeing one always returns its pages; each block
// starts with a header (its size, its holders and its links in the two lists) before the 64-byte
// aligned data. A block can have two holders: the storage it was allocated for, and a later output
// of the same stream handed that memory while the first is queued (torch_output_reuse.cpp).
#include "torch_output_cache.hpp"

#include <ATen/EmptyTensor.h>
#include <pthread.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <unordered_map>
#include <utility>

#include "torch_runner_internal.hpp"
#include "torch_spin_lock.hpp"

namespace streamrt::python::torch_runner {
namespace {

constexpr std::size_t kAlign = 64;         // c10's CPU allocator's alignment
constexpr std::size_t kHeader = kAlign;    // the header, keeping the data aligned
constexpr std::size_t kMapAt = 256 << 10;  // blocks from here on are mapped directly
constexpr std::size_t kPage = 4096;
constexpr std::size_t kDefaultLimit = std::size_t{128} << 20;

// A block's header, before its data. While the block is kept: in its size's list and in the list
// of every kept block, both newest first.
struct Header {
  std::size_t size;                    // the block's bytes, header included
  std::atomic<std::uint32_t> holders;  // storages on it (DataPtrs); kept or freed at zero
  Header* size_prev;
  Header* size_next;
  Header* age_prev;  // newer
  Header* age_next;  // older
};
static_assert(sizeof(Header) <= kHeader);

// The rounded block size for `n` data bytes: four sizes per doubling, so that a block wastes at
// most a quarter and a loop's allocations of one size always find each other's blocks.
std::size_t block_size(std::size_t n) noexcept {
  std::size_t total = n + kHeader;
  // (the highest power of two in `total`; torch 1.x builds this file as C++17: no <bit>)
  const std::size_t top = std::size_t{1} << (63 - __builtin_clzll(total));
  const std::size_t step = std::max(kAlign, top / 4);
  total = (total + step - 1) / step * step;
  return total >= kMapAt ? (total + kPage - 1) / kPage * kPage : total;
}

Header* new_block(std::size_t size) noexcept {
  void* p = nullptr;
  if (size >= kMapAt) {
    p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return nullptr;
  } else {
    p = std::aligned_alloc(kAlign, size);
    if (p == nullptr) return nullptr;
  }
  return new (p) Header{size, {1}, nullptr, nullptr, nullptr, nullptr};
}

void free_block(Header* h) noexcept {
  if (h->size >= kMapAt) {
    munmap(h, h->size);
  } else {
    std::free(h);
  }
}

// Freed blocks by size, handed out newest first; past the limit the oldest kept blocks (of any
// size) go back first, so that a program whose sizes changed keeps the sizes it uses now.
class Cache {
 public:
  Header* take(std::size_t size) noexcept {
    {
      const std::lock_guard lock(mutex_);
      const auto it = by_size_.find(size);
      if (it != by_size_.end() && it->second != nullptr) {
        Header* h = it->second;
        unlink(h, it->second);
        ++hits_;
        // (no other thread can see a kept block: its last holder gave it up before `give`)
        h->holders.store(1, std::memory_order_relaxed);
        return h;
      }
      ++misses_;
    }
    return new_block(size);
  }

  void give(Header* h) noexcept {
    Header* evicted = nullptr;
    {
      const std::lock_guard lock(mutex_);
      if (h->size <= limit_) {
        try {
          push(h, by_size_[h->size]);
          evicted = evict_over(limit_);
          h = nullptr;
        } catch (...) {  // (no memory for the size's entry: the block goes back instead)
        }
      }
    }
    if (h != nullptr) free_block(h);
    free_all(evicted);
  }

  void set_limit(std::size_t bytes) noexcept {
    Header* evicted = nullptr;
    {
      const std::lock_guard lock(mutex_);
      limit_ = bytes;
      evicted = evict_over(limit_);
    }
    free_all(evicted);
  }

  void empty() noexcept {
    Header* evicted = nullptr;
    {
      const std::lock_guard lock(mutex_);
      evicted = evict_over(0);
    }
    free_all(evicted);
  }

  void count_reuse() noexcept {
    const std::lock_guard lock(mutex_);
    ++reused_;
  }

  OutputCacheStats stats() noexcept {
    const std::lock_guard lock(mutex_);
    return {cached_, limit_, hits_, misses_, reused_};
  }

  // fork(): the child starts with nothing kept and a free lock, whatever another thread of the
  // parent was doing with them (the parent's kept blocks are left, not freed). Taking the lock
  // before the fork instead could wait on a worker that waits for the lock, since streamrt's own
  // handler waits for the queued work first.
  void reset_in_child() noexcept {
    new (&by_size_) std::unordered_map<std::size_t, Header*>();
    newest_ = oldest_ = nullptr;
    cached_ = 0;
    mutex_.reset_in_child();
  }

 private:
  // Keeps `h` as the newest block of its size (`head`) and of all.
  void push(Header* h, Header*& head) noexcept {
    h->size_prev = nullptr;
    h->size_next = head;
    if (head != nullptr) head->size_prev = h;
    head = h;
    h->age_prev = nullptr;
    h->age_next = newest_;
    if (newest_ != nullptr) newest_->age_prev = h;
    newest_ = h;
    if (oldest_ == nullptr) oldest_ = h;
    cached_ += h->size;
  }

  // Takes `h` out of both lists (`head`: its size's).
  void unlink(Header* h, Header*& head) noexcept {
    (h->size_prev != nullptr ? h->size_prev->size_next : head) = h->size_next;
    if (h->size_next != nullptr) h->size_next->size_prev = h->size_prev;
    (h->age_prev != nullptr ? h->age_prev->age_next : newest_) = h->age_next;
    (h->age_next != nullptr ? h->age_next->age_prev : oldest_) = h->age_prev;
    cached_ -= h->size;
  }

  // Takes the oldest kept blocks out until at most `keep` bytes are kept; returns them linked
  // through size_next, to be freed outside the lock.
  Header* evict_over(std::size_t keep) noexcept {
    Header* evicted = nullptr;
    while (cached_ > keep) {
      Header* h = oldest_;
      unlink(h, by_size_.find(h->size)->second);
      h->size_next = evicted;
      evicted = h;
    }
    return evicted;
  }

  static void free_all(Header* h) noexcept {
    while (h != nullptr) {
      Header* next = h->size_next;
      free_block(h);
      h = next;
    }
  }

  SpinLock mutex_;
  std::unordered_map<std::size_t, Header*> by_size_;  // each size's newest kept block
  Header* newest_ = nullptr;
  Header* oldest_ = nullptr;
  std::size_t cached_ = 0;
  std::size_t limit_ = kDefaultLimit;
  std::uint64_t hits_ = 0;
  std::uint64_t misses_ = 0;
  std::uint64_t reused_ = 0;
};

Cache& cache() noexcept {
  // Leaked: tensors freed during interpreter exit still return their blocks.
  static Cache* const c = [] {
    auto* made = new Cache;
    pthread_atfork(nullptr, nullptr, [] { cache().reset_in_child(); });
    return made;
  }();
  return *c;
}

void release(void* ctx) noexcept {
  auto* h = static_cast<Header*>(ctx);
  // acq_rel: the last holder's `give` must see every other holder's writes to the block done.
  if (h->holders.fetch_sub(1, std::memory_order_acq_rel) == 1) cache().give(h);
}

// A block handed to the next allocation of this thread (output_on_block), already held for it.
thread_local Header* tls_handed = nullptr;

void delete_nothing(void*) noexcept {}

std::atomic<bool> g_use_cache{true};

// No `override`: allocate() is const in torch 1.x and not in 2.x, and copy_data() is 2.x's only;
// each declaration below overrides where its base has it.
class OutputAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(std::size_t n) const { return make(n); }
  c10::DataPtr allocate(std::size_t n) { return make(n); }  // NOLINT(*-overloaded-virtual)
  void copy_data(void* dest, const void* src, std::size_t count) const {
    std::memcpy(dest, src, count);
  }

 private:
  static c10::DataPtr make(std::size_t n) {
    const c10::Device cpu(c10::DeviceType::CPU);
    if (n == 0) return {nullptr, nullptr, &delete_nothing, cpu};
    Header* h = std::exchange(tls_handed, nullptr);
    if (h != nullptr && h->size != block_size(n)) {
      release(h);  // (not the size it was handed for: its caller matched the sizes already)
      h = nullptr;
    }
    if (h == nullptr) h = cache().take(block_size(n));
    TORCH_CHECK(h != nullptr, "streamrt.torch: out of memory allocating ", n,
                " bytes for an op's output");
    return {reinterpret_cast<char*>(h) + kHeader, h, &release, cpu};
  }
};

}  // namespace

c10::Allocator* output_allocator() noexcept {
  static OutputAllocator allocator;
  return &allocator;
}

at::Tensor empty_output(at::IntArrayRef sizes, at::IntArrayRef strides, at::ScalarType dtype) {
  // (a switch for measurements only: no order needed)
  if (!g_use_cache.load(std::memory_order_relaxed))
    return at::detail::empty_strided_cpu(sizes, strides, dtype);
  static const c10::DispatchKeySet cpu(c10::DispatchKey::CPU);
  return at::detail::empty_strided_generic(sizes, strides, output_allocator(), cpu, dtype);
}

std::size_t output_block_size(std::size_t nbytes) noexcept {
  return block_size(nbytes);
}

void* reusable_block(const c10::Storage& storage) noexcept {
  const c10::DataPtr& d = storage.data_ptr();
  if (d.get_deleter() != &release) return nullptr;
  auto* h = static_cast<Header*>(d.get_context());
  return h->size >= kReusableBlock ? h : nullptr;
}

std::size_t block_bytes(const void* block) noexcept {
  return static_cast<const Header*>(block)->size;
}

void* output_block(const c10::Storage& storage) noexcept {
  const c10::DataPtr& d = storage.data_ptr();
  return d.get_deleter() == &release ? d.get_context() : nullptr;
}

c10::DataPtr block_data_ptr(void* block, c10::DeleterFnPtr deleter) noexcept {
  hold_block(block);
  void* data = static_cast<char*>(block) + kHeader;
  return {data, data, deleter, c10::Device(c10::DeviceType::CPU)};
}

void release_block_data(void* data) noexcept {
  release(static_cast<char*>(data) - kHeader);
}

void hold_block(void* block) noexcept {
  // Relaxed: the caller's holder keeps the block alive meanwhile (as a shared_ptr copy).
  static_cast<Header*>(block)->holders.fetch_add(1, std::memory_order_relaxed);
}

at::Tensor output_on_block(void* block, at::IntArrayRef sizes, at::IntArrayRef strides,
                           at::ScalarType dtype) {
  cache().count_reuse();
  tls_handed = static_cast<Header*>(block);
  at::Tensor t;
  try {
    static const c10::DispatchKeySet cpu(c10::DispatchKey::CPU);
    t = at::detail::empty_strided_generic(sizes, strides, output_allocator(), cpu, dtype);
  } catch (...) {
    if (Header* h = std::exchange(tls_handed, nullptr)) release(h);
    throw;
  }
  if (Header* h = std::exchange(tls_handed, nullptr)) release(h);  // (an empty tensor)
  return t;
}

bool output_cache_on() noexcept {
  return g_use_cache.load(std::memory_order_relaxed);
}

void use_output_cache(bool on) noexcept {
  g_use_cache.store(on, std::memory_order_relaxed);
}

void set_output_cache_limit(std::size_t bytes) noexcept {
  cache().set_limit(bytes);
}

void empty_output_cache() noexcept {
  cache().empty();
}

OutputCacheStats output_cache_stats() noexcept {
  return cache().stats();
}

}  // namespace streamrt::python::torch_runner
