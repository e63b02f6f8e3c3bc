// `streamrt demo`: the seed articles' scenarios on CPU streams, with a readable report, a Chrome
// trace and an SVG timeline of the matrix-product scenarios.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <future>
#include <string>
#include <vector>

#include "commands.hpp"
#include "demo_graph.hpp"
#include "streamrt/streamrt.hpp"

namespace streamrt_tool {
namespace {

using namespace streamrt;
using WallClock = std::chrono::steady_clock;

struct Options {
  long size = 1000;        // seed example 1: matrix size
  long streams = 2;        // streams run side by side
  long iters = 4;          // products per stream in the seed scenario
  long small_size = 256;   // scenario 2: size of the small products
  long small_iters = 200;  // scenario 2: products per stream
  std::string out = ".";   // folder for the trace and the timeline
};

constexpr const char* kUsage =
    "usage: streamrt demo [options]\n"
    "\n"
    "Runs the seed articles' scenarios on CPU streams and prints a report:\n"
    "  1. the seed's two streams of matrix products (per-stream time from timing events, wall\n"
    "     time of one stream vs the streams side by side, speedup, allclose of the results);\n"
    "  2. many small products (too small to split across workers) on one stream vs side by side;\n"
    "  2b. a two-stream step captured into a graph once, replayed --small-iters times vs eager;\n"
    "  3-8. events: poll while working, reset/completed, wait_all, completion callbacks,\n"
    "     device-wide synchronize, explicit stream guard.\n"
    "Writes streamrt-trace.json (Chrome trace: open in https://ui.perfetto.dev or\n"
    "chrome://tracing) and streamrt-timeline.svg (Gantt chart, one row per stream) for scenarios\n"
    "1 and 2. Exits non-zero when a result is wrong.\n"
    "\n"
    "options:\n"
    "  --size N         matrix size of scenario 1 (default 1000: the seed's 1000x1000)\n"
    "  --streams K      streams side by side, 1-16 (default 2)\n"
    "  --iters I        products per stream in scenario 1 (default 4)\n"
    "  --small-size N   matrix size of scenario 2 (default 256)\n"
    "  --small-iters I  products per stream in scenario 2 (default 200)\n"
    "  --out DIR        folder for streamrt-trace.json and streamrt-timeline.svg (default: the\n"
    "                   current folder; created if missing)\n"
    "  -h, --help       show this text\n"
    "Worker threads: STREAMRT_NUM_THREADS (default: all hardware threads).\n";

bool parse_long(const char* text, long lo, long hi, long& out) {
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || v < lo || v > hi) return false;
  out = v;
  return true;
}

double ms_since(WallClock::time_point t0) {
  return std::chrono::duration<double, std::milli>(WallClock::now() - t0).count();
}

int g_failures = 0;

void check(bool ok, const char* what) {
  if (!ok) {
    ++g_failures;
    std::printf("   FAILED: %s\n", what);
  }
}

struct ProductRun {
  double serial_ms = 0;
  double parallel_ms = 0;
  std::vector<double> stream_ms;  // from timing events
  bool all_close = false;
};

// `iters` products of a x b per stream on `k` streams side by side, against the same total on one
// stream. Every product is the same, so every result must be allclose to the first.
ProductRun run_products(Profiler& prof, const char* tag, long n, long k, long iters,
                        std::uint64_t seed) {
  ProductRun r;
  Tensor a = randn({n, n}, seed), b = randn({n, n}, seed + 1);
  matmul(a, b).wait();  // warm-up: BLAS buffers, page faults, workers awake

  Stream serial;
  prof.name_stream(serial, std::string(tag) + ": one stream");
  Tensor serial_out;
  auto t0 = WallClock::now();
  {
    StreamContext ctx(serial);
    for (long i = 0; i < k * iters; ++i) serial_out = matmul(a, b);
  }
  serial.synchronize();
  r.serial_ms = ms_since(t0);

  std::vector<Stream> streams;
  std::vector<Event> begin, end;
  std::vector<Tensor> outs(static_cast<std::size_t>(k));
  for (long i = 0; i < k; ++i) {
    streams.emplace_back();
    prof.name_stream(streams.back(), std::string(tag) + ": stream " + std::to_string(i + 1));
    begin.emplace_back(EventOptions{.enable_timing = true});
    end.emplace_back(EventOptions{.enable_timing = true});
  }
  t0 = WallClock::now();
  for (long i = 0; i < k; ++i) {
    const auto u = static_cast<std::size_t>(i);
    StreamContext ctx(streams[u]);  // the seed's `with torch.cpu.StreamContext(stream):`
    begin[u].record();
    for (long j = 0; j < iters; ++j) outs[u] = matmul(a, b);
    end[u].record();
  }
  for (auto& s : streams) s.synchronize();
  r.parallel_ms = ms_since(t0);
  for (long i = 0; i < k; ++i) {
    const auto u = static_cast<std::size_t>(i);
    r.stream_ms.push_back(begin[u].elapsed_time(end[u]));
  }
  r.all_close = allclose(outs[0], serial_out);
  for (const auto& o : outs) r.all_close = r.all_close && allclose(o, outs[0]);
  return r;
}

void print_products(const ProductRun& r, long n, long k, long iters) {
  for (std::size_t i = 0; i < r.stream_ms.size(); ++i) {
    std::printf("   stream %zu: %8.2f ms for %ld products (timing events)\n", i + 1, r.stream_ms[i],
                iters);
  }
  std::printf("   one stream,  %3ld products: %8.2f ms wall\n", k * iters, r.serial_ms);
  std::printf("   %ld streams, %3ld products: %8.2f ms wall   speedup %.2fx   (%.1f GFLOP/s)\n", k,
              k * iters, r.parallel_ms, r.serial_ms / r.parallel_ms,
              2.0 * static_cast<double>(n) * n * n * k * iters / r.parallel_ms / 1e6);
  std::printf("   allclose(results of every stream, one-stream result): %s\n",
              r.all_close ? "true" : "false");
}

}  // namespace

