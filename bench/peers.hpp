#pragma once
//! \file peers.hpp
//! The systems streamrt is compared with, each behind the same small duck-typed interface so that
//! one benchmark template measures every peer with the same code:
//!
//!   Stream make_stream();                         // a new in-order queue
//!   void launch(Stream&, F&& fn);                 // enqueue fn() in order; returns at once
//!   void sync(Stream&);                           // host blocks until the stream's work is done
//!   Event record(Stream&);                        // a marker at the current end of the stream
//!   bool query(const Event&);                     // marker reached? never blocks
//!   void wait(const Event&);                      // host blocks until the marker is reached
//!   void wait_event(Stream&, const Event&);       // later work on the stream waits for the marker
//!
//! Each peer is built on its own real library (found by CMake; a missing one is compiled out and
//! reported as skipped by the front-ends). Peers without a native event use a flag set by a
//! marker item; peers without a native stream-side wait block the thread that runs the stream's
//! waiting item (that is the only way to express it with those libraries). All peers use as many
//! worker threads as the machine has hardware threads, like streamrt.
//! Not thread-safe: one benchmark thread drives a peer at a time.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "streamrt/streamrt.hpp"

#ifdef STREAMRT_BENCH_HAVE_TBB
#include <tbb/concurrent_queue.h>
#include <tbb/global_control.h>
#include <tbb/task_arena.h>
#include <tbb/task_group.h>
#include <tbb/version.h>
#endif
#ifdef STREAMRT_BENCH_HAVE_ASIO
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/version.hpp>
#endif
#ifdef STREAMRT_BENCH_HAVE_OPENCL
#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 300
#endif
#include <CL/cl.h>
#endif

