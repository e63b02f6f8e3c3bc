// Failed allocations on the calling thread, injected at every allocation of each host call: the
// call either throws std::bad_alloc or succeeds, and the runtime stays usable afterwards: nothing
// terminates, no queued work is lost, later work runs, counts add up. The executable replaces the
// global operator new (so it is an executable of its own): allocations of the thread that armed
// the injection fail from the k-th on, for k = 0, 1, 2, ... until the call needs no more.
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <functional>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "streamrt/streamrt.hpp"
#include "test_util.hpp"

namespace {

// Allocations of this thread left before they start failing; negative: none fails. Trivially
// destructible thread-locals of the executable (static TLS): reading them allocates nothing.
thread_local long tls_countdown = -1;
thread_local bool tls_hit = false;  // an allocation failed since the injection was armed

bool fail_now() noexcept {
  if (tls_countdown < 0) return false;
  if (tls_countdown > 0) {
    --tls_countdown;
    return false;
  }
  tls_hit = true;  // from here on every allocation of this thread fails, until disarmed
  return true;
}

}  // namespace

// malloc and its family, so that what the runtime takes from malloc directly (its block cache)
// fails too; glibc's own entry points do the work.
extern "C" {
void* __libc_malloc(std::size_t n);
void* __libc_calloc(std::size_t n, std::size_t size);
void* __libc_realloc(void* p, std::size_t n);
void* __libc_memalign(std::size_t align, std::size_t n);
void __libc_free(void* p);

void* malloc(std::size_t n) {
  if (fail_now()) {
    errno = ENOMEM;
    return nullptr;
  }
  return __libc_malloc(n);
}
void* calloc(std::size_t n, std::size_t size) {
  if (fail_now()) {
    errno = ENOMEM;
    return nullptr;
  }
  return __libc_calloc(n, size);
}
void* realloc(void* p, std::size_t n) {
  if (n != 0 && fail_now()) {
    errno = ENOMEM;
    return nullptr;
  }
  return __libc_realloc(p, n);
}
void* memalign(std::size_t align, std::size_t n) {
  if (fail_now()) {
    errno = ENOMEM;
    return nullptr;
  }
  return __libc_memalign(align, n);
}
void* aligned_alloc(std::size_t align, std::size_t n) {
  return memalign(align, n);
}
int posix_memalign(void** out, std::size_t align, std::size_t n) {
  void* p = memalign(align, n);
  if (p == nullptr) return ENOMEM;
  *out = p;
  return 0;
}
void free(void* p) {
  __libc_free(p);
}
}

namespace {

void* allocate(std::size_t n, std::size_t align) {
  n = n == 0 ? 1 : n;
  void* p = align <= alignof(std::max_align_t) ? malloc(n) : memalign(align, n);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

}  // namespace

void* operator new(std::size_t n) {
  return allocate(n, alignof(std::max_align_t));
}
void* operator new[](std::size_t n) {
  return allocate(n, alignof(std::max_align_t));
}
void* operator new(std::size_t n, std::align_val_t a) {
  return allocate(n, static_cast<std::size_t>(a));
}
void* operator new[](std::size_t n, std::align_val_t a) {
  return allocate(n, static_cast<std::size_t>(a));
}
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return allocate(n, alignof(std::max_align_t));
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return allocate(n, alignof(std::max_align_t));
  } catch (...) {
    return nullptr;
  }
}
void operator delete(void* p) noexcept {
  free(p);
}
void operator delete[](void* p) noexcept {
  free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
  free(p);
}
void operator delete(void* p, std::align_val_t) noexcept {
  free(p);
}
void operator delete[](void* p, std::align_val_t) noexcept {
  free(p);
}
void operator delete(void* p, std::size_t, std::align_val_t) noexcept {
  free(p);
}
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept {
  free(p);
}

namespace {

using streamrt_test::kTimeout;

// Arms the injection for a scope: this thread's allocations fail from the `k`-th on.
class FailFrom {
 public:
  explicit FailFrom(long k) {
    tls_hit = false;
    tls_countdown = k;
  }
  ~FailFrom() { tls_countdown = -1; }
  FailFrom(const FailFrom&) = delete;
  FailFrom& operator=(const FailFrom&) = delete;
  static bool hit() noexcept { return tls_hit; }
};

struct Counter {
  std::atomic<int> runs{0};
};

// What a call under test gets: a stream with queued work behind a gate, so that every call meets
// a busy stream (the queue, the drainer hand-over, cancel's range) rather than an idle one.
struct Scene {
  streamrt::Stream s;
  streamrt::Stream other;
  std::shared_ptr<Counter> counter = std::make_shared<Counter>();
  std::shared_ptr<std::atomic<bool>> open = std::make_shared<std::atomic<bool>>(false);
  int queued = 0;  // counting items launched before the call that must run (unless cancelled)
  int extra = 0;   // counting items the call queued; set by the call once it returns them

