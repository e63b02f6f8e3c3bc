// `streamrt demo`: two CPU-bound jobs on two streams, timed with events, against one stream.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "commands.hpp"
#include "streamrt/streamrt.hpp"

namespace streamrt_tool {
namespace {

// About `iters` dependent floating-point steps: CPU-bound, no memory traffic.
double spin_work(long iters) {
  double x = 1.0;
  for (long i = 0; i < iters; ++i) x = std::sqrt(x + static_cast<double>(i & 7));
  return x;
}

}  // namespace

int run_demo(int argc, char** argv) {
  long iters = 20'000'000;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h")) {
      std::puts("usage: streamrt demo [--iters N]\n"
                "Runs two CPU-bound jobs on two streams, times each with events, and compares the\n"
                "wall time with running both on one stream.\n"
                "  --iters N   work per job in loop iterations (default 20000000)");
      return 0;
    }
    if (!std::strcmp(argv[i], "--iters") && i + 1 < argc) {
      iters = std::atol(argv[++i]);
      continue;
    }
    std::fprintf(stderr, "streamrt demo: unknown option '%s' (see --help)\n", argv[i]);
    return 2;
  }
  using Clock = std::chrono::steady_clock;
  double sink[2] = {0, 0};
  const streamrt::EventOptions timing{.enable_timing = true};

  // Serial: both jobs on one stream.
  streamrt::Stream one;
  auto t0 = Clock::now();
  one.launch([&] { sink[0] = spin_work(iters); });
  one.launch([&] { sink[1] = spin_work(iters); });
  one.synchronize();
  const double serial_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();

  // Parallel: one job per stream, each bracketed by timing events.
  streamrt::Stream s1, s2;
  streamrt::Event b1(timing), e1(timing), b2(timing), e2(timing);
  t0 = Clock::now();
  {
    streamrt::StreamContext ctx(s1);
    b1.record();
    s1.launch([&] { sink[0] = spin_work(iters); });
    e1.record();
  }
  {
    streamrt::StreamContext ctx(s2);
    b2.record();
    s2.launch([&] { sink[1] = spin_work(iters); });
    e2.record();
  }
  s1.synchronize();
  s2.synchronize();
  const double parallel_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();

  std::printf("streamrt demo: two CPU-bound jobs (%ld iterations each), %d worker threads\n", iters,
              streamrt::num_threads());
  std::printf("  stream 1 (events): %8.2f ms\n", b1.elapsed_time(e1));
  std::printf("  stream 2 (events): %8.2f ms\n", b2.elapsed_time(e2));
  std::printf("  one stream, wall:  %8.2f ms\n", serial_ms);
  std::printf("  two streams, wall: %8.2f ms\n", parallel_ms);
  std::printf("  speedup:           %8.2fx  (checksum %.3f)\n", serial_ms / parallel_ms,
              sink[0] + sink[1]);
  return 0;
}

}  // namespace streamrt_tool
