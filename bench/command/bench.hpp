#pragma once
// `streamrt bench`: shared types of the runner (bench.cpp), the cases (bench_cases.cpp), the
// reports (bench_report.cpp) and the plots (bench_svg.cpp). Single-threaded driver code.
#include <cstdio>
#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace streamrt_tool::bench {

// Options from the command line.
struct Options {
  bool quick = false;
  std::string filter;   // ECMAScript regex searched in "<case id>/<peer id>"; empty = all
  int repetitions = 0;  // 0 = the case's default
  std::string out = "bench-out";
};

// Which way a figure is better.
enum class Better { kLower, kHigher };

// One case (one row of the table): what is measured and in which unit.
struct CaseSpec {
  std::string id;     // "granularity/item=10us/streams=2": stable, used by --filter and JSON
  std::string group;  // "granularity": the plot and section it belongs to
  std::string title;  // "granularity 10 us items, 2 streams"
  std::string unit;   // "ns", "ns/item", "x", "%", "items/s", "ms CPU/s"
  Better better = Better::kLower;
  std::vector<std::pair<std::string, double>> params;  // {"item_us", 10}, {"streams", 2}
  int reps = 11;                                       // default repetitions (full run)
  int quick_reps = 3;                                  // default repetitions with --quick
  int warmup = 1;                                      // unrecorded repetitions first
  std::string target;       // streamrt's target for the case, as text ("<= 1 us"); empty = none
  double target_value = 0;  // the same in `unit` (0 = none)
};

// A peer as seen by the runner.
struct PeerInfo {
  std::string id;       // "tbb_strand"
  std::string name;     // "tbb strand"
  bool built = true;    // compiled in (its library was found by CMake)
  std::string reason;   // why not built / why it failed to start
  std::string version;  // library version text, filled when it starts
  int workers = 0;
};

// One peer's job in one case. `setup` runs once (streams and other state are made there) and
// returns the function that runs one repetition and returns its figure.
struct Job {
  std::size_t case_index = 0;
  std::size_t peer_index = 0;
  std::string skip;  // non-empty: reported as skipped with this reason, nothing runs
  std::string note;  // shown with the result (e.g. a reduced item count)
  std::function<std::function<double()>()> setup;
};

// Thrown by a job's setup when its peer could not start (e.g. no OpenCL platform): the job is
// reported as skipped with the message.
struct PeerUnavailable : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Summary statistics of the repetitions.
struct Stats {
  double median = 0, p25 = 0, p75 = 0, min = 0, max = 0;
};
Stats stats_of(std::vector<double> samples);

// Outcome of one job.
struct Result {
  std::size_t peer_index = 0;
  std::string status;  // "ok", "skipped", "failed"
  std::string reason;  // for skipped/failed
  std::string note;
  std::vector<double> samples;
  Stats stats;
};

// A case and the results of every peer, in peer order.
struct CaseResult {
  CaseSpec spec;
  std::vector<Result> results;
  // streamrt's result, or null when it did not run.
  const Result* streamrt() const;
  // True when the case belongs to `group`.
  bool group_is(const char* group) const { return spec.group == group; }
};

// Describes the machine and the libraries.
struct Machine {
  std::string cpu_model, kernel, date, compiler, memory;
  int hardware_threads = 0, streamrt_workers = 0;
  double load_before[3] = {0, 0, 0}, load_after[3] = {0, 0, 0};
  double calibration_iters_per_us = 0;
  std::vector<std::pair<std::string, std::string>> libraries;
  std::vector<std::pair<std::string, std::string>> environment;
};

// Everything a run produced.
struct Report {
  Options options;
  Machine machine;
  std::vector<PeerInfo> peers;
  std::vector<CaseResult> cases;
  double wall_seconds = 0;
  std::string command_line;
};

// The suite: cases, peers, and one job per (case, peer) that passes the filter.
struct Suite {
  std::vector<CaseSpec> cases;
  std::vector<PeerInfo> peers;
  std::vector<Job> jobs;
};

// Builds the suite (bench_cases.cpp). Nothing runs yet; peers start on their first job.
// `self_exe` is this program, re-run for the idle probes.
Suite make_suite(const Options& opts, double iters_per_us, const std::string& self_exe);

// The jobs of the graph cases (bench_graph.cpp): replay of a captured graph (streamrt's column),
// the same items launched directly, and oneTBB's flow::graph; their peers are added here.
void add_graph_jobs(Suite& suite, std::size_t streamrt_pi, bool quick,
                    std::vector<std::function<void(PeerInfo&)>>& describe);

// Why a peer that needs `library` is not in this program: the installed streamrt tool leaves out
// every peer that needs a library streamrt does not load itself (bench/streamrt_compare, built
// with STREAMRT_BENCH_ALL_PEERS, has them all); there, the library was not found (bench_cases.cpp).
std::string missing_peer_reason(const char* library);

// Fills versions, worker counts and start failures of the peers after a run (bench_cases.cpp).
void describe_peers(std::vector<PeerInfo>& peers);

// `--idle-probe PEER --idle-seconds S`: prints the idle CPU ms/s of PEER (bench_cases.cpp).
int run_idle_probe(const std::string& peer_id, double seconds);

// Library versions known at build time and from the libraries themselves (bench_cases.cpp).
std::vector<std::pair<std::string, std::string>> library_versions();

// Output (bench_report.cpp).
// Fewest repetitions for which a spread is shown: a single run has none.
constexpr std::size_t kMinSpreadSamples = 3;
// "±4.2%": half the interquartile range, relative to the median; "" under kMinSpreadSamples runs.
std::string spread_text(const Result& r);
// Why a figure the work itself cannot produce was measured (an efficiency above 100 %, a speedup
// above the core count), for the result's line; "" for every other figure.
std::string caveat(const Report& report, const CaseSpec& c, const Result& r);
void print_table(const Report& r, std::FILE* out);
bool write_json(const Report& r, const std::string& path, std::string& error);
bool write_markdown(const Report& r, const std::string& path, std::string& error);
std::string format_value(double v, const std::string& unit);

// Plots (bench_svg.cpp). Returns the files written (names relative to the output folder).
std::vector<std::string> write_plots(const Report& r, const std::string& dir, std::string& error);

}  // namespace streamrt_tool::bench
