// The CPU backend's intra-op parallelism (impl::IntraOpParallel, used by core/intra_op.hpp) on its
// WorkerPool: the caller runs chunks itself and idle workers join in; chunks are claimed
// dynamically, so when every worker is busy with other streams the caller does them all.
#include "parallel.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <memory>
#include <mutex>
#include <new>

#include "clock.hpp"
#include "cpu_backend.hpp"
#include "parker.hpp"
#include "worker_pool.hpp"

namespace streamrt::cpu {
namespace {

thread_local int tls_parallel_depth = 0;

// How long the caller polls for the last chunks (run by other workers) before it parks. Chunks
// are sized to take much longer than a wake-up (docs/performance.md, "Figures behind constants"),
// so this covers the tail imbalance only.
constexpr auto kJoinSpin = std::chrono::microseconds(50);

struct ForState {
  std::int64_t base = 0;  // chunks cover [base, base + n)
  std::int64_t n = 0;
  std::int64_t chunk = 0;
  std::int64_t num_chunks = 0;
  // Only dereferenced by a thread that claimed a chunk; the caller waits for every claimed chunk
  // before it returns, so the function outlives all its uses.
  const std::function<void(std::int64_t, std::int64_t)>* fn = nullptr;
  std::atomic<std::int64_t> next{0};
  std::atomic<std::int64_t> done{0};
  std::atomic<bool> failed{false};
  std::mutex error_mutex;
  std::exception_ptr error;  // guarded by error_mutex
  std::shared_ptr<Parker> caller;

  // Claims and runs chunks until none is left. A helper (a worker running a ChunkTask) that finds
  // none left counts itself idle before it reports its last chunk done: the caller, once every
  // chunk is reported, may split again at once (back-to-back loops, graph replays), and help-first
  // asks only the workers counted idle then.
  void work(bool helper) noexcept {
    ++tls_parallel_depth;
    // Relaxed: a claim only needs atomicity; the chunk's inputs were published to this thread by
    // the pool's queue mutex (helpers) or are the caller's own.
    std::int64_t i = next.fetch_add(1, std::memory_order_relaxed);
    while (i < num_chunks) {
      run_chunk(i);
      const std::int64_t j = next.fetch_add(1, std::memory_order_relaxed);
      if (helper && j >= num_chunks) {
        if (WorkerPool* p = WorkerPool::current()) p->leave_busy();
      }
      // Release: the caller's acquire load of `done` sees this chunk's writes (and the count).
      if (done.fetch_add(1, std::memory_order_acq_rel) + 1 == num_chunks) caller->unpark();
      i = j;
    }
    --tls_parallel_depth;
  }

  void run_chunk(std::int64_t i) noexcept {
    if (failed.load(std::memory_order_relaxed)) return;
    const std::int64_t begin = i * chunk;
    const std::int64_t end = std::min(n, begin + chunk);
    try {
      (*fn)(base + begin, base + end);
    } catch (...) {
      std::lock_guard lock(error_mutex);
      if (!error) error = std::current_exception();
      failed.store(true, std::memory_order_relaxed);
    }
  }
};

class ChunkTask final : public Task {
 public:
  explicit ChunkTask(std::shared_ptr<ForState> s) : state_(std::move(s)) {}
  void run() noexcept override {
    state_->work(/*helper=*/true);
    state_.reset();
  }
  // Most urgent: a helper finishes an op that is already running, so it goes before new items.
  int level() const noexcept override { return 0; }

 private:
  std::shared_ptr<ForState> state_;
};

}  // namespace

WorkerPool& CpuParallel::pool() {
  // Splits stay in the pool of the work that asks: the innermost stream this thread runs (a
  // partition's stream, also when a waiting host thread runs its item), else this worker's own
  // pool (a callback), else the shared pool (a host thread).
  if (const auto* s = CpuStream::innermost_running()) return s->pool();
  if (auto* own = WorkerPool::current()) return *own;
  return backend_.pool();
}

int CpuParallel::num_threads() {
  return pool().size();
}

bool CpuParallel::in_parallel_region() const noexcept {
  return tls_parallel_depth > 0;
}

void CpuParallel::parallel_for(std::int64_t begin, std::int64_t end, std::int64_t grain,
                               const std::function<void(std::int64_t, std::int64_t)>& f) {
  if (end <= begin) return;
  const std::int64_t n = end - begin;
  grain = std::max<std::int64_t>(grain, 1);
  WorkerPool& p = pool();
  const int workers = p.size();
  // At most 4 chunks per worker: enough to even out chunks of unequal cost.
  const std::int64_t num_chunks =
      std::min(4 * static_cast<std::int64_t>(workers), (n + grain - 1) / grain);
  // Help-first: only workers idle now are asked to help, so that an op on a busy pool runs
  // inline at no cost (a busy worker would reach a helper's task only after its own). Under the
  // schedule fuzzer every split is made, so that its orders are explored whatever the load.
  std::int64_t helpers = std::min<std::int64_t>(num_chunks, workers) - 1;
  if (!p.randomized()) helpers = std::min<std::int64_t>(helpers, p.idle_workers());
  if (helpers <= 0 || tls_parallel_depth > 0) {
    ++tls_parallel_depth;
    struct Leave {
      ~Leave() { --tls_parallel_depth; }
    } leave;
    f(begin, end);
    return;
  }
  auto state = std::make_shared<ForState>();
  state->base = begin;
  state->n = n;
  state->chunk = (n + num_chunks - 1) / num_chunks;
  state->num_chunks = (n + state->chunk - 1) / state->chunk;
  state->fn = &f;
  state->caller = this_thread_parker();
  helpers = std::min<std::int64_t>(helpers, state->num_chunks - 1);
  for (std::int64_t i = 0; i < helpers; ++i) {
    // Out of memory for a helper's task: fewer helpers. The caller claims the chunks left itself,
    // and returns only once every chunk is done, so a queued helper never outlives `f`.
    try {
      p.push(std::make_shared<ChunkTask>(state));
    } catch (const std::bad_alloc&) {
      break;
    }
  }
  state->work(/*helper=*/false);
  // Join: every chunk is claimed now; wait for those running on other threads.
  const auto spin_until = Clock::now() + kJoinSpin;
  for (unsigned i = 1; state->done.load(std::memory_order_acquire) < state->num_chunks; ++i) {
    if (i % 64 == 0 && Clock::now() >= spin_until) {
      state->caller->park();  // woken by the last chunk (or spuriously: re-checked)
    } else {
      cpu_relax();
    }
  }
  if (state->failed.load(std::memory_order_relaxed)) {
    std::lock_guard lock(state->error_mutex);
    std::rethrow_exception(state->error);
  }
}

}  // namespace streamrt::cpu
