// version_info() and version_text(): what `streamrt --version` and `python3 -m streamrt`
// print. The expected values come from the CMake configuration of this test (same project, same
// compiler, same configuration as the library).
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "streamrt/streamrt.hpp"

namespace {

TEST(VersionInfo, DescribesThisBuild) {
  const streamrt::VersionInfo info = streamrt::version_info();
  EXPECT_EQ(info.version, STREAMRT_TEST_PROJECT_VERSION);
  EXPECT_EQ(info.build_type, STREAMRT_TEST_BUILD_TYPE);
  EXPECT_EQ(info.compiler, STREAMRT_TEST_COMPILER);
  EXPECT_EQ(info.sanitizer, STREAMRT_TEST_SANITIZER);
  EXPECT_EQ(info.backends, std::vector<std::string>{"cpu"});  // the fake backend lives elsewhere
}

TEST(VersionInfo, ReportsTheWorkerCountNow) {
  const int before = streamrt::cpu::num_threads();
  EXPECT_EQ(streamrt::version_info().num_threads, before);
  const int other = before == 3 ? 2 : 3;
  streamrt::cpu::set_num_threads(other);
  EXPECT_EQ(streamrt::version_info().num_threads, other);
  EXPECT_NE(streamrt::version_text().find("\nworkers: " + std::to_string(other) + "\n"),
            std::string::npos);
  streamrt::cpu::set_num_threads(before);
}

TEST(VersionInfo, TextHasOneLinePerField) {
  const streamrt::VersionInfo info = streamrt::version_info();
  std::istringstream text(streamrt::version_text());
  std::vector<std::string> lines;
  for (std::string line; std::getline(text, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 7U) << streamrt::version_text();
  EXPECT_EQ(lines[0], "streamrt " + info.version);
  EXPECT_EQ(lines[1], "build type: " + info.build_type);
  EXPECT_EQ(lines[2], "compiler: " + info.compiler);
  EXPECT_EQ(lines[3].rfind("sanitizer: ", 0), 0U);
  EXPECT_EQ(lines[4], "backends: cpu");
  EXPECT_EQ(lines[5], "workers: " + std::to_string(info.num_threads));
  EXPECT_EQ(lines[6].rfind("STREAMRT_NUM_THREADS: ", 0), 0U);
  EXPECT_EQ(streamrt::version_text().back(), '\n');
}

}  // namespace
