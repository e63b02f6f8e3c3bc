// Devices, device-wide calls, worker count (issue 2: Device::parse, errors for bad input,
// set_num_threads, STREAMRT_NUM_THREADS).
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>

#include "streamrt/streamrt.hpp"
#include "test_util.hpp"

namespace {

using streamrt_test::expect_bad_setting;
using streamrt_test::run_child;

std::string error_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const streamrt::Error& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(Device, ParsesCanonicalForms) {
  EXPECT_EQ(streamrt::Device::parse("cpu"), (streamrt::Device{streamrt::DeviceType::CPU, 0}));
  EXPECT_EQ(streamrt::Device::parse("cpu:0"), (streamrt::Device{streamrt::DeviceType::CPU, 0}));
  EXPECT_EQ(streamrt::Device::parse("cuda"), (streamrt::Device{streamrt::DeviceType::CUDA, 0}));
  EXPECT_EQ(streamrt::Device::parse("cuda:1"), (streamrt::Device{streamrt::DeviceType::CUDA, 1}));
  EXPECT_EQ(streamrt::Device::parse("cpu:12").index, 12);
  EXPECT_EQ(streamrt::Device::parse("cuda:1").str(), "cuda:1");
  EXPECT_EQ(streamrt::Device{}.str(), "cpu:0");
  EXPECT_EQ(streamrt::to_string(streamrt::DeviceType::CUDA), "cuda");
}

TEST(Device, RejectsBadTextWithAMessageNamingIt) {
  for (const char* bad : {"", "gpu", "cpu:", "cpu:-1", "cpu:x", "CPU", "cpu:0:1", " cpu",
                          "cpu:99999999999", "cuda:1x"}) {
    const std::string msg = error_of([&] { (void)streamrt::Device::parse(bad); });
    EXPECT_NE(msg.find(std::string("'") + bad + "'"), std::string::npos) << bad << ": " << msg;
    EXPECT_NE(msg.find("cpu:N"), std::string::npos) << msg;  // says what is expected
  }
}

TEST(Device, IndexOutOfRangeIsAnError) {
  const std::string msg = error_of([] { streamrt::Stream s(streamrt::Device{{}, 1}); });
  EXPECT_NE(msg.find("cpu:1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("does not exist"), std::string::npos) << msg;
  EXPECT_NE(error_of([] { streamrt::synchronize(streamrt::Device{{}, -1}); }), "<no error>");
}

TEST(Device, NoBackendForCudaInThisBuild) {
  const std::string msg = error_of([] { streamrt::Stream s(streamrt::Device::parse("cuda:0")); });
  EXPECT_NE(msg.find("no backend for device type 'cuda'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("cpu"), std::string::npos) << msg;  // names the fix
}

TEST(WorkerCount, SetNumThreadsChangesTheCountAndRejectsBadValues) {
  const int saved = streamrt::cpu::num_threads();
  EXPECT_GE(saved, 1);
  for (int bad : {0, -1, 4097, 1 << 20}) {
    const std::string msg = error_of([&] { streamrt::cpu::set_num_threads(bad); });
    EXPECT_NE(msg.find("set_num_threads(" + std::to_string(bad) + ")"), std::string::npos) << msg;
    EXPECT_NE(msg.find("from 1 to 4096"), std::string::npos) << msg;
  }
  EXPECT_EQ(streamrt::cpu::num_threads(), saved);
  streamrt::cpu::set_num_threads(3);
  EXPECT_EQ(streamrt::cpu::num_threads(), 3);
  // Resizing keeps working: work still runs after shrinking and growing.
  streamrt::Stream s;
  std::atomic<int> n{0};
  for (int i = 0; i < 100; ++i) s.launch([&] { n.fetch_add(1); });
  streamrt::cpu::set_num_threads(1);
  for (int i = 0; i < 100; ++i) s.launch([&] { n.fetch_add(1); });
  s.synchronize();
  EXPECT_EQ(n.load(), 200);
  streamrt::cpu::set_num_threads(saved);
  EXPECT_EQ(streamrt::cpu::num_threads(), saved);
}

TEST(WorkerSpin, SetAndReadBackAndBadValuesAreErrors) {
  using std::chrono::microseconds;
  const microseconds saved = streamrt::cpu::worker_spin();
  EXPECT_GE(saved.count(), 0);
  for (long bad : {-1L, 1'000'001L}) {
    const std::string msg = error_of([&] { streamrt::cpu::set_worker_spin(microseconds(bad)); });
    EXPECT_NE(msg.find("set_worker_spin(" + std::to_string(bad) + " us)"), std::string::npos)
        << msg;
    EXPECT_NE(msg.find("from 0 to 1000000"), std::string::npos) << msg;
  }
  EXPECT_EQ(streamrt::cpu::worker_spin(), saved);
  streamrt::cpu::set_worker_spin(microseconds(0));
  EXPECT_EQ(streamrt::cpu::worker_spin(), microseconds(0));
  // Work still runs with workers that park at once.
  streamrt::Stream s;
  std::atomic<int> n{0};
  for (int i = 0; i < 100; ++i) {
    s.launch([&] { n.fetch_add(1); });
    if (i % 10 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  s.synchronize();
  EXPECT_EQ(n.load(), 100);
  streamrt::cpu::set_worker_spin(saved);
  EXPECT_EQ(streamrt::cpu::worker_spin(), saved);
}

TEST(WorkerCount, SetNumThreadsFromWorkIsAnError) {
  streamrt::Stream s;
  std::string msg;
  s.launch([&] { msg = error_of([] { streamrt::cpu::set_num_threads(2); }); });
  s.synchronize();
  EXPECT_NE(msg.find("worker thread"), std::string::npos) << msg;
}

TEST(WorkerCount, EnvironmentVariableSetsTheCount) {
  // The child counts workers that meet, so it runs with the normal scheduler even when this suite
  // runs under STREAMRT_SCHEDULE=serial (one worker whatever the count).
  const auto r = run_child(std::string("env -u STREAMRT_SCHEDULE STREAMRT_NUM_THREADS=3 timeout 120 ") +
                           STREAMRT_TEST_CHILD + " num-threads");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("num_threads=3\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("met=3\n"), std::string::npos) << r.output;
}

TEST(WorkerCount, BadEnvironmentVariableIsAClearError) {
  for (const char* bad : {"zero", "0", "-2", "4x"}) {
    expect_bad_setting("STREAMRT_NUM_THREADS", bad,
                       std::string(STREAMRT_TEST_CHILD) + " num-threads");
    // Launching work reports it too, instead of running without workers.
    const auto l = run_child(std::string("STREAMRT_NUM_THREADS=") + bad + " timeout 120 " +
                             STREAMRT_TEST_CHILD + " launch");
    EXPECT_EQ(l.status, 3) << bad << ": " << l.output;
    EXPECT_NE(l.output.find("STREAMRT_NUM_THREADS"), std::string::npos) << l.output;
  }
}

TEST(WorkerSpin, EnvironmentVariableSetsThePollAndBadValuesAreAClearError) {
  const auto r = run_child(std::string("STREAMRT_WORKER_SPIN_US=7 timeout 120 ") +
                           STREAMRT_TEST_CHILD + " worker-spin");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("worker_spin=7\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("launched"), std::string::npos) << r.output;
  for (const char* bad : {"-5", "fast", "2000000"}) {
    expect_bad_setting("STREAMRT_WORKER_SPIN_US", bad,
                       std::string(STREAMRT_TEST_CHILD) + " worker-spin");
  }
}

}  // namespace
