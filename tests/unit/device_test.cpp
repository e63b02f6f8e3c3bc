// Devices and the device-wide calls: Device::parse, errors for bad input, devices without a
// backend. The CPU backend's own settings are tested in cpu_settings_test.cpp.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>

#include "streamrt/streamrt.hpp"
#include "test_util.hpp"

namespace {

using streamrt_test::error_of;
using streamrt_test::expect_bad_setting;
using streamrt_test::run_child;

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

}  // namespace
