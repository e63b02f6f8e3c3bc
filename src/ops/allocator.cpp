// The stream-ordered caching allocator: size classes, free lists per class, the reuse rule of
// allocator.hpp, a bound on cached bytes, and the counters of memory_stats().
#include "allocator.hpp"

#include <pthread.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>

#include "core/capture_state.hpp"
#include "core/spin_mutex.hpp"
#include "streamrt/error.hpp"

namespace streamrt::ops {
namespace {

constexpr std::size_t kAlign = 64;
// Blocks this large are 2 MiB aligned and asked for transparent huge pages: one page fault per
// 2 MiB instead of 512 on first touch.
constexpr std::size_t kHugePage = std::size_t{2} << 20;
constexpr std::size_t kDefaultLimit = std::size_t{1} << 30;
// Free blocks of a class looked at per allocation (newest first, warmest in cache).
constexpr std::size_t kMaxScan = 16;

// Relaxed: a test switch read by allocations made after it is set; publishes nothing else.
std::atomic<bool> g_ordering{true};

struct FreeBlock {
  void* ptr;
  std::uint64_t owner;
  std::shared_ptr<impl::StreamImpl> busy_owner;  // null once the owner was seen idle
  std::vector<PendingUse> uses;
};

class CachingAllocator {
 public:
  CachingAllocator() {
    // A fork while another thread holds the mutex would leave it locked in the child, whose
    // first tensor would then hang (docs/reliability.md, G9): hold it across fork(). Nothing
    // under the mutex takes a stream lock (only lock-free queries), so the order with the CPU
    // backend's fork handlers cannot deadlock. Made at load time (make_caching_allocator).
    pthread_atfork(&lock_for_fork, &unlock_after_fork, &unlock_after_fork);
    if (const char* env = std::getenv("STREAMRT_CACHE_LIMIT"); env != nullptr) {
      try {
        limit_ = parse_size(env, "STREAMRT_CACHE_LIMIT");
      } catch (const Error& e) {
        env_error_ = e.what();
      }
    }
  }

  Block allocate(std::size_t nbytes, std::uint64_t stream_id) {
    const std::size_t capacity = size_class(nbytes);
    {
      std::lock_guard lock(mutex_);
      if (!env_error_.empty()) throw Error(env_error_);
      ++stats_.allocations;
      if (auto it = free_.find(capacity); it != free_.end()) {
        auto& list = it->second;
        const bool ordered = g_ordering.load(std::memory_order_relaxed);
        const std::size_t scan = std::min(list.size(), kMaxScan);
        for (std::size_t i = 0; i < scan; ++i) {
          const std::size_t at = list.size() - 1 - i;
          if (ordered && !usable_by(list[at], stream_id)) continue;
          void* p = list[at].ptr;
          // An emptied list stays in the map: the next free of this class then allocates
          // neither a map node nor a vector buffer.
          list.erase(list.begin() + static_cast<std::ptrdiff_t>(at));
          ++stats_.cache_hits;
          stats_.bytes_cached -= capacity;
          note_in_use(capacity);
          return Block{p, capacity};
        }
      }
    }
    void* p = fresh(capacity);
    if (p == nullptr) {
      empty();  // give back what no work still uses, then try once more
      p = fresh(capacity);
    }
    if (p == nullptr) {
      throw OutOfMemory(
          "out of memory allocating a tensor of " + std::to_string(nbytes) +
          " bytes (the cache held nothing more to release; memory_stats() shows use)");
    }
    std::lock_guard lock(mutex_);
    note_in_use(capacity);
    return Block{p, capacity};
  }

  void free(Block block, std::uint64_t owner, std::shared_ptr<impl::StreamImpl> busy_owner,
            std::vector<PendingUse> uses) noexcept {
    std::vector<void*> release;
    try {
      std::lock_guard lock(mutex_);
      stats_.bytes_in_use -= block.capacity;
      free_[block.capacity].push_back(
          FreeBlock{block.ptr, owner, std::move(busy_owner), std::move(uses)});
      stats_.bytes_cached += block.capacity;
      if (stats_.bytes_cached > limit_) trim_locked(limit_, release);
    } catch (...) {
      // Only the free-list insertion can throw (out of memory). Work may still use the block, so
      // it cannot go back to the OS now: it stays out of circulation (leaked) instead.
    }
    for (void* p : release) std::free(p);
  }

  MemoryStats stats() {
    std::lock_guard lock(mutex_);
    MemoryStats s = stats_;
    s.cache_limit = limit_;
    return s;
  }

  void empty() noexcept {
    std::vector<void*> release;
    {
      std::lock_guard lock(mutex_);
      trim_locked(0, release);
    }
    for (void* p : release) std::free(p);
  }

  void reset_peak() {
    std::lock_guard lock(mutex_);
    stats_.peak_bytes_in_use = stats_.bytes_in_use;
  }

  void set_limit(std::size_t bytes) {
    std::vector<void*> release;
    {
      std::lock_guard lock(mutex_);
      limit_ = bytes;
      env_error_.clear();  // an explicit setting replaces a bad environment value
      if (stats_.bytes_cached > limit_) trim_locked(limit_, release);
    }
    for (void* p : release) std::free(p);
  }

 private:
  static void lock_for_fork();
  static void unlock_after_fork();

  // The reuse rule: uses on `stream_id` itself are ordered before its later work; uses on other
  // streams must have completed.
  static bool usable_by(FreeBlock& b, std::uint64_t stream_id) {
    if (b.owner != stream_id && !owner_idle(b)) return false;
    for (const auto& u : b.uses) {
      if (u.stream_id != stream_id && !capture::query(*u.backend, u.position)) return false;
    }
    return true;
  }