  Scene() {
    s.set_host_run(true);
    auto gate = open;
    s.launch([gate] {
      while (!gate->load(std::memory_order_acquire)) std::this_thread::yield();
    });
    auto c = counter;
    for (int i = 0; i < 4; ++i) s.launch([c] { c->runs.fetch_add(1); });
    queued = 4;
  }
  void release() { open->store(true, std::memory_order_release); }
};

// Runs `call` with allocations failing from the k-th on, for every k until one run needs fewer
// allocations than k; after each, checks that the runtime recovers: the stream (with or without
// a failure to report) finishes everything queued, then runs new work.
// Returns how many failure points were tried.
long check_every_failure_point(const char* what, const std::function<void(Scene&)>& call,
                               bool releases_itself = false) {
  for (long k = 0;; ++k) {
    SCOPED_TRACE(std::string(what) + ", allocation " + std::to_string(k) + " fails");
    Scene scene;
    bool threw = false;
    bool hit = false;
    {
      FailFrom fail(k);
      if (!releases_itself) scene.release();
      try {
        call(scene);
      } catch (const std::bad_alloc&) {
        threw = true;
      }
      hit = FailFrom::hit();
    }
    scene.release();
    // An injected failure either surfaced as bad_alloc or was absorbed; never anything else.
    if (threw) {
      EXPECT_TRUE(hit);
    }
    try {
      scene.s.synchronize();
    } catch (const std::bad_alloc&) {
      // A queued item or the call itself recorded the failed allocation: reported once.
    } catch (const streamrt::Cancelled&) {
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "boom");  // a failure the call queued and did not get to report
    }
    scene.s.synchronize();  // nothing left to report now
    // Nothing lost, nothing run twice, nothing of a call that threw left behind.
    EXPECT_TRUE(streamrt_test::eventually([&] {
      return scene.counter->runs.load() == scene.queued + scene.extra;
    })) << scene.counter->runs.load()
        << " runs, expected " << scene.queued + scene.extra;
    auto ran = std::make_shared<std::atomic<bool>>(false);
    scene.s.launch([ran] { ran->store(true); });
    EXPECT_TRUE(scene.s.synchronize_for(kTimeout));
    EXPECT_TRUE(ran->load());
    EXPECT_EQ(scene.s.pending(), 0u);
    if (!hit) return k;  // the call needed fewer than k allocations: every point was covered
    if (k >= 10000) {
      ADD_FAILURE() << "the call never stops allocating";
      return k;
    }
  }
}

TEST(AllocationFailure, LaunchOfASmallItem) {
  check_every_failure_point("launch (inline callable)", [](Scene& sc) {
    auto c = sc.counter;
    sc.s.launch([c] { c->runs.fetch_add(1); });
    sc.extra = 1;
  });
}

TEST(AllocationFailure, LaunchOfALargeItem) {
  check_every_failure_point("launch (heap callable)", [](Scene& sc) {
    auto c = sc.counter;
    std::vector<int> payload(64, 1);
    sc.s.launch([c, payload] { c->runs.fetch_add(payload[0]); });
    sc.extra = 1;
  });
}

TEST(AllocationFailure, RecordAndWaitAcrossStreams) {
  // A timing event and a cross-stream wait allocate: there are points to fail at.
  EXPECT_GT(check_every_failure_point("record + wait_event",
                                      [](Scene& sc) {
                                        streamrt::Event e({.enable_timing = true});
                                        e.record(sc.s);
                                        sc.other.wait_event(e);
                                        sc.other.synchronize();
                                      }),
            0);
}

TEST(AllocationFailure, SynchronizeThatRunsQueuedWork) {
  // The stream is still held by its gate when the call starts: the host helps run the items.
  check_every_failure_point(
      "synchronize",
      [](Scene& sc) {
        sc.release();
        sc.s.synchronize();
      },
      true);
}

TEST(AllocationFailure, SynchronizeThatReportsAFailure) {
  EXPECT_GT(check_every_failure_point("synchronize reporting a failure",
                                      [](Scene& sc) {
                                        sc.s.launch([] { throw std::runtime_error("boom"); });
                                        try {
                                          sc.s.synchronize();
                                        } catch (const std::runtime_error&) {
                                        }
                                      }),
            0);
}

TEST(AllocationFailure, Cancel) {
  EXPECT_GT(check_every_failure_point(
                "cancel",
                [](Scene& sc) {
                  sc.s.cancel();
                  sc.queued = 0;
                },
                true),
            0);
}

TEST(AllocationFailure, CompletionCallback) {
  EXPECT_GT(
      check_every_failure_point("on_complete",
                                [](Scene& sc) {
                                  auto e = sc.s.record_event();
                                  auto c = sc.counter;
                                  e.on_complete([c](std::exception_ptr) { c->runs.fetch_add(1); });
                                  sc.extra = 1;
                                  e.synchronize();
                                }),
      0);
}

TEST(AllocationFailure, DeviceSynchronize) {
  check_every_failure_point("streamrt::synchronize", [](Scene&) { streamrt::synchronize(); });
}

}  // namespace

// A thread's first launch and first wait set up its per-thread state (block cache lists, the
// current-stream table, its parker): with memory exhausted from its start, it gets bad_alloc, never
// a process abort, and the same thread works once memory is back.
TEST(AllocationFailure, FirstUseOnAFreshThread) {
  streamrt::Stream s;
  for (long k = 0;; ++k) {
    SCOPED_TRACE("allocation " + std::to_string(k) + " of a fresh thread fails");
    bool hit = false;
    bool recovered = false;
    std::thread t([&] {
      {
        FailFrom fail(k);
        try {
          s.launch([] {});
          s.synchronize();
          streamrt::Stream mine;
          mine.launch([] {});
          mine.synchronize();
        } catch (const std::bad_alloc&) {
        }
        hit = FailFrom::hit();
      }
      auto ran = std::make_shared<std::atomic<bool>>(false);
      s.launch([ran] { ran->store(true); });
      s.synchronize();
      recovered = ran->load();
    });
    t.join();
    EXPECT_TRUE(recovered);
    if (!hit) break;
    ASSERT_LT(k, 10000);
  }
}
