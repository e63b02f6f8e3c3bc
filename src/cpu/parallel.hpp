#pragma once
// Intra-op parallelism on the shared worker pool (no second pool, so never more runnable threads
// than workers + the caller). The caller runs chunks itself and idle workers join in; chunks are
// claimed dynamically, so when every worker is busy with other streams the caller simply does all
// the chunks (no waiting on a queue, no deadlock).
#include <cstdint>
#include <functional>

namespace streamrt::cpu {

// Calls fn(begin, end) for consecutive sub-ranges covering [0, n), at most `max_chunks` of them
// and none smaller than `grain` items (except the last). Blocks until every chunk has finished;
// rethrows the first exception (chunks not started by then are skipped). Runs inline when the
// range is one chunk, the pool has one worker, or when called from inside a chunk (no nesting).
// Thread-safe. `max_chunks` <= 0 means 4 per worker.
void parallel_for(std::int64_t n, std::int64_t grain,
                  const std::function<void(std::int64_t, std::int64_t)>& fn,
                  std::int64_t max_chunks = 0);

// The number of workers parallel_for can spread over (the pool size). Never blocks.
int parallel_workers();

// True inside a parallel_for chunk on this thread.
bool in_parallel_region() noexcept;

}  // namespace streamrt::cpu
