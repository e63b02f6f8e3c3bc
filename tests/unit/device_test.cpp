#include <gtest/gtest.h>

#include "streamrt/streamrt.hpp"

namespace {

TEST(Device, ParsesCanonicalForms) {
  EXPECT_EQ(streamrt::Device::parse("cpu"), (streamrt::Device{streamrt::DeviceType::CPU, 0}));
  EXPECT_EQ(streamrt::Device::parse("cpu:0"), (streamrt::Device{streamrt::DeviceType::CPU, 0}));
  EXPECT_EQ(streamrt::Device::parse("cuda:1"), (streamrt::Device{streamrt::DeviceType::CUDA, 1}));
  EXPECT_EQ(streamrt::Device::parse("cuda:1").str(), "cuda:1");
}

TEST(Device, RejectsBadText) {
  for (const char* bad : {"", "gpu", "cpu:", "cpu:-1", "cpu:x", "CPU", "cpu:0:1", " cpu"}) {
    EXPECT_THROW(streamrt::Device::parse(bad), streamrt::Error) << bad;
  }
}

}  // namespace