  // True when nothing submitted to the owner so far is unfinished (forgets the owner then).
  static bool owner_idle(FreeBlock& b) {
    if (b.busy_owner && !b.busy_owner->backend().query_stream(*b.busy_owner)) return false;
    b.busy_owner.reset();
    return true;
  }

  static bool idle(FreeBlock& b) {
    return owner_idle(b) && std::all_of(b.uses.begin(), b.uses.end(), [](const PendingUse& u) {
             return capture::query(*u.backend, u.position);
           });
  }

  static void* fresh(std::size_t capacity) noexcept {
    void* p = nullptr;
    const std::size_t align = capacity >= kHugePage ? kHugePage : kAlign;
    if (posix_memalign(&p, align, capacity) != 0) return nullptr;
    if (capacity >= kHugePage) madvise(p, capacity, MADV_HUGEPAGE);  // a hint: failure is fine
    return p;
  }

  void note_in_use(std::size_t capacity) {
    stats_.bytes_in_use += capacity;
    stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
  }

  // Moves idle cached blocks, largest first, to `release` until at most `target` bytes stay.
  void trim_locked(std::size_t target, std::vector<void*>& release) {
    auto it = free_.end();
    while (it != free_.begin() && stats_.bytes_cached > target) {
      --it;
      auto& list = it->second;
      for (std::size_t i = 0; i < list.size() && stats_.bytes_cached > target;) {
        if (idle(list[i])) {
          release.push_back(list[i].ptr);
          list.erase(list.begin() + static_cast<std::ptrdiff_t>(i));
          stats_.bytes_cached -= it->first;
          ++stats_.releases;
        } else {
          ++i;
        }
      }
      if (list.empty()) it = free_.erase(it);  // the next --it reaches the next smaller class
    }
  }

  // Taken by the host for each new tensor and by the worker that drops a tensor's last
  // reference: a polling mutex keeps that hand-over off the futex.
  core::SpinMutex mutex_;
  std::map<std::size_t, std::vector<FreeBlock>> free_;  // by class bytes; guarded by mutex_
  MemoryStats stats_;                                   // guarded by mutex_
  std::size_t limit_ = kDefaultLimit;                   // guarded by mutex_
  std::string env_error_;                               // guarded by mutex_
};

// Leaked on purpose: storages may be freed during static destruction.
CachingAllocator& instance() {
  static auto* a = new CachingAllocator();
  return *a;
}

void CachingAllocator::lock_for_fork() {
  instance().mutex_.lock();
}

void CachingAllocator::unlock_after_fork() {
  instance().mutex_.unlock();
}

void check_cpu(const Device& device, const char* what) {
  if (device.type != DeviceType::CPU) {
    throw Error(std::string(what) + ": " + device.str() +
                " has no caching allocator in this build (CPU tensors only)");
  }
}

}  // namespace

void make_caching_allocator() {
  instance();
}

std::size_t size_class(std::size_t nbytes) noexcept {
  if (nbytes <= 512) return std::max(kAlign, (nbytes + kAlign - 1) / kAlign * kAlign);
  // Four classes per power of two: the top bit plus the two below it, rounded up.
  int top = 63;
  while (((nbytes - 1) >> top) == 0) --top;  // 2^top <= nbytes - 1 < 2^(top+1)
  const std::size_t step = std::size_t{1} << (top - 2);
  return (nbytes + step - 1) / step * step;
}

std::size_t parse_size(const std::string& text, const char* what) {
  auto bad = [&] {
    return Error(std::string(what) + "='" + text +
                 "' is not a size: use a byte count or a number with K, M or G (binary units), "
                 "e.g. 1073741824, 512M or 1G; 0 caches nothing");
  };
  std::size_t i = 0;
  std::size_t value = 0;
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0]))) throw bad();
  for (; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i) {
    const std::size_t digit = static_cast<std::size_t>(text[i] - '0');
    if (value > (SIZE_MAX - digit) / 10) throw bad();
    value = value * 10 + digit;
  }
  int shift = 0;
  if (i < text.size()) {
    switch (std::toupper(static_cast<unsigned char>(text[i]))) {
      case 'K':
        shift = 10;
        break;
      case 'M':
        shift = 20;
        break;
      case 'G':
        shift = 30;
        break;
      default:
        throw bad();
    }
    ++i;
    if (i < text.size() && (text[i] == 'i' || text[i] == 'I')) ++i;  // "MiB" style
    if (i < text.size() && (text[i] == 'b' || text[i] == 'B')) ++i;
  }
  if (i != text.size()) throw bad();
  if (shift > 0 && value > (SIZE_MAX >> shift)) throw bad();
  return value << shift;
}

Block allocate_block(std::size_t nbytes, std::uint64_t stream_id) {
  return instance().allocate(nbytes, stream_id);
}

void free_block(Block block, std::uint64_t owner, std::shared_ptr<impl::StreamImpl> busy_owner,
                std::vector<PendingUse> uses) noexcept {
  instance().free(block, owner, std::move(busy_owner), std::move(uses));
}

void set_stream_ordering_for_testing(bool on) noexcept {
  g_ordering.store(on, std::memory_order_relaxed);
}

}  // namespace streamrt::ops

namespace streamrt {

MemoryStats memory_stats(Device device) {
  ops::check_cpu(device, "memory_stats");
  return ops::instance().stats();
}

void empty_cache(Device device) {
  ops::check_cpu(device, "empty_cache");
  ops::instance().empty();
}

void reset_peak_memory_stats(Device device) {
  ops::check_cpu(device, "reset_peak_memory_stats");
  ops::instance().reset_peak();
}

void set_memory_cache_limit(std::size_t bytes, Device device) {
  ops::check_cpu(device, "set_memory_cache_limit");
  ops::instance().set_limit(bytes);
}

}  // namespace streamrt
