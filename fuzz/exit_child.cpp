// The fuzzer's exit child: builds the state its argument describes (one letter per step), leaves
// it open and returns from main. Exit must end the process: queued and failed work finishes or is
// reported, an open capture is dropped, callbacks run; nothing hangs or crashes. The fuzzer
// starts it with posix_spawn and a time limit (a fork of the fuzzer would copy its threads).
#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "streamrt/streamrt.hpp"

int main(int argc, char** argv) {
  const std::string steps = argc > 1 ? argv[1] : "";
  std::vector<streamrt::Stream> streams(3);
  streamrt::Graph graph;
  bool capturing = false;
  std::vector<streamrt::Tensor> tensors;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    auto& s = streams[i % streams.size()];
    switch (steps[i]) {
      case 'q':  // queued work
        s.launch([] { std::this_thread::sleep_for(std::chrono::microseconds(200)); });
        break;
      case 'f':  // a failure nobody synchronizes on
        s.launch([] { throw std::runtime_error("left failing at exit"); });
        break;
      case 'c':  // a callback still to run
        s.record_event().on_complete([](std::exception_ptr) {});
        break;
      case 'g':  // a capture left open (at most one per stream here)
        if (!capturing) {
          s.begin_capture(graph, streamrt::CaptureMode::Relaxed);
          capturing = true;
        }
        break;
      case 't': {  // tensors whose writers are queued
        streamrt::StreamContext ctx(s);
        tensors.push_back(streamrt::ones({64}) + 1.0);
        break;
      }
      case 'x':  // a cancel of what is queued
        (void)s.cancel();
        break;
      case 'l':  // work that launches more work during exit
        s.launch([&s] { s.launch([] {}); });
        break;
      default:
        break;
    }
  }
  std::puts("main returns");
  return 0;
}
