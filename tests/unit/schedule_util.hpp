#pragma once
// STREAMRT_SCHEDULE=serial (make test-schedule, docs/reliability.md) runs all work on one worker,
// whatever worker count a test sets. A test that proves work runs on several workers at once
// cannot pass there by design: it calls STREAMRT_SKIP_UNDER_SERIAL_SCHEDULE() first and is then
// reported as skipped, with the reason, instead of being left out by name.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string_view>

namespace streamrt_schedule {

// True when this process runs under STREAMRT_SCHEDULE=serial.
inline bool serial() {
  const char* s = std::getenv("STREAMRT_SCHEDULE");
  return s != nullptr && std::string_view(s) == "serial";
}

}  // namespace streamrt_schedule

// Returns from the test (or its SetUp) as skipped under STREAMRT_SCHEDULE=serial.
#define STREAMRT_SKIP_UNDER_SERIAL_SCHEDULE()                                                   \
  if (::streamrt_schedule::serial())                                                            \
  GTEST_SKIP() << "STREAMRT_SCHEDULE=serial runs all work on one worker, and this test proves " \
                  "that work runs on several workers at once"
