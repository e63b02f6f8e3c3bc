#pragma once
// Intra-op parallelism: the runtime's contract for ops, in the shape of ATen's Parallel.h. Ops use
// only this; the CPU backend implements it on its worker pool (src/cpu/parallel.cpp), so there is
// no second pool and never more runnable threads than workers + the caller.
#include <cstdint>
#include <functional>

namespace streamrt::runtime {

// Calls f(b, e) for consecutive sub-ranges covering [begin, end), none smaller than `grain` items
// (except the last), spread over the caller and the workers idle at the call (help-first: only
// they are asked to help). Blocks until every sub-range has finished; rethrows the first exception
// (sub-ranges not started by then are skipped). Runs f(begin, end) inline, at no cost, when the
// range is one grain, no worker is idle (every one runs its own stream's work), or when called
// from inside parallel_for (no nesting). Never waits for a worker that is busy elsewhere: the
// caller runs what is left. Thread-safe.
void parallel_for(std::int64_t begin, std::int64_t end, std::int64_t grain,
                  const std::function<void(std::int64_t, std::int64_t)>& f);

// The number of threads parallel_for can spread over (the CPU worker count in effect). Never
// blocks after the first call (which may start the pool).
int get_num_threads();

// True on a thread that is running a parallel_for sub-range.
bool in_parallel_region() noexcept;

}  // namespace streamrt::runtime