namespace streamrt_bench {

//! Nanoseconds on the monotonic clock (the clock streamrt's events use). Thread-safe.
inline std::int64_t now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

//! A pause for spin loops. Never blocks.
inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

//! Hardware threads of the machine (>= 1). Thread-safe.
inline int hardware_threads() noexcept {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

//! How long every host-side wait of a flag-based peer spins before it sleeps: the same 20 us as
//! streamrt's host waits, so the comparison is about scheduling, not about the wait policy.
inline constexpr std::int64_t kHostSpinNs = 20'000;

//! What the front-ends ask of a peer, with the usual answers; a peer states only where it differs.
struct PeerTraits {
  static constexpr bool kInOrder = true;        //!< launches on one stream run in order
  static constexpr bool kHasEvents = true;      //!< record/query/wait/wait_event exist
  static constexpr bool kHasCallbacks = false;  //!< completion callbacks exist
  //! One OS thread per queued item: the front-ends cap how many items may be outstanding.
  static constexpr bool kThreadPerItem = false;
};

//! A one-shot completion flag (the "event" of peers without a native one). Thread-safe.
struct Flag {
  //! 0 until set; C++20 atomic wait/notify (a futex on Linux) for sleeping waiters.
  std::atomic<std::uint32_t> done{0};

  //! Marks complete and wakes sleepers. Release: a waiter that sees it sees the work before it.
  void set() noexcept {
    done.store(1, std::memory_order_release);
    done.notify_all();
  }
  //! True once set. Never blocks.
  bool is_set() const noexcept { return done.load(std::memory_order_acquire) != 0; }
  //! Spins up to kHostSpinNs, then sleeps until set. Blocks.
  void wait() const noexcept {
    const auto until = now_ns() + kHostSpinNs;
    for (unsigned i = 1; !is_set(); ++i) {
      if (i % 64 == 0 && now_ns() >= until) {
        while (!is_set()) done.wait(0, std::memory_order_acquire);
        return;
      }
      cpu_relax();
    }
  }
};

//! Shared handle of a Flag (what flag-based peers return from record()).
using FlagEvent = std::shared_ptr<Flag>;

//! The events of a peer without native ones, written once: record() launches an item that sets a
//! Flag, and a stream-side wait is an item that blocks the thread running the stream until the
//! flag is set. `Peer` (CRTP) provides launch(Stream&, F&&).
template <class Peer>
class FlagEvents : public PeerTraits {
 public:
  using Event = FlagEvent;

  //! Blocks until the work submitted to the stream so far has run.
  template <class Stream>
  void sync(Stream& s) {
    wait(record(s));
  }
  //! A marker at the current end of the stream. Returns at once.
  template <class Stream>
  Event record(Stream& s) {
    auto f = std::make_shared<Flag>();
    static_cast<Peer&>(*this).launch(s, [f] { f->set(); });
    return f;
  }
  //! True once the marker is reached. Never blocks.
  bool query(const Event& e) { return e->is_set(); }
  //! Blocks until the marker is reached.
  void wait(const Event& e) { e->wait(); }
  //! Later work on the stream waits for the marker. Returns at once.
  template <class Stream>
  void wait_event(Stream& s, const Event& e) {
    static_cast<Peer&>(*this).launch(s, [e] { e->wait(); });
  }
  //! Worker threads the peer uses.
  int workers() const { return hardware_threads(); }
};

// ------------------------------------------------------------------------------------------------
//! streamrt itself, through its public API only.
class StreamrtPeer : public PeerTraits {
 public:
  //! Display name and short id (used in filters, JSON and plots).
  static constexpr const char* kName = "streamrt";
  static constexpr const char* kId = "streamrt";
  //! In-order streams, events and completion callbacks.
  static constexpr bool kHasCallbacks = true;
  using Stream = streamrt::Stream;
  using Event = streamrt::Event;

  //! A new stream.
  Stream make_stream() { return Stream(); }
  //! Stream::launch.
  template <class F>
  void launch(Stream& s, F&& fn) {
    s.launch(std::forward<F>(fn));
  }
  //! Stream::synchronize. Blocks.
  void sync(Stream& s) { s.synchronize(); }
  //! Stream::record_event.
  Event record(Stream& s) { return s.record_event(); }
  //! Event::query. Never blocks.
  bool query(const Event& e) { return e.query(); }
  //! Event::synchronize. Blocks.
  void wait(const Event& e) { e.synchronize(); }
  //! Stream::wait_event. Returns at once.
  void wait_event(Stream& s, const Event& e) { s.wait_event(e); }
  //! Event::on_complete: `fn()` runs on a runtime thread once `e` completes.
  template <class F>
  void on_complete(const Event& e, F fn) {
    e.on_complete([fn = std::move(fn)](const std::exception_ptr&) mutable { fn(); });
  }
  //! Worker threads used.
  int workers() const { return streamrt::cpu::num_threads(); }
  //! Version text.
  static std::string version() { return "in-tree"; }
};

// ------------------------------------------------------------------------------------------------
//! std::async + std::future: every item is a new thread (std::launch::async) that first waits for
//! the previous item of its stream (and for events the stream was told to wait on).
class AsyncPeer : public PeerTraits {
 public:
  static constexpr const char* kName = "std::async";
  static constexpr const char* kId = "async";
  static constexpr bool kThreadPerItem = true;

  //! The last item's future, and events the next item must wait for.
  struct Stream {
    std::shared_future<void> last;
    std::vector<std::shared_future<void>> deps;
  };
  //! An event is the future of the item it follows (a ready one on an empty stream).
  using Event = std::shared_future<void>;

  //! A new stream. Never blocks long.
  Stream make_stream() { return Stream{}; }
  //! Enqueues fn() in stream order. Returns at once.
  template <class F>
  void launch(Stream& s, F&& fn) {
    s.last = std::async(std::launch::async, [prev = std::move(s.last), deps = std::move(s.deps),
                                             fn = std::forward<F>(fn)]() mutable {
               if (prev.valid()) prev.wait();
               for (auto& d : deps) d.wait();
               // Drop the predecessors here: a chain of futures released at once
               // would join (and recurse through) every thread of the chain.
               prev = {};
               deps.clear();
               fn();
             }).share();
    s.deps.clear();
  }
  //! Blocks until the work submitted to the stream so far has run.
  void sync(Stream& s) {
    if (s.last.valid()) s.last.wait();
  }
  //! A marker at the current end of the stream. Returns at once.
  Event record(Stream& s) {
    if (s.last.valid()) return s.last;
    std::promise<void> p;
    p.set_value();
    return p.get_future().share();
  }
  //! True once the marker is reached. Never blocks.
  bool query(const Event& e) {
    return e.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
  }
  //! Blocks until the marker is reached.
  void wait(const Event& e) { e.wait(); }
  //! Later work on the stream waits for the marker. Returns at once.
  void wait_event(Stream& s, const Event& e) { s.deps.push_back(e); }
  //! Worker threads the peer uses.
  int workers() const { return hardware_threads(); }
  //! Library version text.
  static std::string version() { return "libstdc++ " + std::to_string(__GLIBCXX__); }
};

// ------------------------------------------------------------------------------------------------
//! The naive design: one std::thread per stream, a mutex + condition_variable queue of
//! std::function, a notify per launch.
class ThreadQueuePeer : public FlagEvents<ThreadQueuePeer> {
 public:
  static constexpr const char* kName = "thread+queue";
  static constexpr const char* kId = "thread_queue";

  //! One thread and its queue; the destructor drains the queue and joins.
  class Worker {
   public:
    Worker() : thread_([this] { main(); }) {}
    ~Worker() {
      {
        std::lock_guard lock(mutex_);
        stop_ = true;
      }
      cv_.notify_one();
      thread_.join();
    }
    Worker(const Worker&) = delete;
    Worker& operator=(const Worker&) = delete;
    void push(std::function<void()> fn) {
      {
        std::lock_guard lock(mutex_);
        queue_.push_back(std::move(fn));
      }
      cv_.notify_one();
    }

   private:
    void main() {
      for (;;) {
        std::function<void()> fn;
        {
          std::unique_lock lock(mutex_);
          cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
          if (queue_.empty()) return;  // stop_ and drained
          fn = std::move(queue_.front());
          queue_.pop_front();
        }
        fn();
      }
    }
    std::mutex mutex_;
    std::condition_variable cv_;
    std::deque<std::function<void()>> queue_;
    bool stop_ = false;
    std::thread thread_;  // last: starts after the members above exist
  };
  using Stream = std::shared_ptr<Worker>;

  //! A new stream. Never blocks long.
  Stream make_stream() { return std::make_shared<Worker>(); }
  //! Enqueues fn() in stream order. Returns at once.
  template <class F>
  void launch(Stream& s, F&& fn) {
    s->push(std::forward<F>(fn));
  }
  //! Library version text.
  static std::string version() { return "libstdc++ " + std::to_string(__GLIBCXX__); }
};

#ifdef STREAMRT_BENCH_HAVE_TBB
//! oneTBB allows hardware_threads() - 1 workers by default (one slot is kept for a master
//! thread). An arena fed only by enqueue() would then run on one thread: allow one worker per
//! hardware thread while a TBB peer lives.
inline std::shared_ptr<tbb::global_control> tbb_worker_limit() {
  static std::weak_ptr<tbb::global_control> shared;
  static std::mutex mutex;
  std::lock_guard lock(mutex);
  auto gc = shared.lock();
  if (!gc) {
    gc = std::make_shared<tbb::global_control>(tbb::global_control::max_allowed_parallelism,
                                               static_cast<std::size_t>(hardware_threads() + 1));
    shared = gc;
  }
  return gc;
}

//! oneTBB task_group: unordered tasks, host wait() helps run them. No order, no events: the
//! front-ends use it only where order does not matter.
class TbbGroupPeer : public PeerTraits {
 public:
  static constexpr const char* kName = "tbb::task_group";
  static constexpr const char* kId = "tbb_group";
  static constexpr bool kInOrder = false;
  static constexpr bool kHasEvents = false;
  using Stream = std::unique_ptr<tbb::task_group>;
  struct Event {};

  //! A new stream. Never blocks long.
  Stream make_stream() { return std::make_unique<tbb::task_group>(); }
  //! Enqueues fn() in stream order. Returns at once.
  template <class F>
  void launch(Stream& s, F&& fn) {
    s->run(std::forward<F>(fn));
  }
  //! Blocks until the work submitted to the stream so far has run.
  void sync(Stream& s) { s->wait(); }
  //! Worker threads the peer uses.
  int workers() const { return hardware_threads(); }
  //! Library version text.
  static std::string version() { return TBB_runtime_version(); }

 private:
  std::shared_ptr<tbb::global_control> limit_ = tbb_worker_limit();
};

//! An in-order strand on a oneTBB task_arena: a concurrent_queue of std::function per stream and
//! a pending counter; the launch that finds the strand idle enqueues one drain task into the
//! arena, which runs items until the counter drops to zero.
class TbbStrandPeer : public FlagEvents<TbbStrandPeer> {
 public:
  static constexpr const char* kName = "tbb strand";
  static constexpr const char* kId = "tbb_strand";

  struct State {
    tbb::concurrent_queue<std::function<void()>> queue;
    std::atomic<std::int64_t> pending{0};
  };
  using Stream = std::shared_ptr<State>;

  //! A new stream. Never blocks long.
  Stream make_stream() { return std::make_shared<State>(); }
  //! Enqueues fn() in stream order. Returns at once.
  template <class F>
  void launch(Stream& s, F&& fn) {
    s->queue.push(std::function<void()>(std::forward<F>(fn)));
    // acq_rel: the drain that sees the count also sees the pushed item (pushed before it).
    if (s->pending.fetch_add(1, std::memory_order_acq_rel) == 0) {
      arena_.enqueue([st = s] { drain(*st); });
    }
  }
  //! Library version text.
  static std::string version() { return TBB_runtime_version(); }

 private:
  static void drain(State& st) {
    do {
      std::function<void()> fn;
      while (!st.queue.try_pop(fn)) cpu_relax();  // counted, so it is there or about to be
      fn();
    } while (st.pending.fetch_sub(1, std::memory_order_acq_rel) != 1);
  }
  std::shared_ptr<tbb::global_control> limit_ = tbb_worker_limit();
  // No slot reserved for a master: the host never joins, every slot is for workers.
  tbb::task_arena arena_{hardware_threads(), 0};
};
#endif  // STREAMRT_BENCH_HAVE_TBB

#ifdef STREAMRT_BENCH_HAVE_ASIO
//! Boost.Asio: a strand per stream on one asio::thread_pool.
class AsioStrandPeer : public FlagEvents<AsioStrandPeer> {
 public:
  static constexpr const char* kName = "asio strand";
  static constexpr const char* kId = "asio_strand";
  using Stream = boost::asio::strand<boost::asio::thread_pool::executor_type>;

  AsioStrandPeer() : pool_(static_cast<std::size_t>(hardware_threads())) {}
  ~AsioStrandPeer() { pool_.join(); }
  AsioStrandPeer(const AsioStrandPeer&) = delete;
  AsioStrandPeer& operator=(const AsioStrandPeer&) = delete;

  //! A new stream. Never blocks long.
  Stream make_stream() { return boost::asio::make_strand(pool_.get_executor()); }
  //! Enqueues fn() in stream order. Returns at once.
  template <class F>
  void launch(Stream& s, F&& fn) {
    boost::asio::post(s, std::forward<F>(fn));
  }
  //! Library version text.
  static std::string version() {
    return std::to_string(BOOST_VERSION / 100000) + "." +
           std::to_string(BOOST_VERSION / 100 % 1000) + "." + std::to_string(BOOST_VERSION % 100);
  }

 private:
  boost::asio::thread_pool pool_;
};
#endif  // STREAMRT_BENCH_HAVE_ASIO

#ifdef STREAMRT_BENCH_HAVE_OPENCL
//! OpenCL on the CPU device (PoCL here): an in-order command queue per stream, host work as
//! native kernels (clEnqueueNativeKernel: no kernel compilation), markers as events,
//! clWaitForEvents, barriers with wait lists for cross-queue waits, clSetEventCallback for
//! completion callbacks, and profiling timestamps on queues made with `timing`.
class OpenClPeer : public PeerTraits {
 public:
  static constexpr const char* kName = "OpenCL (PoCL)";
  static constexpr const char* kId = "opencl";
  static constexpr bool kHasCallbacks = true;

  //! Throws std::runtime_error when an OpenCL call fails, naming the call and the code.
  static void check(cl_int rc, const char* what) {
    if (rc != CL_SUCCESS)
      throw std::runtime_error(std::string(what) + " failed: " + std::to_string(rc));
  }

  //! Owns a command queue; finishes it before releasing.
  struct Queue {
    cl_command_queue q = nullptr;
    explicit Queue(cl_command_queue queue) : q(queue) {}
    ~Queue() {
      clFinish(q);
      clReleaseCommandQueue(q);
    }
    Queue(const Queue&) = delete;
    Queue& operator=(const Queue&) = delete;
  };
  //! Owns an event reference.
  struct EventRef {
    cl_event e = nullptr;
    explicit EventRef(cl_event ev) : e(ev) {}
    ~EventRef() { clReleaseEvent(e); }
    EventRef(const EventRef&) = delete;
    EventRef& operator=(const EventRef&) = delete;
  };
  using Stream = std::shared_ptr<Queue>;
  using Event = std::shared_ptr<EventRef>;

  //! Finds the first platform with a CPU device that runs native kernels; throws
  //! std::runtime_error saying what is missing otherwise.
  OpenClPeer() {
    cl_uint n = 0;
    if (clGetPlatformIDs(0, nullptr, &n) != CL_SUCCESS || n == 0) {
      throw std::runtime_error("no OpenCL platform (install pocl-opencl-icd)");
    }
    std::vector<cl_platform_id> platforms(n);
    check(clGetPlatformIDs(n, platforms.data(), nullptr), "clGetPlatformIDs");
    for (auto p : platforms) {
      cl_device_id d = nullptr;
      if (clGetDeviceIDs(p, CL_DEVICE_TYPE_CPU, 1, &d, nullptr) != CL_SUCCESS) continue;
      cl_device_exec_capabilities caps = 0;
      check(clGetDeviceInfo(d, CL_DEVICE_EXECUTION_CAPABILITIES, sizeof caps, &caps, nullptr),
            "clGetDeviceInfo");
      if ((caps & CL_EXEC_NATIVE_KERNEL) == 0) continue;
      platform_ = p;
      device_ = d;
      break;
    }
    if (device_ == nullptr) {
      throw std::runtime_error(
          "no OpenCL CPU device with native kernels (install pocl-opencl-icd)");
    }
    cl_int rc = CL_SUCCESS;
    context_ = clCreateContext(nullptr, 1, &device_, nullptr, nullptr, &rc);
    check(rc, "clCreateContext");
  }
  ~OpenClPeer() { clReleaseContext(context_); }
  OpenClPeer(const OpenClPeer&) = delete;
  OpenClPeer& operator=(const OpenClPeer&) = delete;

  //! An in-order queue; `timing` enables profiling timestamps.
  Stream make_stream(bool timing = false) {
    cl_queue_properties props[] = {CL_QUEUE_PROPERTIES,
                                   timing ? cl_queue_properties{CL_QUEUE_PROFILING_ENABLE} : 0, 0};
    cl_int rc = CL_SUCCESS;
    cl_command_queue q = clCreateCommandQueueWithProperties(context_, device_, props, &rc);
    check(rc, "clCreateCommandQueueWithProperties");
    return std::make_shared<Queue>(q);
  }
  //! clEnqueueNativeKernel; `out` receives the command's event when not null.
  template <class F>
  void launch(Stream& s, F&& fn, cl_event* out = nullptr) {
    using D = std::decay_t<F>;
    auto* heap = new D(std::forward<F>(fn));
    void* arg = heap;
    const cl_int rc = clEnqueueNativeKernel(s->q, &trampoline<D>, &arg, sizeof arg, 0, nullptr,
                                            nullptr, 0, nullptr, out);
    if (rc != CL_SUCCESS) {
      delete heap;
      check(rc, "clEnqueueNativeKernel");
    }
  }
  //! Blocks until the work submitted to the stream so far has run.
  void sync(Stream& s) { check(clFinish(s->q), "clFinish"); }
  //! clEnqueueMarkerWithWaitList, then clFlush so that other queues can depend on it.
  Event record(Stream& s) {
    cl_event e = nullptr;
    check(clEnqueueMarkerWithWaitList(s->q, 0, nullptr, &e), "clEnqueueMarkerWithWaitList");
    check(clFlush(s->q), "clFlush");
    return std::make_shared<EventRef>(e);
  }
  //! True once the marker is reached. Never blocks.
  bool query(const Event& e) {
    cl_int status = CL_QUEUED;
    check(clGetEventInfo(e->e, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, nullptr),
          "clGetEventInfo");
    return status == CL_COMPLETE;
  }
  //! Blocks until the marker is reached.
  void wait(const Event& e) { check(clWaitForEvents(1, &e->e), "clWaitForEvents"); }
  //! Later work on the stream waits for the marker. Returns at once.
  void wait_event(Stream& s, const Event& e) {
    check(clEnqueueBarrierWithWaitList(s->q, 1, &e->e, nullptr), "clEnqueueBarrierWithWaitList");
    check(clFlush(s->q), "clFlush");
  }
  //! clSetEventCallback(CL_COMPLETE).
  template <class F>
  void on_complete(const Event& e, F fn) {
    auto* heap = new F(std::move(fn));
    const cl_int rc = clSetEventCallback(e->e, CL_COMPLETE, &callback_trampoline<F>, heap);
    if (rc != CL_SUCCESS) {
      delete heap;
      check(rc, "clSetEventCallback");
    }
  }
  //! Profiling start/end (ns) of a completed command of a timing queue.
  std::pair<std::int64_t, std::int64_t> profile(cl_event e) {
    cl_ulong start = 0, end = 0;
    check(clGetEventProfilingInfo(e, CL_PROFILING_COMMAND_START, sizeof start, &start, nullptr),
          "clGetEventProfilingInfo");
    check(clGetEventProfilingInfo(e, CL_PROFILING_COMMAND_END, sizeof end, &end, nullptr),
          "clGetEventProfilingInfo");
    return {static_cast<std::int64_t>(start), static_cast<std::int64_t>(end)};
  }
  //! Worker threads the peer uses.
  int workers() const {
    cl_uint cu = 0;
    clGetDeviceInfo(device_, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cu, &cu, nullptr);
    return static_cast<int>(cu);
  }
  //! "<platform version> / <device name>".
  std::string version() const {
    char buf[512] = {0};
    std::string out;
    if (clGetPlatformInfo(platform_, CL_PLATFORM_VERSION, sizeof buf - 1, buf, nullptr) ==
        CL_SUCCESS) {
      out = buf;
    }
    buf[0] = 0;
    if (clGetDeviceInfo(device_, CL_DEVICE_NAME, sizeof buf - 1, buf, nullptr) == CL_SUCCESS) {
      out += std::string(" / ") + buf;
    }
    return out;
  }

 private:
  template <class D>
  static void CL_CALLBACK trampoline(void* args) {
    D* fn = *static_cast<D**>(args);
    (*fn)();
    delete fn;
  }
  template <class F>
  static void CL_CALLBACK callback_trampoline(cl_event, cl_int, void* data) {
    F* fn = static_cast<F*>(data);
    (*fn)();
    delete fn;
  }
  cl_platform_id platform_ = nullptr;
  cl_device_id device_ = nullptr;
  cl_context context_ = nullptr;
};
#endif  // STREAMRT_BENCH_HAVE_OPENCL

}  // namespace streamrt_bench
