#pragma once
// Intra-op parallelism: the runtime's contract for host kernels (ops, graph replays), in the shape
// of ATen's Parallel.h. Kernels use only this; it forwards to the intra-op hook of the backend
// registered for DeviceType::CPU (impl::IntraOpParallel, which the CPU backend implements on its
// worker pool), so there is no second pool and never more runnable threads than workers + the
// caller. One atomic load and one virtual call per parallel_for.
#include <atomic>
#include <cstdint>
#include <functional>

#include "streamrt/impl/backend.hpp"
#include "streamrt/impl/host_capabilities.hpp"

namespace streamrt::runtime {

// The host's intra-op hook: the CPU backend's, set by the backend table when a CPU backend is
// registered; null until then (or for a CPU backend without one).
extern std::atomic<impl::IntraOpParallel*> g_host_parallel;

// The hook when g_host_parallel is null: runs kernels on the calling thread. Never blocks.
impl::IntraOpParallel& host_parallel_slow() noexcept;

inline impl::IntraOpParallel& host_parallel() noexcept {
  // Acquire: pairs with the table's release store, so the hook's object is fully built.
  impl::IntraOpParallel* p = g_host_parallel.load(std::memory_order_acquire);
  if (p != nullptr) [[likely]] {
    return *p;
  }
  return host_parallel_slow();
}

// Calls f(b, e) for consecutive sub-ranges covering [begin, end), none smaller than `grain` items
// (except the last), spread over the caller and the workers idle at the call (help-first: only
// they are asked to help). Blocks until every sub-range has finished; rethrows the first exception
// (sub-ranges not started by then are skipped). Runs f(begin, end) inline, at no cost, when the
// range is one grain, no worker is idle (every one runs its own stream's work), or when called
// from inside parallel_for (no nesting); never waits for a worker that is busy elsewhere
// (impl::IntraOpParallel::parallel_for). Thread-safe.
inline void parallel_for(std::int64_t begin, std::int64_t end, std::int64_t grain,
                         const std::function<void(std::int64_t, std::int64_t)>& f) {
  host_parallel().parallel_for(begin, end, grain, f);
}

// The number of threads parallel_for can spread over (the CPU worker count in effect). Never
// blocks after the first call (which may start the pool).
inline int get_num_threads() {
  return host_parallel().num_threads();
}

// True on a thread that is running a parallel_for sub-range.
inline bool in_parallel_region() noexcept {
  return host_parallel().in_parallel_region();
}

}  // namespace streamrt::runtime
