// Profiler: records of every item (stream, label, times, worker), stream names, Chrome trace JSON.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "ops_test_util.hpp"
#include "streamrt/streamrt.hpp"
#include "test_util.hpp"

namespace streamrt {
namespace {

using streamrt_test::temp_path;
using streamrt_test::write_script;

TEST(Profiler, RecordsOpsAndLabelledLaunches) {
  Stream s1, s2(Device{}, -1);
  Profiler prof;
  EXPECT_FALSE(prof.running());
  {
    ProfilerGuard on(prof);
    EXPECT_TRUE(prof.running());
    {
      StreamContext ctx(s1);
      Tensor c = matmul(ones({32, 32}), ones({32, 32}));
      c.wait();
    }
    s2.launch("my-step", [] {});
    s2.launch([] {});
    s2.synchronize();
  }
  EXPECT_FALSE(prof.running());
  Stream(Device{}).launch("after-stop", [] {});  // not recorded: the profiler is off
  synchronize();
  const auto recs = prof.records();
  std::map<std::string, std::vector<TraceRecord>> by_label;
  for (const auto& r : recs) by_label[r.label].push_back(r);
  ASSERT_EQ(by_label["matmul"].size(), 1u);
  ASSERT_EQ(by_label["fill"].size(), 2u);  // the two ones()
  ASSERT_EQ(by_label["my-step"].size(), 1u);
  ASSERT_EQ(by_label["launch"].size(), 1u);
  EXPECT_EQ(by_label.count("after-stop"), 0u);
  EXPECT_EQ(by_label["matmul"][0].stream_id, s1.id());
  EXPECT_EQ(by_label["my-step"][0].stream_id, s2.id());
  EXPECT_EQ(by_label["my-step"][0].stream_priority, -1);
  for (const auto& r : recs) {
    EXPECT_LE(r.enqueue_ns, r.start_ns) << r.label;
    EXPECT_LE(r.start_ns, r.end_ns) << r.label;
    EXPECT_GE(r.worker, -1);
    EXPECT_LT(r.worker, cpu::num_threads());
    EXPECT_EQ(r.device, Device{});
  }
  // Items of one stream never overlap (in-order), and come in submission order.
  std::map<std::uint64_t, std::int64_t> last_end;
  for (const auto& r : recs) {
    EXPECT_GE(r.start_ns, last_end[r.stream_id]) << r.label;
    last_end[r.stream_id] = r.end_ns;
  }
}

TEST(Profiler, OneAtATimeAndRestartClears) {
  Profiler a, b;
  a.start();
  EXPECT_THROW(b.start(), Error);
  a.stop();
  b.start();
  Stream s;
  s.launch("in-b", [] {});
  s.synchronize();
  b.stop();
  EXPECT_EQ(a.records().size(), 0u);
  ASSERT_EQ(b.records().size(), 1u);
  b.start();  // restart clears
  b.stop();
  EXPECT_EQ(b.records().size(), 0u);
}

TEST(Profiler, ChromeTraceIsValidJsonWithOneTrackPerStream) {
  Stream s1, s2;
  Profiler prof;
  prof.start();
  for (auto* s : {&s1, &s2}) {
    StreamContext ctx(*s);
    Tensor x = rand({64, 64}, 1);
    Tensor y = relu(matmul(x, x));
    y.wait();
  }
  s1.launch("quote\"and\\backslash", [] {});
  s1.synchronize();
  prof.stop();
  const std::string json = prof.chrome_trace_json();
  EXPECT_NE(json.find("\"ph\":\"X\""), std::string::npos);
  EXPECT_NE(json.find("\"name\":\"matmul\""), std::string::npos);
  EXPECT_NE(json.find("\"name\":\"stream " + std::to_string(s1.id()) + "\""), std::string::npos);
  EXPECT_NE(json.find("\"name\":\"stream " + std::to_string(s2.id()) + "\""), std::string::npos);
  const std::string path = temp_path("trace.json");
  prof.export_chrome_trace(path);
  // Validated by a real JSON parser: every X event has a track, and tracks are the two streams.
  const std::string script = write_script("trace_check.py", R"PY(
import json, sys
d = json.load(open(sys.argv[1]))
ev = d["traceEvents"]
x = [e for e in ev if e["ph"] == "X"]
names = {e["tid"]: e["args"]["name"] for e in ev if e["name"] == "thread_name"}
assert len(x) == 7, len(x)
assert all(e["tid"] in names and e["dur"] >= 0 and e["ts"] >= 0 for e in x)
assert sorted(names.values()) == sorted(sys.argv[2:]), names
assert any(e["name"] == 'quote"and\\backslash' for e in x), [e["name"] for e in x]
)PY");
  const std::string check = "/usr/bin/python3 " + script + " " + path + " 'stream " +
                            std::to_string(s1.id()) + "' 'stream " + std::to_string(s2.id()) + "'";
  EXPECT_EQ(std::system(check.c_str()), 0) << check;
  std::filesystem::remove(path);
  std::filesystem::remove(script);
  EXPECT_THROW(prof.export_chrome_trace("/nonexistent-dir/x.json"), Error);
}

TEST(Profiler, NamedStreamsAppearInTheChromeTrace) {
  Stream s, unnamed;
  Profiler prof;
  prof.name_stream(s, "loader <1>");
  prof.start();
  s.launch("step", [] {});
  unnamed.launch("step", [] {});
  s.synchronize();
  unnamed.synchronize();
  prof.stop();
  EXPECT_NE(prof.chrome_trace_json().find("\"name\":\"loader <1>\""), std::string::npos);
  // What the tools' exports read: the given name, none for the other stream.
  int named = 0;
  for (const auto& r : prof.records()) {
    EXPECT_EQ(prof.stream_name(r), r.stream_id == s.id() ? "loader <1>" : "");
    named += r.stream_id == s.id();
  }
  EXPECT_EQ(named, 1);
  EXPECT_GT(prof.start_ns(), 0);
  EXPECT_LE(prof.start_ns(), prof.records().front().enqueue_ns);
}

}  // namespace
}  // namespace streamrt
