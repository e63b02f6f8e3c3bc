// The device-agnostic handles over a fake backend (as c10 tests its guards): a small backend for
// DeviceType::CUDA that logs its calls, registered through impl::register_backend. It proves that
// the current stream is per device, StreamContext restores per device, and cross-device misuse is
// refused, without any GPU. Registering is process-global, hence this separate executable.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "streamrt/impl/backend.hpp"
#include "streamrt/impl/hooks.hpp"
#include "streamrt/streamrt.hpp"
#include "test_util.hpp"

namespace {

using streamrt::Device;
using streamrt::DeviceType;
namespace impl = streamrt::impl;
using streamrt_test::error_of;
using streamrt_test::runs_new_work;

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

const Device kCuda0{DeviceType::CUDA, 0};
const Device kCuda1{DeviceType::CUDA, 1};

class FakeEvent final : public impl::EventImpl {
 public:
  FakeEvent(impl::Backend& b, Device d, streamrt::EventOptions o, std::uint64_t stream_id)
      : impl::EventImpl(b, d, o), stream_id(stream_id) {}
  const std::uint64_t stream_id;
};

// Runs work inline and logs every call as "name(args)".
class FakeBackend final : public impl::Backend {
 public:
  DeviceType type() const noexcept override { return DeviceType::CUDA; }
  int device_count() const noexcept override { return 2; }
  std::pair<int, int> priority_range() const noexcept override { return {0, -1}; }

  std::shared_ptr<impl::StreamImpl> new_stream(int index, int priority) override {
    log("new_stream(" + std::to_string(index) + "," + std::to_string(priority) + ")");
    return std::make_shared<impl::StreamImpl>(*this, Device{DeviceType::CUDA, index}, priority,
                                              next_id_.fetch_add(1));
  }
  std::shared_ptr<impl::StreamImpl> default_stream(int index) override {
    std::lock_guard lock(mutex_);
    auto& s = defaults_[index];
    if (!s) s = std::make_shared<impl::StreamImpl>(*this, Device{DeviceType::CUDA, index}, 0, 0);
    return s;
  }
  void enqueue(impl::StreamImpl& s, streamrt::detail::Work work, const char* label) override {
    log("enqueue(" + std::to_string(s.id()) + ")");
    const std::int64_t start = tracing_ ? now_ns() : 0;
    work();
    if (tracing_) {
      impl::trace_item(
          impl::TraceItem{s.device(), s.id(), s.priority(), label, start, start, now_ns(), 0});
    }
  }
  void set_tracing(bool on) noexcept override {
    log(on ? "set_tracing(on)" : "set_tracing(off)");
    tracing_ = on;
  }
  std::shared_ptr<impl::EventImpl> record(impl::StreamImpl& s,
                                          streamrt::EventOptions options) override {
    log("record(" + std::to_string(s.id()) + ")");
    return std::make_shared<FakeEvent>(*this, s.device(), options, s.id());
  }
  void block(const std::shared_ptr<impl::EventImpl>& e, impl::StreamImpl& s) override {
    log("block(" + std::to_string(static_cast<const FakeEvent&>(*e).stream_id) + "->" +
        std::to_string(s.id()) + ")");
  }
  bool query_stream(const impl::StreamImpl& s) override {
    log("query_stream(" + std::to_string(s.id()) + ")");
    return true;
  }
  bool synchronize_stream(impl::StreamImpl& s, std::optional<std::chrono::nanoseconds>) override {
    log("synchronize_stream(" + std::to_string(s.id()) + ")");
    return true;
  }
  bool query_event(const impl::EventImpl&) override {
    log("query_event");
    return true;
  }
  streamrt::EventState event_state(const impl::EventImpl&) override {
    log("event_state");
    return streamrt::EventState::Complete;
  }
  bool synchronize_event(const impl::EventImpl&, std::optional<std::chrono::nanoseconds>) override {
    log("synchronize_event");
    return true;
  }
  double elapsed_time(const impl::EventImpl&, const impl::EventImpl&) override {
    log("elapsed_time");
    return 1.5;
  }
  void on_complete(const std::shared_ptr<impl::EventImpl>&,
                   std::function<void(std::exception_ptr)> cb) override {
    log("on_complete");
    cb(nullptr);
  }
  bool synchronize_device(int index, std::optional<std::chrono::nanoseconds>) override {
    log("synchronize_device(" + std::to_string(index) + ")");
    return true;
  }

  // Calls logged since the last take().
  std::vector<std::string> take() {
    std::lock_guard lock(mutex_);
    return std::exchange(log_, {});
  }
  bool logged(const std::string& call) {
    auto calls = take();
    return std::find(calls.begin(), calls.end(), call) != calls.end();
  }

