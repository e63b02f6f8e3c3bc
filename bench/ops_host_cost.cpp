// Two figures that need no peer library: the host cost of one small op (CPU time of
// the launching thread only, so that scheduling delays on a busy machine do not count) and the
// time and page faults of repeated 4096^2 float32 adds (fresh outputs each time, as users write
// them). Usage: streamrt_ops_host_cost [workers]; figures go to docs/performance.md.
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>

#include "streamrt/streamrt.hpp"

namespace {

double thread_cpu_ns() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e9 + static_cast<double>(t.tv_nsec);
}

long page_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt + u.ru_majflt;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace streamrt;
  using Clock = std::chrono::steady_clock;
  cpu::set_num_threads(argc > 1 ? std::atoi(argv[1]) : 1);
  {
    Stream s;
    StreamContext ctx(s);
    Tensor a = ones({16}), b = ones({16});
    s.synchronize();
    constexpr int kOps = 20000;
    double best_wall = 1e18, best_cpu = 1e18;
    for (int rep = 0; rep < 15; ++rep) {
      const auto t0 = Clock::now();
      const double c0 = thread_cpu_ns();
      for (int i = 0; i < kOps; ++i) {
        Tensor c = a + b;
      }
      const double c1 = thread_cpu_ns();
      const auto t1 = Clock::now();
      s.synchronize();
      best_wall = std::min(best_wall, std::chrono::duration<double, std::nano>(t1 - t0).count());
      best_cpu = std::min(best_cpu, c1 - c0);
    }
    std::printf(
        "a + b on 16 float32: %.0f ns/op wall, %.0f ns/op CPU of the launching thread "
        "(best of 15 x %d)\n",
        best_wall / kOps, best_cpu / kOps, kOps);
  }
  {
    const std::int64_t n = 4096 * 4096;
    Tensor a = ones({n}), b = ones({n});
    a.wait();
    b.wait();
    constexpr int kReps = 20;
    double best = 1e18;
    const long f0 = page_faults();
    for (int i = 0; i < kReps; ++i) {
      const auto t0 = Clock::now();
      Tensor c = a + b;
      c.wait();
      best = std::min(best, std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    }
    std::printf("add of 4096^2 float32: best of %d %.1f ms, %.1f page faults per add\n", kReps,
                best, static_cast<double>(page_faults() - f0) / kReps);
  }
}
