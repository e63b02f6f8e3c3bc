// `streamrt bench`: runs the comparison suite (streamrt and its peers, same binary, same run) with
// its own timing loop: warm-up, repetitions, medians and spread. Progress goes to stderr, the
// table to stdout, bench.json, table.md and SVG plots to --out.
#include "bench.hpp"

#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <exception>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "cases.hpp"
#include "commands.hpp"
#include "streamrt/streamrt.hpp"

namespace streamrt_tool {
namespace bench {
namespace {

// How long the run waits before its first job (see run_bench).
constexpr auto kStartupSettle = std::chrono::milliseconds(300);

void usage(std::FILE* out) {
  std::fputs(
      "usage: streamrt bench [--quick] [--filter REGEX] [--repetitions N] [--out DIR] [--list]\n"
      "\n"
      "Runs stream-ordered workloads on streamrt and on the systems one would use instead, in\n"
      "this process, one after another: std::async + future, a std::thread per stream with a\n"
      "queue, direct OpenBLAS for the matrix cases and, in bench/streamrt_compare (built with\n"
      "the benchmarks, not installed), oneTBB (task_group, and an in-order strand on a\n"
      "task_arena), Boost.Asio strands on a thread_pool and OpenCL on the CPU device (PoCL).\n"
      "A peer that is not in this program is reported as skipped, saying why.\n"
      "Prints medians with their spread and each peer's ratio to streamrt, and writes\n"
      "bench.json (every repetition, machine, library versions), table.md and SVG plots.\n"
      "\n"
      "  --quick           smoke run: smaller workloads (at most 1024 streams), 1-3 repetitions,\n"
      "                    under a minute\n"
      "  --filter REGEX    run only jobs whose \"<case>/<peer>\" matches (e.g. 'round_trip',\n"
      "                    'granularity/item=10us', '/(streamrt|tbb_strand)$')\n"
      "  --repetitions N   repetitions per job (default: per case, 3 to 15; --quick: 1 to 3)\n"
      "  --out DIR         output folder (default ./bench-out; created if missing)\n"
      "  --list            list the jobs that would run, then exit\n"
      "  --help            this text\n"
      "\n"
      "The machine should be otherwise idle: other processes show up as spread and lower\n"
      "efficiency. Ratios are peer / streamrt: above 1 means streamrt is better for lower-is-\n"
      "better units (ns, ms), below 1 for higher-is-better ones (x, %, items/s).\n",
      out);
}

std::string read_cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) {
        auto s = line.substr(colon + 1);
        s.erase(0, s.find_first_not_of(" \t"));
        return s;
      }
    }
  }
  return "unknown";
}

std::string read_mem_total() {
  std::ifstream f("/proc/meminfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("MemTotal:", 0) == 0) {
      auto s = line.substr(9);
      s.erase(0, s.find_first_not_of(" \t"));
      return s;
    }
  }
  return "unknown";
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string self_exe() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "streamrt";
  buf[n] = 0;
  return buf;
}

