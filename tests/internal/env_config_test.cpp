// Whitebox: the parser of the CPU backend's environment settings (src/cpu/env_config.hpp). The
// environment itself is read once per process; tests/unit runs children for that.
#include "cpu/env_config.hpp"

#include <gtest/gtest.h>

#include <string>

#include "streamrt/error.hpp"

namespace streamrt::cpu {
namespace {

std::string error_of(const char* threads, const char* schedule) {
  try {
    (void)parse_config(threads, schedule, 8);
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(Config, UnsetMeansHardwareThreadsAndTheNormalScheduler) {
  for (const char* unset : {static_cast<const char*>(nullptr), ""}) {
    const Config c = parse_config(unset, unset, 8);
    EXPECT_EQ(c.num_threads, 8);
    EXPECT_EQ(c.schedule.mode, Schedule::Mode::kNormal);
  }
}

TEST(Config, GoodValues) {
  EXPECT_EQ(parse_config("1", nullptr, 8).num_threads, 1);
  EXPECT_EQ(parse_config("4096", nullptr, 8).num_threads, 4096);
  EXPECT_EQ(parse_config(nullptr, "default", 8).schedule.mode, Schedule::Mode::kNormal);
  EXPECT_EQ(parse_config(nullptr, "serial", 8).schedule.mode, Schedule::Mode::kSerial);
  const Config r = parse_config(nullptr, "random:18446744073709551615", 8);
  EXPECT_EQ(r.schedule.mode, Schedule::Mode::kRandom);
  EXPECT_EQ(r.schedule.seed, 18446744073709551615ull);
}

TEST(Config, BadWorkerCountsNameTheVariableAndTheAcceptedValues) {
  for (const char* bad : {"0", "-2", "4097", "4x", "zero", " 3", "99999999999999999999"}) {
    const std::string msg = error_of(bad, nullptr);
    SCOPED_TRACE(bad);
    EXPECT_NE(msg.find(std::string("STREAMRT_NUM_THREADS='") + bad + "'"), std::string::npos)
        << msg;
    EXPECT_NE(msg.find("from 1 to 4096"), std::string::npos) << msg;
    EXPECT_NE(msg.find("all 8 hardware threads"), std::string::npos) << msg;
  }
}

TEST(Config, BadSchedulesNameTheVariableAndTheAcceptedValues) {
  for (const char* bad : {"bogus", "random", "random:", "random:12x", "random:-3", "serial2",
                          "random:99999999999999999999999", "Serial"}) {
    const std::string msg = error_of(nullptr, bad);
    SCOPED_TRACE(bad);
    EXPECT_NE(msg.find(std::string("STREAMRT_SCHEDULE='") + bad + "'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("random:SEED"), std::string::npos) << msg;
    EXPECT_NE(msg.find("serial"), std::string::npos) << msg;
  }
}

TEST(Config, HostRunSwitch) {
  EXPECT_TRUE(parse_config(nullptr, nullptr, 8, nullptr).host_run);
  EXPECT_TRUE(parse_config(nullptr, nullptr, 8, "").host_run);
  EXPECT_TRUE(parse_config(nullptr, nullptr, 8, "1").host_run);
  EXPECT_FALSE(parse_config(nullptr, nullptr, 8, "0").host_run);
  for (const char* bad : {"yes", "2", " 0", "off"}) {
    SCOPED_TRACE(bad);
    std::string msg = "<no error>";
    try {
      (void)parse_config(nullptr, nullptr, 8, bad);
    } catch (const Error& e) {
      msg = e.what();
    }
    EXPECT_NE(msg.find(std::string("STREAMRT_HOST_RUN='") + bad + "'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("use 0"), std::string::npos) << msg;
  }
}

TEST(Config, WorkerSpin) {
  EXPECT_EQ(parse_config(nullptr, nullptr, 8).worker_spin_us, kDefaultWorkerSpinUs);
  EXPECT_EQ(parse_config(nullptr, nullptr, 8, nullptr, "").worker_spin_us, kDefaultWorkerSpinUs);
  EXPECT_EQ(parse_config(nullptr, nullptr, 8, nullptr, "0").worker_spin_us, 0);
  EXPECT_EQ(parse_config(nullptr, nullptr, 8, nullptr, "5").worker_spin_us, 5);
  EXPECT_EQ(parse_config(nullptr, nullptr, 8, nullptr, "1000000").worker_spin_us, 1'000'000);
  for (const char* bad : {"-1", "1000001", "5us", " 5", "fast", "99999999999999999999"}) {
    SCOPED_TRACE(bad);
    std::string msg = "<no error>";
    try {
      (void)parse_config(nullptr, nullptr, 8, nullptr, bad);
    } catch (const Error& e) {
      msg = e.what();
    }
    EXPECT_NE(msg.find(std::string("STREAMRT_WORKER_SPIN_US='") + bad + "'"), std::string::npos)
        << msg;
    EXPECT_NE(msg.find("from 0 to 1000000"), std::string::npos) << msg;
  }
}

TEST(Config, WorkerBatchSwitch) {
  EXPECT_FALSE(parse_config(nullptr, nullptr, 8).worker_batch);
  EXPECT_FALSE(parse_config(nullptr, nullptr, 8, nullptr, nullptr, "").worker_batch);
  EXPECT_FALSE(parse_config(nullptr, nullptr, 8, nullptr, nullptr, "0").worker_batch);
  EXPECT_TRUE(parse_config(nullptr, nullptr, 8, nullptr, nullptr, "1").worker_batch);
  for (const char* bad : {"yes", "2", " 1", "batch"}) {
    SCOPED_TRACE(bad);
    std::string msg = "<no error>";
    try {
      (void)parse_config(nullptr, nullptr, 8, nullptr, nullptr, bad);
    } catch (const Error& e) {
      msg = e.what();
    }
    EXPECT_NE(msg.find(std::string("STREAMRT_WORKER_BATCH='") + bad + "'"), std::string::npos)
        << msg;
    EXPECT_NE(msg.find("use 1"), std::string::npos) << msg;
  }
}

TEST(Config, ForkTimeoutInSeconds) {
  const auto ms = [](const char* text) {
    return parse_config(nullptr, nullptr, 8, nullptr, nullptr, nullptr, text).fork_timeout_ms;
  };
  EXPECT_EQ(ms(nullptr), kDefaultForkTimeoutMs);
  EXPECT_EQ(ms(""), kDefaultForkTimeoutMs);
  EXPECT_EQ(ms("0"), 0);
  EXPECT_EQ(ms("0.25"), 250);
  EXPECT_EQ(ms("30"), 30'000);
  EXPECT_EQ(ms("86400"), kMaxForkTimeoutMs);
  for (const char* bad : {"-1", "86401", "5s", " 5", "inf", "nan", "1e999", "never"}) {
    SCOPED_TRACE(bad);
    std::string msg = "<no error>";
    try {
      (void)ms(bad);
    } catch (const Error& e) {
      msg = e.what();
    }
    EXPECT_NE(msg.find(std::string("STREAMRT_FORK_TIMEOUT='") + bad + "'"), std::string::npos)
        << msg;
    EXPECT_NE(msg.find("seconds from 0 to 86400"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace streamrt::cpu
