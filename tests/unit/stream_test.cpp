#include <gtest/gtest.h>

#include <atomic>
#include <vector>

#include "streamrt/streamrt.hpp"

namespace {

TEST(Stream, RunsWorkInOrder) {
  streamrt::Stream s;
  std::vector<int> seen;
  for (int i = 0; i < 1000; ++i) s.launch([&seen, i] { seen.push_back(i); });
  s.synchronize();
  ASSERT_EQ(seen.size(), 1000u);
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(seen[i], i);
}

}  // namespace
