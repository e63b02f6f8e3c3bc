#pragma once
// The model-checked random programs of the stress test, as a library of the tool: T host threads
// run random programs over K streams and E events (launches, some failing; records and
// re-records; cross-stream waits; cancels; host synchronizes with and without time-outs; event
// waits; state queries; completion callbacks; resets). Every operation is logged with a global
// sequence number taken under a per-stream (and per-event) lock, so the log is a linearization
// consistent with each stream's submission order. Afterwards a sequential model of streamrt's
// rules replays the log and checks that every item ran exactly once or was skipped or dropped as
// the model predicts, that order and waits held (vector clocks), and that every wait, query and
// callback saw the failure the model predicts (docs/reliability.md, "The model-based stress
// test"). Public API only. Used by `streamrt stress` and by tests/stress/.
#include <cstdint>
#include <string>
#include <vector>

namespace streamrt_tool {

//! What one round runs: `ops` operations over kStressHostThreads host threads, `workers` CPU
//! workers (set for the round and restored after it), the programs drawn from `seed`.
struct StressRound {
  int workers = 1;
  long ops = 100'000;
  std::uint64_t seed = 1;
};

//! How many of each thing a round did.
struct StressTotals {
  long ops = 0, items = 0, ran = 0, host_run = 0, skipped = 0, dropped = 0, failing = 0,
       cancels = 0, syncs = 0, waits = 0, event_waits = 0, callbacks = 0, timeouts = 0;
};

//! A round's outcome: what it did, how long it took, and the model's violations (empty when the
//! runtime behaved as the model says; at most 20 are kept).
struct StressReport {
  StressTotals totals;
  long ops_done = 0;  // checked operations plus unlogged inspections
  double seconds = 0;
  bool host_run = false;  // host-run items were possible (then some must have run)
  std::vector<std::string> violations;
};

//! Host threads of a round, streams and events it uses.
inline constexpr int kStressHostThreads = 4;
inline constexpr int kStressStreams = 6;
inline constexpr int kStressEvents = 8;

//! Runs one round and checks it against the model. Blocks for the round (seconds); not to be run
//! concurrently with another round or with set_num_threads from elsewhere.
StressReport run_stress_round(const StressRound& round);

}  // namespace streamrt_tool