Machine describe_machine(double iters_per_us) {
  Machine m;
  m.cpu_model = read_cpu_model();
  m.hardware_threads = streamrt_bench::hardware_threads();
  m.streamrt_workers = streamrt::cpu::num_threads();
  utsname u{};
  if (::uname(&u) == 0) m.kernel = std::string(u.sysname) + " " + u.release + " " + u.machine;
  m.memory = read_mem_total();
  m.date = utc_now();
  m.compiler = __VERSION__;
  m.calibration_iters_per_us = iters_per_us;
  m.libraries = library_versions();
  for (const char* name : {"OPENBLAS_CORETYPE", "OPENBLAS_NUM_THREADS", "STREAMRT_NUM_THREADS",
                           "POCL_MAX_PTHREAD_COUNT", "TBB_VERSION"}) {
    const char* v = std::getenv(name);
    m.environment.emplace_back(name, v != nullptr ? v : "(unset)");
  }
  if (::getloadavg(m.load_before, 3) != 3) std::fill_n(m.load_before, 3, -1.0);
  return m;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

Stats stats_of(std::vector<double> v) {
  Stats s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  auto q = [&](double p) {  // linear interpolation between closest ranks
    const double pos = p * static_cast<double>(v.size() - 1);
    const auto lo = static_cast<std::size_t>(std::floor(pos));
    const auto hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
  };
  s.median = q(0.5);
  s.p25 = q(0.25);
  s.p75 = q(0.75);
  s.min = v.front();
  s.max = v.back();
  return s;
}

const Result* CaseResult::streamrt() const {
  for (const auto& r : results) {
    if (r.peer_index == 0 && r.status == "ok") return &r;
  }
  return nullptr;
}

namespace {

// The command line: the options of the run, and what else it asks for.
struct CommandLine {
  Options opts;
  bool list = false;
  std::string idle_probe;  // non-empty: this process is one idle probe (run_idle_probe)
  double idle_seconds = 1.0;
  std::string text = "streamrt";  // as typed, for the report
};

// Reads argv into `cl`; returns the exit code when the command ends here (--help, or an option it
// cannot use), nothing when the run goes on.
std::optional<int> parse_command_line(int argc, char** argv, CommandLine& cl) {
  Options& opts = cl.opts;
  for (int i = 0; i < argc; ++i) cl.text += std::string(" ") + argv[i];
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* flag) -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "streamrt bench: %s needs a value (see --help)\n", flag);
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--help" || a == "-h") {
      usage(stdout);
      return 0;
    } else if (a == "--quick") {
      opts.quick = true;
    } else if (a == "--list") {
      cl.list = true;
    } else if (a == "--filter") {
      opts.filter = value("--filter");
      try {
        std::regex check(opts.filter, std::regex::ECMAScript);
      } catch (const std::regex_error& e) {
        std::fprintf(stderr,
                     "streamrt bench: --filter '%s' is not a valid regular expression (%s); use "
                     "ECMAScript syntax, e.g. 'round_trip|handoff'\n",
                     opts.filter.c_str(), e.what());
        return 2;
      }
    } else if (a == "--repetitions") {
      const char* v = value("--repetitions");
      char* end = nullptr;
      const long n = std::strtol(v, &end, 10);
      if (*end != '\0' || n < 1 || n > 10000) {
        std::fprintf(stderr,
                     "streamrt bench: --repetitions '%s' is not a count: give an integer from 1 "
                     "to 10000\n",
                     v);
        return 2;
      }
      opts.repetitions = static_cast<int>(n);
    } else if (a == "--out") {
      opts.out = value("--out");
    } else if (a == "--idle-probe") {  // internal: one idle measurement in a fresh process
      cl.idle_probe = value("--idle-probe");
    } else if (a == "--idle-seconds") {
      cl.idle_seconds = std::atof(value("--idle-seconds"));
    } else {
      std::fprintf(stderr, "streamrt bench: unknown option '%s' (see --help)\n", a.c_str());
      return 2;
    }
  }
  return std::nullopt;
}

// --list: every job as "<case>/<peer>", with the reason of the skipped ones.
void list_jobs(const Suite& suite) {
  for (const auto& j : suite.jobs) {
    std::printf("%s/%s%s%s\n", suite.cases[j.case_index].id.c_str(),
                suite.peers[j.peer_index].id.c_str(),
                j.skip.empty() ? "" : "  (skipped: ", j.skip.empty() ? "" : (j.skip + ")").c_str());
  }
}

// Runs job `k` of the suite (its warm-up, then its repetitions) with a progress line on stderr.
// A peer that cannot start is reported as skipped; any other exception as failed.
Result run_job(const Suite& suite, const Options& opts, std::size_t k) {
  const std::size_t total = suite.jobs.size();
  const Job& job = suite.jobs[k];
  const CaseSpec& c = suite.cases[job.case_index];
  const PeerInfo& peer = suite.peers[job.peer_index];
  std::fprintf(stderr, "[%3zu/%zu, %3zu left] %-34s %-16s ", k + 1, total, total - k - 1,
               c.id.c_str(), peer.name.c_str());
  std::fflush(stderr);
  Result r;
  r.peer_index = job.peer_index;
  r.note = job.note;
  const auto t0 = std::chrono::steady_clock::now();
  if (!job.skip.empty()) {
    r.status = "skipped";
    r.reason = job.skip;
  } else {
    const int reps = opts.repetitions > 0 ? opts.repetitions : (opts.quick ? c.quick_reps : c.reps);
    try {
      auto rep = job.setup();
      for (int w = 0; w < c.warmup; ++w) rep();
      for (int i = 0; i < reps; ++i) r.samples.push_back(rep());
      r.status = "ok";
    } catch (const PeerUnavailable& e) {
      r.status = "skipped";  // the peer's library is there but could not start
      r.reason = e.what();
      r.samples.clear();
    } catch (const std::exception& e) {
      r.status = "failed";
      r.reason = e.what();
      r.samples.clear();
    }
  }
  r.stats = stats_of(r.samples);
  if (r.status == "ok") {
    std::fprintf(stderr, "%12s %7s  n=%zu  (%.1f s)\n",
                 format_value(r.stats.median, c.unit).c_str(), spread_text(r).c_str(),
                 r.samples.size(), seconds_since(t0));
  } else {
    std::fprintf(stderr, "%s: %s\n", r.status.c_str(), r.reason.c_str());
  }
  return r;
}

