#pragma once
// Helpers for the tensor/ops tests: gates that hold a stream, rendezvous that prove overlap, and
// float64 reference loops.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "schedule_util.hpp"
#include "streamrt/streamrt.hpp"

namespace streamrt::test {

// Runs f() and expects a streamrt::Error whose message contains every one of `parts`.
template <class F>
void expect_error_containing(F&& f, std::initializer_list<const char*> parts) {
  try {
    f();
    ADD_FAILURE() << "expected streamrt::Error";
  } catch (const Error& e) {
    for (const char* p : parts) {
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
          << "message '" << e.what() << "' lacks '" << p << "'";
    }
  }
}

// Generous: a rendezvous or gate that takes this long means the work did not run concurrently.
inline constexpr auto kMeetTimeout = std::chrono::seconds(60);

// A closed gate that stream work can wait at. Opens on open(), when the Gate is destroyed (so
// an early test failure never leaves a stream stuck), or by itself after kMeetTimeout (then
// timed_out() is true and the test fails instead of hanging).
class Gate {
 public:
  Gate() = default;
  ~Gate() {
    open();
    if (timed_out())
      ADD_FAILURE() << "work waited at a gate for " << kMeetTimeout.count()
                    << " s: something that should have run meanwhile did not";
  }
  Gate(const Gate&) = delete;
  Gate& operator=(const Gate&) = delete;

  void open() { state_->open(); }
  void wait() { state_->wait(); }
  bool timed_out() const {
    std::lock_guard lock(state_->mutex);
    return state_->timed_out;
  }
  // Enqueues a wait at this gate on `s` (holds the stream, and one worker, until open()).
  void hold(Stream s) {
    s.launch("gate", [state = state_] { state->wait(); });
  }
  // As hold(s), and counts `entered` up when the stream's worker has reached the gate.
  void hold(Stream s, std::shared_ptr<std::atomic<int>> entered) {
    s.launch("gate", [state = state_, entered] {
      entered->fetch_add(1);
      state->wait();
    });
  }

 private:
  struct State {
    std::mutex mutex;
    std::condition_variable cv;
    bool is_open = false;
    bool timed_out = false;
    void open() {
      std::lock_guard lock(mutex);
      is_open = true;
      cv.notify_all();
    }
    void wait() {
      std::unique_lock lock(mutex);
      if (!cv.wait_for(lock, kMeetTimeout, [&] { return is_open; })) {
        timed_out = true;
        is_open = true;
      }
    }
  };
  std::shared_ptr<State> state_ = std::make_shared<State>();
};

// `parties` threads must all arrive; arrive() returns false if the others did not come within
// kMeetTimeout (i.e. the work ran one after another instead of at the same time).
class Rendezvous {
 public:
  explicit Rendezvous(int parties) : parties_(parties) {}
  bool arrive() {
    std::unique_lock lock(mutex_);
    if (++arrived_ >= parties_) {
      cv_.notify_all();
      return true;
    }
    return cv_.wait_for(lock, kMeetTimeout, [&] { return arrived_ >= parties_; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  int parties_;
  int arrived_ = 0;
};

// Restores the worker count after a test that changes it.
class ThreadCountGuard {
 public:
  ThreadCountGuard() : saved_(cpu::num_threads()) {}
  ~ThreadCountGuard() { cpu::set_num_threads(saved_); }
  ThreadCountGuard(const ThreadCountGuard&) = delete;
  ThreadCountGuard& operator=(const ThreadCountGuard&) = delete;

 private:
  int saved_;
};

// Worker counts concurrency tests run at.
inline const std::vector<int> kWorkerCounts = {1, 2, 4, 8};
inline const std::vector<int> kParallelWorkerCounts = {2, 4, 8};

// Sets a switch that a whitebox test turns off (`Set`, such as
// ops::set_stream_ordering_for_testing) for the scope; it is back on when the scope ends, also when
// the test fails.
template <void (*Set)(bool) noexcept>
class ScopedSwitch {
 public:
  explicit ScopedSwitch(bool on) { Set(on); }
  ~ScopedSwitch() { Set(true); }
  ScopedSwitch(const ScopedSwitch&) = delete;
  ScopedSwitch& operator=(const ScopedSwitch&) = delete;
};

// A test run at each worker count (its parameter) that starts with an empty allocator cache.
class WorkersWithEmptyCache : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    cpu::set_num_threads(GetParam());
    empty_cache();
  }
  ThreadCountGuard guard_;
};

// True when every element of the float32 tensor `t` is `value` (the host read waits for t's
// writers).
inline bool all_equal(const Tensor& t, float value) {
  const float* p = t.data<float>();
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    if (p[i] != value) return false;
  }
  return true;
}

// 0, 1, ..., n-1 as float32 of `shape`.
inline Tensor iota(Shape shape) {
  return arange(shape_numel(shape), DType::Float32).reshape(std::move(shape));
}

// Copies a tensor's elements (row-major order, any strides) to doubles (waits for its writers).
inline std::vector<double> to_vector(const Tensor& t) {
  std::vector<double> out(static_cast<std::size_t>(t.numel()));
  auto copy = [&](const auto* p) {
    const auto& shape = t.shape();
    const auto& strides = t.strides();
    std::vector<std::int64_t> idx(shape.size(), 0);
    for (std::size_t i = 0; i < out.size(); ++i) {
      std::int64_t off = 0;
      for (std::size_t d = 0; d < shape.size(); ++d) off += idx[d] * strides[d];
      out[i] = static_cast<double>(p[off]);
      for (std::size_t d = shape.size(); d-- > 0;) {
        if (++idx[d] < shape[d]) break;
        idx[d] = 0;
      }
    }
  };
  switch (t.dtype()) {
    case DType::Float32:
      copy(t.data<float>());
      break;
    case DType::Float64:
      copy(t.data<double>());
      break;
    case DType::Int32:
      copy(t.data<std::int32_t>());
      break;
    case DType::Int64:
      copy(t.data<std::int64_t>());
      break;
    case DType::Bool:
      copy(t.data<bool>());
      break;
  }
  return out;
}

}  // namespace streamrt::test
