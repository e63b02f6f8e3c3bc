// Environment settings of the CPU backend (see env_config.hpp).
#include "env_config.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "streamrt/error.hpp"

namespace streamrt::cpu {
namespace {

// A decimal integer in [lo, hi], digits only (no sign, spaces or suffix), into `out`; false
// otherwise.
bool parse_decimal(const char* text, long long lo, long long hi, long long& out) {
  char* end = nullptr;
  errno = 0;
  out = std::strtoll(text, &end, 10);
  const bool digits_only = *text >= '0' && *text <= '9' && *end == '\0';  // strtoll skips spaces
  return digits_only && errno != ERANGE && out >= lo && out <= hi;
}

int parse_num_threads(const char* text, int hardware_threads) {
  if (text == nullptr || *text == '\0') return hardware_threads;
  long long n = 0;
  if (!parse_decimal(text, 1, kMaxNumThreads, n)) {
    throw Error(std::string("STREAMRT_NUM_THREADS='") + text +
                "' is not a worker count: set it to an integer from 1 to " +
                std::to_string(kMaxNumThreads) + ", or unset it to use all " +
                std::to_string(hardware_threads) + " hardware threads");
  }
  return static_cast<int>(n);
}

bool parse_schedule_text(const char* text, Schedule& out) {
  out = Schedule{};
  if (text == nullptr || *text == '\0' || std::strcmp(text, "default") == 0) return true;
  if (std::strcmp(text, "serial") == 0) {
    out.mode = Schedule::Mode::kSerial;
    return true;
  }
  constexpr const char* kRandom = "random:";
  if (std::strncmp(text, kRandom, std::strlen(kRandom)) != 0) return false;
  const char* digits = text + std::strlen(kRandom);
  if (*digits < '0' || *digits > '9') return false;
  char* end = nullptr;
  errno = 0;
  const unsigned long long seed = std::strtoull(digits, &end, 10);
  if (*end != '\0' || errno == ERANGE) return false;
  out.mode = Schedule::Mode::kRandom;
  out.seed = seed;
  return true;
}

Schedule parse_schedule(const char* text) {
  Schedule s;
  if (!parse_schedule_text(text, s)) {
    throw Error(std::string("STREAMRT_SCHEDULE='") + text +
                "' is not a schedule: use random:SEED (SEED a decimal integer, e.g. random:42) to "
                "pick among ready streams at random, serial to run everything on one worker, or "
                "unset it for the normal scheduler");
  }
  return s;
}

bool parse_host_run(const char* text) {
  if (text == nullptr || *text == '\0' || std::strcmp(text, "1") == 0) return true;
  if (std::strcmp(text, "0") == 0) return false;
  throw Error(std::string("STREAMRT_HOST_RUN='") + text +
              "' is not a switch: use 0 to keep all stream work on the worker threads (for "
              "thread-affine work), 1 or unset to let a waiting host thread run ready items");
}

std::int64_t parse_worker_spin(const char* text) {
  if (text == nullptr || *text == '\0') return kDefaultWorkerSpinUs;
  long long us = 0;
  if (!parse_decimal(text, 0, kMaxWorkerSpinUs, us)) {
    throw Error(std::string("STREAMRT_WORKER_SPIN_US='") + text +
                "' is not a poll time: set it to microseconds from 0 to " +
                std::to_string(kMaxWorkerSpinUs) +
                " (how long an idle worker polls before it sleeps; 0: after one short round), or "
                "unset it for the default " +
                std::to_string(kDefaultWorkerSpinUs));
  }
  return us;
}

bool parse_worker_batch(const char* text) {
  if (text == nullptr || *text == '\0' || std::strcmp(text, "0") == 0) return false;
  if (std::strcmp(text, "1") == 0) return true;
  throw Error(std::string("STREAMRT_WORKER_BATCH='") + text +
              "' is not a switch: use 1 to run the workers under SCHED_BATCH (a woken worker "
              "does not preempt the running thread; for processes sharing cores), 0 or unset for "
              "the default policy");
}

std::int64_t parse_fork_timeout(const char* text) {
  if (text == nullptr || *text == '\0') return kDefaultForkTimeoutMs;
  char* end = nullptr;
  errno = 0;
  const double seconds = std::strtod(text, &end);
  const bool number_only = *text >= '0' && *text <= '9' && *end == '\0';  // no sign, inf, nan
  const double ms = seconds * 1000.0;
  if (!number_only || errno == ERANGE || !(ms <= static_cast<double>(kMaxForkTimeoutMs))) {
    throw Error(std::string("STREAMRT_FORK_TIMEOUT='") + text +
                "' is not a time-out: set it to seconds from 0 to " +
                std::to_string(kMaxForkTimeoutMs / 1000) +
                " (how long fork() waits for queued stream work; 0: it does not wait), or unset "
                "it for the default " +
                std::to_string(kDefaultForkTimeoutMs / 1000));
  }
  return static_cast<std::int64_t>(ms);
}

bool parse_launch_blocking(const char* text) {
  if (text == nullptr || *text == '\0' || std::strcmp(text, "0") == 0) return false;
  if (std::strcmp(text, "1") == 0) return true;
  throw Error(std::string("STREAMRT_LAUNCH_BLOCKING='") + text +
              "' is not a switch: use 1 to make every launch wait for its own work (a failure is "
              "then raised by the call that queued it; for debugging), 0 or unset to launch "
              "asynchronously");
}

}  // namespace

Config parse_config(const char* num_threads, const char* schedule, int hardware_threads,
                    const char* host_run, const char* worker_spin_us, const char* worker_batch,
                    const char* fork_timeout, const char* launch_blocking) {
  Config c;
  c.num_threads = parse_num_threads(num_threads, hardware_threads);
  c.schedule = parse_schedule(schedule);
  c.host_run = parse_host_run(host_run);
  c.worker_spin_us = parse_worker_spin(worker_spin_us);
  c.worker_batch = parse_worker_batch(worker_batch);
  c.fork_timeout_ms = parse_fork_timeout(fork_timeout);
  c.launch_blocking = parse_launch_blocking(launch_blocking);
  return c;
}

const Config& config() {
  struct Parsed {
    Config config;
    std::string error;  // empty when every value is good
  };
  // Read once: the environment a process starts with is what configures it (a later setenv, or a
  // change in a fork child, is not seen).
  static const Parsed parsed = [] {
    const unsigned hw = std::thread::hardware_concurrency();
    try {
      return Parsed{
          parse_config(std::getenv("STREAMRT_NUM_THREADS"), std::getenv("STREAMRT_SCHEDULE"),
                       hw == 0 ? 1 : static_cast<int>(hw), std::getenv("STREAMRT_HOST_RUN"),
                       std::getenv("STREAMRT_WORKER_SPIN_US"), std::getenv("STREAMRT_WORKER_BATCH"),
                       std::getenv("STREAMRT_FORK_TIMEOUT"),
                       std::getenv("STREAMRT_LAUNCH_BLOCKING")),
          {}};
    } catch (const Error& e) {
      return Parsed{{}, e.what()};
    }
  }();
  if (!parsed.error.empty()) throw Error(parsed.error);
  return parsed.config;
}

}  // namespace streamrt::cpu