// Runs every job into `report.cases` (one CaseResult per case that has at least one job, in case
// order); returns whether a streamrt job failed.
bool run_jobs(const Suite& suite, const Options& opts, Report& report) {
  std::vector<int> case_slot(suite.cases.size(), -1);
  for (const auto& j : suite.jobs) {
    if (case_slot[j.case_index] < 0) {
      case_slot[j.case_index] = static_cast<int>(report.cases.size());
      report.cases.push_back(CaseResult{suite.cases[j.case_index], {}});
    }
  }
  bool streamrt_failed = false;
  for (std::size_t k = 0; k < suite.jobs.size(); ++k) {
    const Job& job = suite.jobs[k];
    Result r = run_job(suite, opts, k);
    if (r.status == "failed" && job.peer_index == 0) streamrt_failed = true;
    report.cases[static_cast<std::size_t>(case_slot[job.case_index])].results.push_back(
        std::move(r));
  }
  return streamrt_failed;
}

// The table on stdout, then bench.json, table.md and the plots in `out`; false (with the reason
// on stderr) when one cannot be written.
bool write_outputs(const Report& report, const std::string& out) {
  print_table(report, stdout);
  std::string error;
  const auto json_path = (std::filesystem::path(out) / "bench.json").string();
  const auto md_path = (std::filesystem::path(out) / "table.md").string();
  if (!write_json(report, json_path, error) || !write_markdown(report, md_path, error)) {
    std::fprintf(stderr, "streamrt bench: %s\n", error.c_str());
    return false;
  }
  const auto plots = write_plots(report, out, error);
  if (!error.empty()) {
    std::fprintf(stderr, "streamrt bench: %s\n", error.c_str());
    return false;
  }
  std::fprintf(stderr, "streamrt bench: wrote %s, %s", json_path.c_str(), md_path.c_str());
  for (const auto& p : plots) std::fprintf(stderr, ", %s", p.c_str());
  std::fprintf(stderr, " (%.1f s)\n", report.wall_seconds);
  return true;
}

}  // namespace
}  // namespace bench

int run_bench(int argc, char** argv) {
  using namespace bench;
  CommandLine cl;
  if (const auto done = parse_command_line(argc, argv, cl)) return *done;
  const Options& opts = cl.opts;
  if (!cl.idle_probe.empty()) return run_idle_probe(cl.idle_probe, cl.idle_seconds);

  const auto t_start = std::chrono::steady_clock::now();
  const auto cal = streamrt_bench::calibrate();
  Report report;
  report.options = opts;
  report.command_line = cl.text;
  report.machine = describe_machine(cal.iters_per_us);
  Suite suite = make_suite(opts, cal.iters_per_us, self_exe());

  if (cl.list) {
    list_jobs(suite);
    return 0;
  }
  if (suite.jobs.empty()) {
    std::fprintf(stderr, "streamrt bench: --filter '%s' matches no job (see --list)\n",
                 opts.filter.c_str());
    return 2;
  }
  std::error_code ec;
  std::filesystem::create_directories(opts.out, ec);
  if (ec) {
    std::fprintf(stderr, "streamrt bench: cannot create output folder '%s': %s\n", opts.out.c_str(),
                 ec.message().c_str());
    return 1;
  }

  std::fprintf(stderr,
               "streamrt bench%s: %zu jobs, %d hardware threads (%s), streamrt workers %d, "
               "load %.2f\n",
               opts.quick ? " --quick" : "", suite.jobs.size(), report.machine.hardware_threads,
               report.machine.cpu_model.c_str(), report.machine.streamrt_workers,
               report.machine.load_before[0]);

  // Start-up transients of the process must not fall on the first job: OpenBLAS (linked by the
  // ops layer and by the direct-BLAS peer) keeps a thread spinning for about 0.1 s after it is
  // loaded, which took a core from whichever job ran first (docs/performance.md, "How the
  // figures are taken"). The idle case waits the same way before it measures.
  std::this_thread::sleep_for(kStartupSettle);
  const bool streamrt_failed = run_jobs(suite, opts, report);

  report.peers = suite.peers;
  describe_peers(report.peers);
  if (::getloadavg(report.machine.load_after, 3) != 3) {
    std::fill_n(report.machine.load_after, 3, -1.0);
  }
  report.wall_seconds = seconds_since(t_start);
  if (!write_outputs(report, opts.out)) return 1;
  if (streamrt_failed) {
    std::fputs("streamrt bench: a streamrt job FAILED (see above)\n", stderr);
    return 1;
  }
  return 0;
}

}  // namespace streamrt_tool