int run_demo(int argc, char** argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    auto value = [&](long lo, long hi, long& out) {
      if (i + 1 >= argc || !parse_long(argv[i + 1], lo, hi, out)) {
        std::fprintf(stderr, "streamrt demo: %s needs an integer from %ld to %ld (see --help)\n",
                     arg.c_str(), lo, hi);
        std::exit(2);
      }
      ++i;
    };
    if (arg == "--size") {
      value(1, 8192, opt.size);
    } else if (arg == "--streams") {
      value(1, 16, opt.streams);
    } else if (arg == "--iters") {
      value(1, 10000, opt.iters);
    } else if (arg == "--small-size") {
      value(1, 4096, opt.small_size);
    } else if (arg == "--small-iters") {
      value(1, 100000, opt.small_iters);
    } else if (arg == "--out") {
      if (i + 1 >= argc) {
        std::fputs("streamrt demo: --out needs a folder (see --help)\n", stderr);
        return 2;
      }
      opt.out = argv[++i];
    } else {
      std::fprintf(stderr, "streamrt demo: unknown option '%s' (see --help)\n", arg.c_str());
      return 2;
    }
  }
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(opt.out, ec);
  if (!fs::is_directory(opt.out)) {
    std::fprintf(stderr, "streamrt demo: cannot use '%s' as the output folder%s%s\n",
                 opt.out.c_str(), ec ? ": " : "", ec ? ec.message().c_str() : "");
    return 2;
  }

  std::printf(
      "streamrt demo: CPU streams, events and tensors (%d worker threads; OpenBLAS runs\n"
      "single-threaded inside workers, large products are split across them)\n\n",
      num_threads());
  Profiler prof;
  prof.start();

  // 1. The seed's example: two streams of 1000x1000 products, then allclose.
  std::printf("1. %ld streams of %ldx%ld matmul (seed example 1), %ld products per stream\n",
              opt.streams, opt.size, opt.size, opt.iters);
  const auto big = run_products(prof, "1 seed", opt.size, opt.streams, opt.iters, 1);
  print_products(big, opt.size, opt.streams, opt.iters);
  check(big.all_close, "the streams' products differ");
  if (big.serial_ms / big.parallel_ms < 1.3 && num_threads() > 1) {
    std::printf(
        "   note: one stream already uses every worker here (each product is split in\n"
        "   row blocks across the pool), so more streams add little; streams pay off for\n"
        "   work too small to split, as in 2.\n");
  }

  // 2. Many small products: each runs on one worker, streams give the parallelism.
  std::printf("\n2. %ld streams of %ldx%ld matmul, %ld products per stream\n", opt.streams,
              opt.small_size, opt.small_size, opt.small_iters);
  const auto small = run_products(prof, "2 small", opt.small_size, opt.streams, opt.small_iters, 3);
  print_products(small, opt.small_size, opt.streams, opt.small_iters);
  check(small.all_close, "the streams' products differ");
  // 2b. Graph capture and replay (docs/graphs.md).
  std::printf("\n2b. a two-stream step captured once and replayed (graph) vs launched eagerly\n");
  check(run_graph_scenario(prof, opt.small_iters), "graph replay result");
  prof.stop();

  // 3. Poll while working (the seed's `while not event.poll()`).
  std::printf("\n3. poll an event while the host works\n");
  {
    Stream s;
    Event done;
    Tensor out;
    {
      StreamContext ctx(s);
      Tensor x = randn({600, 600}, 5);
      out = matmul(x, x);
      done.record();
    }
    long steps = 0;
    while (!done.query()) ++steps;
    std::printf("   host loop ran %ld times before completed() became true; result ready: %s\n",
                steps, out.ready() ? "yes" : "no");
    check(out.ready(), "result not ready after its event completed");
  }

  // 4. Reset and completed.
  std::printf("\n4. event reset and completed\n");
  {
    Stream s;
    Event e;
    s.launch([] {});
    e.record(s);
    e.synchronize();
    const bool before = e.completed();
    e.reset();
    const bool after = e.completed();
    bool refused = false;
    try {
      e.synchronize();
    } catch (const Error&) {
      refused = true;
    }
    std::printf("   completed: %s; after reset: %s; waiting on the reset event: %s\n",
                before ? "true" : "false", after ? "true" : "false",
                refused ? "Error (never recorded)" : "returned");
    check(before && !after && refused, "reset/completed");
  }

  // 5. wait_all on several events.
  std::printf("\n5. wait_all on %ld events (one per stream)\n", opt.streams);
  {
    std::vector<Stream> ss(static_cast<std::size_t>(opt.streams));
    for (auto& s : ss) s = Stream();
    std::vector<Event> events;
    std::vector<Tensor> outs;
    for (std::size_t i = 0; i < ss.size(); ++i) {
      StreamContext ctx(ss[i]);
      outs.push_back(sum(matmul(ones({200, 200}), ones({200, 200}))));
      events.push_back(ss[i].record_event());
    }
    wait_all(events);
    bool all = true;
    for (std::size_t i = 0; i < ss.size(); ++i) all = all && events[i].completed() && ss[i].query();
    std::printf("   all complete after wait_all: %s; sum = %.0f\n", all ? "true" : "false",
                static_cast<double>(outs[0].item<float>()));
    check(all && outs[0].item<float>() == 200.0f * 200.0f * 200.0f, "wait_all");
  }

  // 6. Completion callbacks.
  std::printf("\n6. completion callback\n");
  {
    Stream s;
    Tensor out;
    {
      StreamContext ctx(s);
      out = relu(randn({500, 500}, 9));
    }
    std::promise<bool> called;
    s.record_event().on_complete(
        [&](std::exception_ptr failure) { called.set_value(failure == nullptr); });
    auto fut = called.get_future();
    const bool ran = fut.wait_for(std::chrono::seconds(60)) == std::future_status::ready;
    const bool clean = ran && fut.get();
    std::printf("   callback ran on a runtime thread: %s; no failure: %s\n", ran ? "yes" : "no",
                clean ? "yes" : "no");
    check(ran && clean, "completion callback");
  }

  // 7. Device-wide synchronize.
  std::printf("\n7. device-wide synchronize\n");
  {
    std::vector<Stream> ss;
    std::vector<Tensor> ys;
    for (int i = 0; i < 4; ++i) {
      ss.emplace_back();
      StreamContext ctx(ss.back());
      Tensor x = full({500, 500}, i);
      ys.push_back(x + x);
    }
    synchronize(Device::parse("cpu"));
    bool idle = true;
    for (auto& s : ss) idle = idle && s.query();
    std::printf("   4 streams idle after synchronize(cpu): %s\n", idle ? "true" : "false");
    check(idle && ys[3].data<float>()[0] == 6.0f, "device synchronize");
  }

  // 8. Explicit stream guard.
  std::printf("\n8. explicit stream guard (StreamContext)\n");
  {
    Stream s;
    const Stream before = current_stream();
    bool inside = false;
    {
      StreamContext guard(s);
      inside = current_stream() == s;
    }
    const bool restored = current_stream() == before;
    std::printf("   current stream inside the guard: %s; restored after: %s\n",
                inside ? "the guarded stream" : "WRONG", restored ? "yes" : "no");
    check(inside && restored, "stream guard");
  }

  const auto trace = (fs::path(opt.out) / "streamrt-trace.json").string();
  const auto svg = (fs::path(opt.out) / "streamrt-timeline.svg").string();
  try {
    prof.export_chrome_trace(trace);
    prof.export_timeline_svg(
        svg, "streamrt demo: scenarios 1 and 2 (" + std::to_string(num_threads()) + " workers)");
  } catch (const Error& e) {
    std::fprintf(stderr, "streamrt demo: %s\n", e.what());
    return 1;
  }
  std::printf("\n%zu work items traced (scenarios 1 and 2):\n", prof.records().size());
  std::printf("   trace:    %s  (open in https://ui.perfetto.dev or chrome://tracing)\n",
              fs::absolute(trace).lexically_normal().c_str());
  std::printf("   timeline: %s  (one row per stream)\n",
              fs::absolute(svg).lexically_normal().c_str());
  if (g_failures > 0) {
    std::printf("\n%d check(s) FAILED\n", g_failures);
    return 1;
  }
  std::printf("\nall checks passed\n");
  return 0;
}

}  // namespace streamrt_tool
