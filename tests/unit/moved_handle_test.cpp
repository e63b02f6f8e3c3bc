// Moved-from Stream and Event handles: they name nothing, so every method (and every call that
// takes one as an argument) throws a streamrt::Error that says so and names the call, instead of
// dereferencing the null pointer the move left. Assigning a live handle makes them usable again.
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "streamrt/streamrt.hpp"
#include "test_util.hpp"

namespace {

using namespace streamrt_test;  // the shared test helpers (test_util.hpp)
using namespace std::chrono_literals;

streamrt::Stream moved_from_stream() {
  streamrt::Stream s;
  streamrt::Stream taker(std::move(s));
  return s;  // NOLINT(bugprone-use-after-move): the point of the test
}

streamrt::Event moved_from_event() {
  streamrt::Event e;
  streamrt::Event taker(std::move(e));
  return e;  // NOLINT(bugprone-use-after-move)
}

// `call` throws an Error naming `who` and saying a handle of class `cls` was moved from (the
// handle called on, or, when `argument`, one passed to it).
void expect_moved_from(const std::string& who, const std::string& cls, bool argument,
                       const std::function<void()>& call) {
  const std::string message = error_of(call);
  EXPECT_NE(message.find(who + ": "), std::string::npos) << who << ": " << message;
  const std::string said =
      (argument ? "the " + cls + " passed" : "this " + cls) + " was moved from";
  EXPECT_NE(message.find(said), std::string::npos) << who << ": " << message;
}

TEST(MovedFromStream, EveryMethodThrowsAnErrorNamingIt) {
  streamrt::Stream s = moved_from_stream();
  streamrt::Graph graph;
  streamrt::Event live_event;
  const std::vector<std::pair<std::string, std::function<void()>>> calls = {
      {"device", [&] { (void)s.device(); }},
      {"priority", [&] { (void)s.priority(); }},
      {"id", [&] { (void)s.id(); }},
      {"launch", [&] { s.launch([] {}); }},
      {"launch", [&] { s.launch("label", [] {}); }},
      {"launch", [&] { s.launch_work(streamrt::detail::Work([] {})); }},
      {"query", [&] { (void)s.query(); }},
      {"synchronize", [&] { s.synchronize(); }},
      {"synchronize_for", [&] { (void)s.synchronize_for(1ms); }},
      {"wait_event", [&] { s.wait_event(live_event); }},
      {"wait_stream", [&] { s.wait_stream(streamrt::Stream()); }},
      {"cancel", [&] { (void)s.cancel(); }},
      {"pending", [&] { (void)s.pending(); }},
      {"set_host_run", [&] { s.set_host_run(false); }},
      {"host_run", [&] { (void)s.host_run(); }},
      {"record_event", [&] { (void)s.record_event(); }},
      {"record_event", [&] { (void)s.record_event(live_event); }},
      {"begin_capture", [&] { s.begin_capture(); }},
      {"begin_capture", [&] { s.begin_capture(graph); }},
      {"end_capture", [&] { (void)s.end_capture(); }},
      {"is_capturing", [&] { (void)s.is_capturing(); }},
      {"str", [&] { (void)s.str(); }},
  };
  for (const auto& [member, call] : calls) {
    expect_moved_from("Stream::" + member, "Stream", false, call);
  }
  // What needs no stream still works: the null backend object and comparisons.
  EXPECT_EQ(s.impl(), nullptr);
  EXPECT_TRUE(s == moved_from_stream());
  EXPECT_FALSE(s == streamrt::Stream::default_stream());
}

TEST(MovedFromStream, CallsTakingItAsAnArgumentThrowAnErrorNamingThem) {
  const streamrt::Stream moved = moved_from_stream();
  streamrt::Stream live;
  streamrt::Event e;
  expect_moved_from("Stream::wait_stream", "Stream", true, [&] { live.wait_stream(moved); });
  expect_moved_from("Event::record", "Stream", true, [&] { e.record(moved); });
  e.record(live);
  expect_moved_from("Event::wait", "Stream", true, [&] { e.wait(moved); });
  expect_moved_from("streamrt::set_current_stream", "Stream", true,
                    [&] { streamrt::set_current_stream(moved); });
  expect_moved_from("StreamContext::StreamContext", "Stream", true,
                    [&] { streamrt::StreamContext context(moved); });
  expect_moved_from("StreamContext::StreamContext", "Stream", true, [&] {
    streamrt::StreamContext context{std::optional<streamrt::Stream>(moved)};
  });
  // None of them changed the thread's current stream.
  EXPECT_TRUE(streamrt::current_stream() == streamrt::Stream::default_stream());
  live.synchronize();
}

TEST(MovedFromStream, AssigningALiveStreamMakesItUsableAgain) {
  streamrt::Stream s = moved_from_stream();
  streamrt::Stream live;
  s = live;
  bool ran = false;
  s.launch([&] { ran = true; });
  s.synchronize();
  EXPECT_TRUE(ran);
  EXPECT_TRUE(s == live);
}

TEST(MovedFromEvent, EveryMethodThrowsAnErrorNamingIt) {
  streamrt::Event e = moved_from_event();
  streamrt::Stream live;
  streamrt::Event end;
  end.record(live);
  const std::vector<std::pair<std::string, std::function<void()>>> calls = {
      {"record", [&] { e.record(); }},
      {"record", [&] { e.record(live); }},
      {"query", [&] { (void)e.query(); }},
      {"query", [&] { (void)e.completed(); }},
      {"synchronize", [&] { e.synchronize(); }},
      {"wait_for", [&] { (void)e.wait_for(1ms); }},
      {"wait", [&] { e.wait(live); }},
      {"wait", [&] { e.wait(); }},
      {"elapsed_time", [&] { (void)e.elapsed_time(end); }},
      {"reset", [&] { e.reset(); }},
      {"device", [&] { (void)e.device(); }},
      {"options", [&] { (void)e.options(); }},
      {"state", [&] { (void)e.state(); }},
      {"on_complete", [&] { e.on_complete([](std::exception_ptr) {}); }},
      {"impl", [&] { (void)e.impl(); }},
  };
  for (const auto& [member, call] : calls) {
    expect_moved_from("Event::" + member, "Event", false, call);
  }
  EXPECT_FALSE(e.valid());
  EXPECT_TRUE(end.valid());
  EXPECT_TRUE(e == moved_from_event());
  EXPECT_FALSE(e == end);
  live.synchronize();
}

TEST(MovedFromEvent, CallsTakingItAsAnArgumentThrowAnErrorNamingThem) {
  const streamrt::Event moved = moved_from_event();
  streamrt::Event e_moved = moved_from_event();
  streamrt::Stream live;
  streamrt::Event start(streamrt::EventOptions{.enable_timing = true});
  start.record(live);
  expect_moved_from("Stream::wait_event", "Event", true, [&] { live.wait_event(moved); });
  expect_moved_from("Stream::record_event", "Event", true, [&] { live.record_event(e_moved); });
  expect_moved_from("Event::elapsed_time", "Event", true, [&] { start.elapsed_time(moved); });
  const std::array<streamrt::Event, 2> events = {start, moved};
  for (const char* function : {"wait_all", "wait_all_for"}) {
    const std::string message = error_of([&] {
      if (std::string(function) == "wait_all") {
        streamrt::wait_all(events);
      } else {
        (void)streamrt::wait_all_for(events, 1s);
      }
    });
    EXPECT_NE(message.find(std::string("streamrt::") + function + ": event 1 was moved from"),
              std::string::npos)
        << message;
  }
  live.synchronize();
}

TEST(MovedFromEvent, AssigningALiveEventMakesItUsableAgain) {
  streamrt::Event e = moved_from_event();
  streamrt::Stream live;
  e = live.record_event();
  EXPECT_TRUE(e.valid());
  e.synchronize();
  EXPECT_TRUE(e.query());
}

}  // namespace
