// `streamrt stress`: the model-checked random programs of the stress test (stress_model.hpp), in
// rounds at 1, 2, 4 and 8 workers in turn, for as long as asked. Prints progress (a line a second:
// operations checked, violations, memory, file descriptors) and fails on any violation, or when
// resident memory or open file descriptors grew over the run (checked against the state after the
// first round at every worker count, once the runtime's caches and threads exist).
#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "commands.hpp"
#include "stress_model.hpp"

namespace streamrt_tool {
namespace {

struct StressOptions {
  double seconds = 60;
  long ops = 100'000;      // per round
  std::uint64_t seed = 0;  // 0: from the clock
};

void stress_usage(std::FILE* out) {
  std::fputs(
      "usage: streamrt stress [--minutes N | --seconds N] [--ops N] [--seed N]\n"
      "\n"
      "Runs the model-checked random programs (host threads launching, failing, waiting,\n"
      "cancelling and synchronizing over streams and events; every outcome checked against a\n"
      "sequential model of streamrt's rules) in rounds at 1, 2, 4 and 8 workers, and fails on\n"
      "any violation or on memory or file descriptors that grow over the run.\n"
      "\n"
      "  --minutes N   how long to run (default 1)\n"
      "  --seconds N   the same in seconds\n"
      "  --ops N       operations per round (default 100000)\n"
      "  --seed N      the first round's programs (replays a run; default from the clock)\n",
      out);
}

bool parse_number(const char* text, double lo, double hi, double& out) {
  char* end = nullptr;
  out = std::strtod(text, &end);
  return end != text && *end == '\0' && out >= lo && out <= hi;
}

long resident_kib() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return -1;
  long size = 0, resident = 0;
  const int got = std::fscanf(f, "%ld %ld", &size, &resident);
  std::fclose(f);
  return got == 2 ? resident * (sysconf(_SC_PAGESIZE) / 1024) : -1;
}

int open_fds() {
  DIR* d = opendir("/proc/self/fd");
  if (d == nullptr) return -1;
  int n = 0;
  while (readdir(d) != nullptr) ++n;
  closedir(d);
  return n - 3;  // ".", ".." and the directory's own descriptor
}

// Returns 0 on success, 2 on a bad option (after printing why), -1 for --help (printed).
int parse(int argc, char** argv, StressOptions& opt) {
  // Every option takes a value: each pass reads one pair.
  for (int i = 1; i < argc; i += 2) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      stress_usage(stdout);
      return -1;
    }
    double v = 0;
    const bool has_value = i + 1 < argc;
    if ((arg == "--minutes" || arg == "--seconds") && has_value &&
        parse_number(argv[i + 1], 0, 1e7, v)) {
      opt.seconds = arg == "--minutes" ? v * 60 : v;
    } else if (arg == "--ops" && has_value && parse_number(argv[i + 1], 16, 1e9, v)) {
      opt.ops = static_cast<long>(v);
    } else if (arg == "--seed" && has_value && parse_number(argv[i + 1], 1, 1.8e19, v)) {
      opt.seed = std::strtoull(argv[i + 1], nullptr, 10);
    } else {
      std::fprintf(stderr,
                   "streamrt stress: bad option or value at '%s' (see --help; --minutes and "
                   "--seconds take a number >= 0, --ops 16 to 1e9, --seed a positive integer)\n",
                   arg.c_str());
      return 2;
    }
  }
  return 0;
}

}  // namespace

int run_stress(int argc, char** argv) {
  StressOptions opt;
  if (const int rc = parse(argc, argv, opt); rc != 0) return rc < 0 ? 0 : rc;
  if (opt.seed == 0) {
    opt.seed =
        static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) &
        0xffffffffULL;
  }
  static constexpr int kWorkers[] = {1, 2, 4, 8};
  std::printf("streamrt stress: %.0f s of rounds of %ld operations (seed %" PRIu64
              "), workers 1, 2, 4, 8 in turn\n",
              opt.seconds, opt.ops, opt.seed);
  const auto start = std::chrono::steady_clock::now();
  long rounds = 0, checked = 0, violations = 0, base_kib = -1;
  int base_fds = -1;
  auto last_line = start - std::chrono::seconds(1);
  do {
    StressRound round;
    round.workers = kWorkers[rounds % 4];
    round.ops = opt.ops;
    round.seed = opt.seed + static_cast<std::uint64_t>(rounds);
    const StressReport r = run_stress_round(round);
    ++rounds;
    checked += r.totals.ops;
    violations += static_cast<long>(r.violations.size());
    for (const auto& v : r.violations) std::printf("  violation: %s\n", v.c_str());
    // The baseline: after the first round at every worker count (after the first round, for a
    // run too short for that), once the pool's threads and the caches exist.
    if (rounds == 1 || rounds == 4) {
      base_kib = resident_kib();
      base_fds = open_fds();
    }
    // A line a second at most (and every round with a violation).
    const auto now = std::chrono::steady_clock::now();
    if (now - last_line < std::chrono::seconds(1) && r.violations.empty()) continue;
    last_line = now;
    std::printf("round %ld: %d workers, seed %" PRIu64
                ", %ld operations checked in %.2f s (%ld items: %ld ran, %ld skipped, %ld "
                "dropped), %zu violations; RSS %ld MiB, %d open fds\n",
                rounds, round.workers, round.seed, r.totals.ops, r.seconds, r.totals.items,
                r.totals.ran, r.totals.skipped, r.totals.dropped, r.violations.size(),
                resident_kib() / 1024, open_fds());
    std::fflush(stdout);
  } while (std::chrono::steady_clock::now() - start < std::chrono::duration<double>(opt.seconds));
  const long end_kib = resident_kib();
  const int end_fds = open_fds();
  // Flat: file descriptors exactly; memory within what allocator caches and a round's peak vary
  // by (an eighth of the baseline, at least 64 MiB), far below what a per-round leak adds up to.
  const long allowed_kib = std::max<long>(64 * 1024, base_kib / 8);
  const bool memory_flat = end_kib - base_kib <= allowed_kib;
  const bool fds_flat = end_fds == base_fds;
  std::printf(
      "%ld rounds, %ld operations checked, %ld violations; RSS %ld -> %ld MiB (%s), open "
      "fds %d -> %d (%s)\n",
      rounds, checked, violations, base_kib / 1024, end_kib / 1024, memory_flat ? "flat" : "GREW",
      base_fds, end_fds, fds_flat ? "flat" : "GREW");
  return violations == 0 && memory_flat && fds_flat ? 0 : 1;
}

}  // namespace streamrt_tool