 private:
  void log(std::string s) {
    std::lock_guard lock(mutex_);
    log_.push_back(std::move(s));
  }
  std::mutex mutex_;
  std::vector<std::string> log_;
  std::shared_ptr<impl::StreamImpl> defaults_[2];
  std::atomic<std::uint64_t> next_id_{1};
  std::atomic<bool> tracing_{false};
};

// Registers a new fake backend for CUDA, replacing the one before (the registry keeps that one
// alive), and returns it.
FakeBackend& register_fake() {
  auto b = std::make_unique<FakeBackend>();
  FakeBackend& raw = *b;
  impl::register_backend(std::move(b));
  return raw;
}

FakeBackend* g_fake = nullptr;  // the fake registered now; tests run on one thread

FakeBackend& fake() {
  if (g_fake == nullptr) g_fake = &register_fake();
  return *g_fake;
}

class FakeBackendTest : public ::testing::Test {
 protected:
  void SetUp() override { fake().take(); }
  void TearDown() override {
    streamrt::set_current_stream(streamrt::Stream::default_stream());
    streamrt::set_current_stream(streamrt::Stream::default_stream(kCuda0));
    streamrt::set_current_stream(streamrt::Stream::default_stream(kCuda1));
  }
};

TEST_F(FakeBackendTest, NewStreamGoesToTheBackendOfItsDeviceType) {
  streamrt::Stream s(kCuda1, -1);
  EXPECT_TRUE(fake().logged("new_stream(1,-1)"));
  EXPECT_EQ(s.device(), kCuda1);
  EXPECT_EQ(s.priority(), -1);
  EXPECT_NE(s.id(), 0u);
  // The range checks use the fake backend's range and device count.
  EXPECT_NE(error_of([] { streamrt::Stream(kCuda0, -2); }).find("out of range"), std::string::npos);
  EXPECT_NE(error_of([] {
              streamrt::Stream(Device{DeviceType::CUDA, 2});
            }).find("cuda:2"),
            std::string::npos);
  // And the CPU backend is still there, untouched.
  streamrt::Stream cpu;
  EXPECT_EQ(cpu.device(), Device{});
  EXPECT_TRUE(runs_new_work(cpu));
  EXPECT_TRUE(fake().take().empty());
}

TEST_F(FakeBackendTest, StreamCallsAreForwarded) {
  streamrt::Stream s(kCuda0);
  fake().take();
  bool ran = false;
  s.launch([&] { ran = true; });
  EXPECT_TRUE(ran);
  EXPECT_TRUE(s.query());
  s.synchronize();
  streamrt::synchronize(kCuda1);
  const auto id = std::to_string(s.id());
  EXPECT_EQ(fake().take(),
            (std::vector<std::string>{"enqueue(" + id + ")", "query_stream(" + id + ")",
                                      "synchronize_stream(" + id + ")", "synchronize_device(1)"}));
  auto d = streamrt::Stream::default_stream(kCuda1);
  EXPECT_EQ(d.id(), 0u);
  EXPECT_EQ(d.device(), kCuda1);
  EXPECT_NE(d, streamrt::Stream::default_stream(kCuda0));
}

TEST_F(FakeBackendTest, CurrentStreamIsPerDevice) {
  streamrt::Stream cuda(kCuda0);
  streamrt::Stream cpu;
  streamrt::set_current_stream(cuda);
  EXPECT_EQ(streamrt::current_stream(kCuda0), cuda);
  EXPECT_EQ(streamrt::current_stream(), streamrt::Stream::default_stream());  // CPU untouched
  EXPECT_EQ(streamrt::current_stream(kCuda1), streamrt::Stream::default_stream(kCuda1));
  streamrt::set_current_stream(cpu);
  EXPECT_EQ(streamrt::current_stream(), cpu);
  EXPECT_EQ(streamrt::current_stream(kCuda0), cuda);  // CUDA untouched
  bool fresh_thread_on_defaults = false;
  std::thread([&] {
    fresh_thread_on_defaults =
        streamrt::current_stream() == streamrt::Stream::default_stream() &&
        streamrt::current_stream(kCuda0) == streamrt::Stream::default_stream(kCuda0);
  }).join();
  EXPECT_TRUE(fresh_thread_on_defaults);
}

TEST_F(FakeBackendTest, StreamContextRestoresPerDevice) {
  streamrt::Stream cpu_a;
  streamrt::Stream cuda_b(kCuda0);
  streamrt::Stream cuda_c(kCuda0);
  streamrt::Stream cuda1_d(kCuda1);
  {
    streamrt::StreamContext c1(cpu_a);
    streamrt::StreamContext c2(cuda_b);
    EXPECT_EQ(streamrt::current_stream(), cpu_a);
    EXPECT_EQ(streamrt::current_stream(kCuda0), cuda_b);
    {
      streamrt::StreamContext c3(cuda_c);
      streamrt::StreamContext c4(cuda1_d);
      EXPECT_EQ(streamrt::current_stream(), cpu_a);
      EXPECT_EQ(streamrt::current_stream(kCuda0), cuda_c);
      EXPECT_EQ(streamrt::current_stream(kCuda1), cuda1_d);
    }
    EXPECT_EQ(streamrt::current_stream(kCuda0), cuda_b);
    EXPECT_EQ(streamrt::current_stream(kCuda1), streamrt::Stream::default_stream(kCuda1));
    EXPECT_EQ(streamrt::current_stream(), cpu_a);
  }
  EXPECT_EQ(streamrt::current_stream(), streamrt::Stream::default_stream());
  EXPECT_EQ(streamrt::current_stream(kCuda0), streamrt::Stream::default_stream(kCuda0));
}

TEST_F(FakeBackendTest, RecordingOnAnotherDeviceAfterAFirstRecordThrows) {
  streamrt::Stream cpu;
  streamrt::Stream cuda(kCuda0);
  streamrt::Stream cuda1(kCuda1);
  streamrt::Event e;
  e.record(cpu);
  const std::string msg = error_of([&] { e.record(cuda); });
  EXPECT_NE(msg.find("cpu:0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("cuda:0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("reset()"), std::string::npos) << msg;
  EXPECT_EQ(e.device(), Device{});  // the refused record changed nothing
  e.reset();
  fake().take();
  e.record(cuda);
  EXPECT_TRUE(fake().logged("record(" + std::to_string(cuda.id()) + ")"));
  EXPECT_EQ(e.device(), kCuda0);
  EXPECT_NE(error_of([&] { e.record(cuda1); }), "<no error>");  // another index is another device
  EXPECT_NE(error_of([&] { e.record(cpu); }), "<no error>");
}

TEST_F(FakeBackendTest, ElapsedTimeAcrossDevicesThrows) {
  streamrt::Stream cpu;
  streamrt::Stream cuda(kCuda0);
  const streamrt::EventOptions timing{.enable_timing = true};
  streamrt::Event a(timing);
  streamrt::Event b(timing);
  streamrt::Event c(timing);
  a.record(cpu);
  b.record(cuda);
  c.record(cuda);
  cpu.synchronize();
  const std::string msg = error_of([&] { (void)a.elapsed_time(b); });
  EXPECT_NE(msg.find("different devices"), std::string::npos) << msg;
  fake().take();
  EXPECT_EQ(b.elapsed_time(c), 1.5);  // same device: the backend answers
  EXPECT_TRUE(fake().logged("elapsed_time"));
}

TEST_F(FakeBackendTest, EventCallsGoToTheBackendOfTheRecord) {
  streamrt::Stream cuda(kCuda0);
  streamrt::Stream other(kCuda0);
  streamrt::Event e;
  e.record(cuda);
  fake().take();
  EXPECT_TRUE(e.query());
  e.synchronize();
  EXPECT_TRUE(e.wait_for(std::chrono::milliseconds(1)));
  bool called = false;
  e.on_complete([&](std::exception_ptr) { called = true; });
  EXPECT_TRUE(called);
  e.wait(other);
  const auto from = std::to_string(cuda.id());
  EXPECT_EQ(fake().take(), (std::vector<std::string>{
                               "query_event", "event_state", "synchronize_event", "on_complete",
                               "block(" + from + "->" + std::to_string(other.id()) + ")"}));
  {
    // wait() and record() without a stream use the current stream of the event's device.
    streamrt::StreamContext ctx(other);
    e.wait();
    EXPECT_TRUE(fake().logged("block(" + from + "->" + std::to_string(other.id()) + ")"));
    e.record();
    EXPECT_TRUE(fake().logged("record(" + std::to_string(other.id()) + ")"));
  }
}

// Replacing a backend (register_backend) must not send calls about a record to the new backend:
// it would cast another backend's EventImpl to its own type. The record keeps its backend.
TEST_F(FakeBackendTest, EventCallsGoToTheBackendThatMadeTheRecordAfterAReplacement) {
  streamrt::Stream before(kCuda0);
  const streamrt::EventOptions timing{.enable_timing = true};
  streamrt::Event e(timing);
  streamrt::Event end(timing);
  e.record(before);
  end.record(before);
  FakeBackend& first = fake();
  FakeBackend& second = register_fake();
  g_fake = &second;
  first.take();
  EXPECT_TRUE(e.query());
  EXPECT_EQ(e.state(), streamrt::EventState::Complete);
  e.synchronize();
  EXPECT_TRUE(e.wait_for(std::chrono::milliseconds(1)));
  bool called = false;
  e.on_complete([&](std::exception_ptr) { called = true; });
  EXPECT_TRUE(called);
  EXPECT_EQ(e.elapsed_time(end), 1.5);
  streamrt::wait_all(std::vector<streamrt::Event>{e});
  EXPECT_EQ(first.take(), (std::vector<std::string>{
                              "query_event", "event_state", "event_state", "synchronize_event",
                              "on_complete", "elapsed_time", "query_event", "synchronize_event"}));
  EXPECT_TRUE(second.take().empty());
  // A stream of the new backend cannot wait on the old backend's record (its block() would cast
  // it), nor can two records of different backends be timed against each other.
  streamrt::Stream after(kCuda0);
  const std::string msg = error_of([&] { after.wait_event(e); });
  EXPECT_NE(msg.find("another cuda backend"), std::string::npos) << msg;
  streamrt::Event later(timing);
  later.record(after);
  EXPECT_NE(error_of([&] { (void)e.elapsed_time(later); }).find("different backends"),
            std::string::npos);
  EXPECT_TRUE(second.logged("record(" + std::to_string(after.id()) + ")"));
}

TEST_F(FakeBackendTest, WaitingAcrossDeviceTypesIsRefused) {
  streamrt::Stream cpu;
  streamrt::Stream cuda(kCuda0);
  streamrt::Event on_cuda = cuda.record_event();
  const std::string msg = error_of([&] { cpu.wait_event(on_cuda); });
  EXPECT_NE(msg.find("cuda:0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("cpu:0"), std::string::npos) << msg;
  streamrt::Event on_cpu = cpu.record_event();
  EXPECT_NE(error_of([&] { cuda.wait_event(on_cpu); }), "<no error>");
}

// The profiler knows no backend: it switches tracing on through the trace hook, and any backend
// that reports its items with impl::trace_item() shows up in the records, next to the CPU's.
TEST_F(FakeBackendTest, TheProfilerTracesAnyBackendThroughTheTraceHook) {
  streamrt::Stream cuda(kCuda0);
  streamrt::Stream cpu;
  streamrt::Profiler profiler;
  fake().take();
  profiler.start();
  EXPECT_TRUE(fake().logged("set_tracing(on)"));
  cuda.launch("fake-kernel", [] {});
  cpu.launch("cpu-item", [] {});
  cpu.synchronize();
  profiler.stop();
  EXPECT_TRUE(fake().logged("set_tracing(off)"));
  cuda.launch("after-stop", [] {});
  bool saw_cuda = false;
  bool saw_cpu = false;
  for (const auto& r : profiler.records()) {
    EXPECT_NE(r.label, "after-stop");
    if (r.label == "fake-kernel") {
      saw_cuda = true;
      EXPECT_EQ(r.device, kCuda0);
      EXPECT_EQ(r.stream_id, cuda.id());
    }
    if (r.label == "cpu-item") saw_cpu = true;
  }
  EXPECT_TRUE(saw_cuda);
  EXPECT_TRUE(saw_cpu);
}

TEST_F(FakeBackendTest, VersionInfoListsARegisteredBackend) {
  // fake() registered the cuda backend (SetUp): version_info() reads the registry, not a list.
  const std::vector<std::string> expected{"cpu", "cuda"};
  EXPECT_EQ(streamrt::version_info().backends, expected);
  EXPECT_NE(streamrt::version_text().find("\nbackends: cpu, cuda\n"), std::string::npos);
}

TEST_F(FakeBackendTest, UnsupportedOptionalCallsSayWhichBackend) {
  // The defaults in impl::Backend name the backend and the call.
  const std::string msg = error_of([] { (void)fake().new_user_event(0, {}); });
  EXPECT_NE(msg.find("cuda backend doesn't support"), std::string::npos) << msg;
}

TEST_F(FakeBackendTest, PriorityRangeIsThatOfTheDevicesBackend) {
  // Stream::priority_range asks the device's backend; the CPU's is streamrt::cpu's.
  EXPECT_EQ(streamrt::Stream::priority_range(kCuda0), std::make_pair(0, -1));
  EXPECT_EQ(streamrt::Stream::priority_range(), streamrt::cpu::priority_range());
  EXPECT_EQ(streamrt::Stream::priority_range(streamrt::Device{}), streamrt::cpu::priority_range());
}

}  // namespace
