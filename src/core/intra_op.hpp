#pragma once
// The intra-op parallel contract as the graph layer uses it (the shape of ATen's Parallel.h),
// implemented by the CPU backend (src/cpu/intra_op.cpp). Graph replays run independent branches
// through it, so they share the stream workers (no second pool).
#include <cstdint>
#include <functional>

namespace streamrt::intra_op {

// Calls fn(begin, end) for consecutive sub-ranges of [0, n), each at least `grain` long, at most
// `max_chunks` of them (<= 0: the backend's choice). The caller runs chunks itself; idle workers
// join in. Blocks until all have run; rethrows the first exception (chunks not started by then are
// skipped). Runs inline when called from inside a chunk. Thread-safe.
void parallel_for(std::int64_t n, std::int64_t grain,
                  const std::function<void(std::int64_t, std::int64_t)>& fn,
                  std::int64_t max_chunks = 0);

// Threads parallel_for can spread over. Never blocks.
int num_workers();

}  // namespace streamrt::intra_op
