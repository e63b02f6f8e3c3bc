// `streamrt demo`: the scenarios of the articles in docs/seeds.md on CPU streams, with a readable
// report, a Chrome trace and an SVG timeline of the matrix-product scenarios.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <future>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "commands.hpp"
#include "demo_graph.hpp"
#include "streamrt/streamrt.hpp"
#include "timeline_svg.hpp"

namespace streamrt_tool {
namespace {

using namespace streamrt;
using WallClock = std::chrono::steady_clock;

struct Options {
  long size = 1000;         // scenario 1: matrix size
  long streams = 2;         // streams run side by side
  long iters = 4;           // scenario 1: products per stream
  long small_size = 100;    // scenario 2: size of the small products (below the split size)
  long small_iters = 1000;  // scenario 2: products per stream
  long runs = 3;            // measured runs of each side of a comparison
  std::string out = ".";    // folder for the trace and the timeline
};

// The integer options: flag, the range accepted, and the field each sets.
struct IntOption {
  const char* flag;
  long lo, hi;
  long Options::*field;
};
constexpr IntOption kIntOptions[] = {
    {"--size", 1, 8192, &Options::size},
    {"--streams", 1, 16, &Options::streams},
    {"--iters", 1, 10000, &Options::iters},
    {"--small-size", 1, 4096, &Options::small_size},
    {"--small-iters", 1, 100000, &Options::small_iters},
    {"--runs", 1, 100, &Options::runs},
};

constexpr const char* kUsage =
    "usage: streamrt demo [options]\n"
    "\n"
    "Runs stream and event scenarios on CPU streams and prints a report:\n"
    "  1. two streams of large matrix products (per-stream time from timing events, wall\n"
    "     time of one stream vs the streams side by side, speedup, allclose of the results);\n"
    "  2. many small products (too small to split across workers: below 128x128) on one stream\n"
    "     vs side by side;\n"
    "  2b. a two-stream step captured into a graph once, replayed --small-iters times vs eager.\n"
    "  Each comparison runs both sides once unrecorded (warm-up), then --runs times, alternated,\n"
    "  and compares the medians;\n"
    "  3-8. events: poll while working, reset/completed, wait_all, completion callbacks,\n"
    "     device-wide synchronize, explicit stream guard.\n"
    "Writes streamrt-trace.json (Chrome trace: open in https://ui.perfetto.dev or\n"
    "chrome://tracing) and streamrt-timeline.svg (Gantt chart, one row per stream, one colour per\n"
    "kind of work) of one more, traced run of scenarios 1, 2 and 2b. Exits non-zero when a result\n"
    "is wrong.\n"
    "\n"
    "options:\n"
    "  --size N         matrix size of scenario 1 (default 1000: 1000x1000 products)\n"
    "  --streams K      streams side by side, 1-16 (default 2)\n"
    "  --iters I        products per stream in scenario 1 (default 4)\n"
    "  --small-size N   matrix size of scenario 2 (default 256)\n"
    "  --small-iters I  products per stream in scenario 2 (default 200)\n"
    "  --runs R         measured runs of each side of a comparison, 1-100 (default 3)\n"
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

std::string streams_text(long k) {
  return std::to_string(k) + (k == 1 ? " stream" : " streams");
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// "median of 3 runs, best 1.23 ms"; a single run is just "1 run".
std::string runs_text(const std::vector<double>& ms) {
  if (ms.size() == 1) return "1 run";
  char buf[96];
  std::snprintf(buf, sizeof buf, "median of %zu runs, best %.2f ms", ms.size(),
                *std::min_element(ms.begin(), ms.end()));
  return buf;
}

// What a speed-up above the core count means: not parallelism, a disturbed measurement.
void check_speedup(double speedup, const char* what) {
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  if (speedup > 1.05 * cores) {
    std::printf(
        "   note: %s %.2fx is more than this machine's %u cores can give: the runs were\n"
        "   disturbed (other processes? `uptime`); rerun on an idle machine or with more --runs\n",
        what, speedup, cores);
  }
}

// The machine's load: timings compare runs of this process, and other processes on the cores
// move them.
void print_load() {
  double load[1] = {0};
  if (::getloadavg(load, 1) != 1) return;
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  std::printf("load average %.2f on %u cores%s\n\n", load[0], cores,
              load[0] > 0.5 ? ": other processes share the cores, so the timings below vary" : "");
}

struct ProductRun {
  std::vector<double> serial_ms, parallel_ms;  // one per measured run
  std::vector<std::vector<double>> stream_ms;  // per stream, one per run (timing events)
  bool all_close = false;
};

// `iters` products of a x b per stream on `k` streams side by side, against the same total on one
// stream. Every product is the same, so every result must be allclose to the first. The streams
// and inputs live as long as the object, so the measured runs and the traced one use the same.
class Products {
 public:
  Products(Profiler& prof, const std::string& tag, long n, long k, long iters, std::uint64_t seed)
      : k_(k),
        iters_(iters),
        a_(randn({n, n}, seed)),
        b_(randn({n, n}, seed + 1)),
        outs_(static_cast<std::size_t>(k)) {
    prof.name_stream(serial_, tag + ": one stream");
    for (long i = 0; i < k; ++i) {
      streams_.emplace_back();
      prof.name_stream(streams_.back(), tag + ": stream " + std::to_string(i + 1));
      begin_.emplace_back(EventOptions{.enable_timing = true});
      end_.emplace_back(EventOptions{.enable_timing = true});
    }
  }

  // The whole work on one stream; returns the wall time in ms.
  double run_serial() {
    const auto t0 = WallClock::now();
    {
      StreamContext ctx(serial_);
      for (long i = 0; i < k_ * iters_; ++i) serial_out_ = matmul(a_, b_);
    }
    serial_.synchronize();
    return ms_since(t0);
  }

  // The same work on the k streams side by side; returns the wall time in ms and appends each
  // stream's time (its timing events) to `stream_ms` when given.
  double run_parallel(std::vector<std::vector<double>>* stream_ms) {
    const auto t0 = WallClock::now();
    for (std::size_t u = 0; u < streams_.size(); ++u) {
      StreamContext ctx(streams_[u]);  // the articles' `with torch.cpu.StreamContext(stream):`
      begin_[u].record();
      for (long j = 0; j < iters_; ++j) outs_[u] = matmul(a_, b_);
      end_[u].record();
    }
    for (auto& s : streams_) s.synchronize();
    const double ms = ms_since(t0);
    if (stream_ms != nullptr) {
      stream_ms->resize(streams_.size());
      for (std::size_t u = 0; u < streams_.size(); ++u) {
        (*stream_ms)[u].push_back(begin_[u].elapsed_time(end_[u]));
      }
    }
    return ms;
  }

  // One unrecorded run of each (first-touch page faults, BLAS buffers, workers waking up fall
  // there), then `runs` runs of each, alternated (one stream first in even runs, the streams
  // first in odd ones) so that a drift of the machine's speed falls on both sides.
  ProductRun measure(long runs) {
    ProductRun r;
    run_serial();
    run_parallel(nullptr);
    for (long i = 0; i < runs; ++i) {
      if (i % 2 == 0) {
        r.serial_ms.push_back(run_serial());
        r.parallel_ms.push_back(run_parallel(&r.stream_ms));
      } else {
        r.parallel_ms.push_back(run_parallel(&r.stream_ms));
        r.serial_ms.push_back(run_serial());
      }
    }
    r.all_close = allclose(outs_[0], serial_out_);
    for (const auto& o : outs_) r.all_close = r.all_close && allclose(o, outs_[0]);
    return r;
  }

 private:
  long k_, iters_;
  Tensor a_, b_, serial_out_;
  Stream serial_;
  std::vector<Stream> streams_;
  std::vector<Event> begin_, end_;
  std::vector<Tensor> outs_;
};

// One stream's time over the streams' time, run by run (a pair ran back to back, in the same
// conditions), and the median of those ratios: steadier than a ratio of medians when the
// machine's load drifts between runs.
double speedup_of(const ProductRun& r) {
  std::vector<double> ratios;
  for (std::size_t i = 0; i < r.serial_ms.size(); ++i) {
    ratios.push_back(r.serial_ms[i] / r.parallel_ms[i]);
  }
  return median(std::move(ratios));
}

void print_products(const ProductRun& r, long n, long k, long iters) {
  const double serial = median(r.serial_ms), parallel = median(r.parallel_ms);
  const double speedup = speedup_of(r);
  const std::string side = streams_text(k) + ",";
  std::printf("   %-11s %4ld products: %8.2f ms wall  (%s)\n", "one stream,", k * iters, serial,
              runs_text(r.serial_ms).c_str());
  std::printf("   %-11s %4ld products: %8.2f ms wall  (%s)\n", side.c_str(), k * iters, parallel,
              runs_text(r.parallel_ms).c_str());
  std::printf("   speedup %.2fx  (%.1f GFLOP/s; %s)\n", speedup,
              2.0 * static_cast<double>(n) * n * n * k * iters / parallel / 1e6,
              r.serial_ms.size() == 1
                  ? "one run each, after an unrecorded warm-up run of each"
                  : "median of the runs' ratios; runs alternated, after an unrecorded warm-up run "
                    "of each");
  check_speedup(speedup, "a speedup of");
  std::printf("   per stream (timing events, %s):", r.serial_ms.size() == 1 ? "1 run" : "medians");
  for (std::size_t i = 0; i < r.stream_ms.size(); ++i) {
    std::printf("%s %.2f ms", i == 0 ? "" : ",", median(r.stream_ms[i]));
  }
  std::printf(" for %ld products each\n", iters);
  if (k > 1) {
    std::printf(
        "   (a stream's span includes the time its products waited for workers busy with the\n"
        "   other streams: streams share the workers)\n");
  }
  std::printf("   allclose(results of every stream, one-stream result): %s\n",
              r.all_close ? "true" : "false");
}

// A products scenario of the demo (k streams of `iters` n x n products against one stream),
// measured, printed and checked: the streams' products must agree.
ProductRun measured(Products& products, long n, long k, long iters, long runs) {
  const auto r = products.measure(runs);
  print_products(r, n, k, iters);
  check(r.all_close, "the streams' products differ");
  return r;
}

// Reads the options into `opt`; returns the exit code when the command ends here (--help, or an
// option it cannot use), nothing when the demo goes on.
std::optional<int> parse_options(int argc, char** argv, Options& opt) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    const IntOption* int_option = nullptr;
    for (const auto& o : kIntOptions) {
      if (arg == o.flag) int_option = &o;
    }
    if (int_option != nullptr) {
      const IntOption& o = *int_option;
      if (i + 1 >= argc || !parse_long(argv[i + 1], o.lo, o.hi, opt.*o.field)) {
        std::fprintf(stderr, "streamrt demo: %s needs an integer from %ld to %ld (see --help)\n",
                     o.flag, o.lo, o.hi);
        return 2;
      }
      ++i;
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
  return std::nullopt;
}

// Creates the output folder when missing; says why and returns false when it cannot be used.
bool prepare_out_folder(const std::string& out) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(out, ec);
  if (!fs::is_directory(out)) {
    std::fprintf(stderr, "streamrt demo: cannot use '%s' as the output folder%s%s\n", out.c_str(),
                 ec ? ": " : "", ec ? ec.message().c_str() : "");
    return false;
  }
  return true;
}

// Scenarios 1, 2 and 2b, measured, then one more run of them traced into `prof` (the profiler's
// cost stays out of the figures).
void product_scenarios(Profiler& prof, const Options& opt) {
  // 1. Two streams of 1000x1000 products, then allclose: the articles' first example.
  std::printf("1. %s of %ldx%ld matmul, %ld products per stream\n",
              streams_text(opt.streams).c_str(), opt.size, opt.size, opt.iters);
  Products large_products(prof, "1 large", opt.size, opt.streams, opt.iters, 1);
  const auto big = measured(large_products, opt.size, opt.streams, opt.iters, opt.runs);
  if (opt.streams > 1 && speedup_of(big) < 1.3 && cpu::num_threads() > 1) {
    std::printf(
        "   note: one stream already uses every worker here (each product is split in\n"
        "   row blocks across the pool), so more streams add little; streams pay off for\n"
        "   work too small to split, as in 2.\n");
  }

  // 2. Many small products: each runs on one worker, streams give the parallelism.
  std::printf("\n2. %s of %ldx%ld matmul, %ld products per stream\n",
              streams_text(opt.streams).c_str(), opt.small_size, opt.small_size, opt.small_iters);
  Products small_products(prof, "2 small", opt.small_size, opt.streams, opt.small_iters, 3);
  measured(small_products, opt.small_size, opt.streams, opt.small_iters, opt.runs);
  // 2b. Graph capture and replay (docs/graphs.md).
  std::printf("\n2b. a two-stream step captured once and replayed (graph) vs launched eagerly\n");
  check(run_graph_scenario(opt.small_iters, opt.runs), "graph replay result");

  prof.start();
  large_products.run_serial();
  large_products.run_parallel(nullptr);
  small_products.run_serial();
  small_products.run_parallel(nullptr);
  trace_graph_scenario(prof, std::min(opt.small_iters, 50L));
  prof.stop();
}

// 3. Poll while working (the articles' `while not event.poll()`).
void poll_scenario() {
  std::printf("\n3. poll an event while the host works\n");
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
void reset_scenario() {
  std::printf("\n4. event reset and completed\n");
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
void wait_all_scenario(long streams) {
  std::printf("\n5. wait_all on %ld events (one per stream)\n", streams);
  std::vector<Stream> ss(static_cast<std::size_t>(streams));
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
void callback_scenario() {
  std::printf("\n6. completion callback\n");
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
void device_synchronize_scenario() {
  std::printf("\n7. device-wide synchronize\n");
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
void stream_guard_scenario() {
  std::printf("\n8. explicit stream guard (StreamContext)\n");
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

// Writes the traced run as a Chrome trace and an SVG timeline into `out` and says where; false
// (with the reason on stderr) when they cannot be written.
bool write_trace(const Profiler& prof, const std::string& out) {
  namespace fs = std::filesystem;
  const auto trace = (fs::path(out) / "streamrt-trace.json").string();
  const auto svg = (fs::path(out) / "streamrt-timeline.svg").string();
  try {
    prof.export_chrome_trace(trace);
    streamrt_timeline::export_timeline_svg(prof, svg,
                                           "streamrt demo: scenarios 1, 2 and 2b (" +
                                               std::to_string(cpu::num_threads()) + " workers)");
  } catch (const Error& e) {
    std::fprintf(stderr, "streamrt demo: %s\n", e.what());
    return false;
  }
  std::printf("\n%zu work items traced (one more run of scenarios 1, 2 and 2b):\n",
              prof.records().size());
  std::printf("   trace:    %s  (open in https://ui.perfetto.dev or chrome://tracing)\n",
              fs::absolute(trace).lexically_normal().c_str());
  std::printf("   timeline: %s  (one row per stream)\n",
              fs::absolute(svg).lexically_normal().c_str());
  return true;
}

}  // namespace

int run_demo(int argc, char** argv) {
  Options opt;
  if (const auto done = parse_options(argc, argv, opt)) return *done;
  if (!prepare_out_folder(opt.out)) return 2;

  std::printf(
      "streamrt demo: CPU streams, events and tensors (%d worker threads; OpenBLAS runs\n"
      "single-threaded inside workers, large products are split across them)\n",
      cpu::num_threads());
  print_load();
  Profiler prof;
  product_scenarios(prof, opt);
  poll_scenario();
  reset_scenario();
  wait_all_scenario(opt.streams);
  callback_scenario();
  device_synchronize_scenario();
  stream_guard_scenario();

  if (!write_trace(prof, opt.out)) return 1;
  if (g_failures > 0) {
    std::printf("\n%d check(s) FAILED\n", g_failures);
    return 1;
  }
  std::printf("\nall checks passed\n");
  return 0;
}

}  // namespace streamrt_tool
