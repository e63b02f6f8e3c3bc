#pragma once
// The CPU backend's settings from the environment (STREAMRT_NUM_THREADS, STREAMRT_SCHEDULE,
// STREAMRT_HOST_RUN, STREAMRT_WORKER_SPIN_US, STREAMRT_WORKER_BATCH, STREAMRT_FORK_TIMEOUT,
// STREAMRT_LAUNCH_BLOCKING), read and validated once, in one place. The backend checks them before
// it hands out a stream, so a bad value is an Error before anything can be queued.
#include <cstdint>

namespace streamrt::cpu {

// How the pool picks work (STREAMRT_SCHEDULE). kRandom and kSerial are schedule fuzzers for
// finding missing dependencies in user code, not for production.
struct Schedule {
  enum class Mode : std::uint8_t {
    kNormal,  // FIFO per priority level, streams keep their worker while nothing else is ready
    kRandom,  // a seeded random pick among the ready tasks of the most urgent level; streams
              // yield after every item (no time slice); workers pause at random
    kSerial,  // one worker runs everything (the backend sizes the pool to 1)
  };
  Mode mode = Mode::kNormal;
  std::uint64_t seed = 0;
};

// How long an idle worker polls for work before it parks, by default. Waking a parked thread
// costs several us (docs/performance.md, "Figures behind constants"), polling costs a core: 50 us
// covers the gap between back-to-back launches without making an idle process busy (paid once
// per burst). Where the cores are shared (several MPI ranks per machine), shorter is better.
inline constexpr std::int64_t kDefaultWorkerSpinUs = 50;
// The longest accepted poll (one second): past it a poll is a busy process, not a hand-over.
inline constexpr std::int64_t kMaxWorkerSpinUs = 1'000'000;

// The most workers a pool may have (STREAMRT_NUM_THREADS, set_num_threads): far past any
// machine's cores, and low enough that asking for it fails with a clear error rather than by
// exhausting the process's threads.
inline constexpr int kMaxNumThreads = 4096;

// How long fork() waits, by default, for the stream work queued when it is called
// (STREAMRT_FORK_TIMEOUT, docs/reliability.md "fork()"): long enough for work a program queued just
// before forking (a DataLoader starting its workers), short enough that a stream blocked for ever
// (a user event nobody completes) delays a fork noticeably rather than hanging it.
inline constexpr std::int64_t kDefaultForkTimeoutMs = 10'000;
// The longest accepted one (a day): longer is a hang, not a bound.
inline constexpr std::int64_t kMaxForkTimeoutMs = 86'400'000;

struct Config {
  int num_threads = 1;  // workers asked for: STREAMRT_NUM_THREADS, else the hardware threads
  Schedule schedule;
  bool host_run = true;  // STREAMRT_HOST_RUN: a waiting host thread may run its stream's items
  // STREAMRT_WORKER_SPIN_US: an idle worker's poll before it parks, in microseconds.
  std::int64_t worker_spin_us = kDefaultWorkerSpinUs;
  bool worker_batch = false;  // STREAMRT_WORKER_BATCH: workers run under SCHED_BATCH
  // STREAMRT_FORK_TIMEOUT (seconds, decimals allowed): fork()'s wait for pending work, in ms.
  std::int64_t fork_timeout_ms = kDefaultForkTimeoutMs;
  // STREAMRT_LAUNCH_BLOCKING: every host launch waits for its own completion (debugging).
  bool launch_blocking = false;
};

// Parses the settings' texts (null or empty = unset). Throws Error naming the variable, the bad
// value and the accepted values. Pure: reads no environment.
Config parse_config(const char* num_threads, const char* schedule, int hardware_threads,
                    const char* host_run = nullptr, const char* worker_spin_us = nullptr,
                    const char* worker_batch = nullptr, const char* fork_timeout = nullptr,
                    const char* launch_blocking = nullptr);

// The process's settings, parsed from the environment on the first call. Throws the Error of a
// bad value on every call. Thread-safe; never blocks after the first call.
const Config& config();

}  // namespace streamrt::cpu
