// Partitions of the CPU workers (cpu::Partition, include/streamrt/cpu.hpp): each has its own
// worker pool; the shared pool gives up as many workers while it lives. See docs/design.md,
// "Partitions".
#include "partition.hpp"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <new>
#include <string>
#include <thread>

#include "cpu_backend.hpp"
#include "streamrt/cpu.hpp"
#include "streamrt/error.hpp"
#include "streamrt/stream.hpp"

namespace streamrt::cpu {
namespace {

// How long a new partition or set_num_threads() that finds the workers reserved waits (see
// CpuBackend::wait_for_releases) for a partition that may be losing its last reference right now
// (far longer than a worker takes to leave its last item, even on a loaded machine), and for one
// already on its way out (its workers first finish their current task) before it reports the
// error.
constexpr auto kReleaseGrace = std::chrono::seconds(1);
constexpr auto kLeaveTimeout = std::chrono::seconds(60);

std::string list(const std::vector<int>& v) {
  std::string s = "{";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "}";
}

std::string describe(int workers, const std::vector<int>& cores) {
  return cores.empty() ? "Partition(" + std::to_string(workers) + " workers)"
                       : "Partition::pinned(" + list(cores) + ")";
}

// The cores this process may run on (its affinity mask).
std::vector<int> allowed_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return {};
  std::vector<int> out;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) out.push_back(c);
  }
  return out;
}

// The live partition that has pinned `core`, or null.
const PartitionEntry* pinned_by(const std::vector<PartitionEntry>& live, int core) {
  for (const auto& p : live) {
    if (std::find(p.cores.begin(), p.cores.end(), core) != p.cores.end()) return &p;
  }
  return nullptr;
}

// Throws Error when a core of `cores` is negative, repeated, outside the affinity mask or pinned
// by a partition of `live`.
void check_cores(const std::vector<int>& cores, const std::vector<PartitionEntry>& live) {
  const std::string what = describe(static_cast<int>(cores.size()), cores);
  const auto allowed = allowed_cores();
  for (std::size_t i = 0; i < cores.size(); ++i) {
    const int c = cores[i];
    if (c < 0) throw Error(what + ": core " + std::to_string(c) + " is negative");
    if (std::find(cores.begin(), cores.begin() + static_cast<std::ptrdiff_t>(i), c) !=
        cores.begin() + static_cast<std::ptrdiff_t>(i)) {
      throw Error(what + ": core " + std::to_string(c) +
                  " is named twice; name each core once (one worker is pinned to each)");
    }
    if (!std::binary_search(allowed.begin(), allowed.end(), c)) {
      throw Error(what + ": core " + std::to_string(c) +
                  " is not one this process may run on (its affinity mask: " + list(allowed) +
                  "); name cores from that set");
    }
    if (const PartitionEntry* other = pinned_by(live, c)) {
      throw Error(what + ": core " + std::to_string(c) +
                  " is already pinned by another live partition " + list(other->cores) +
                  "; pinned sets must not overlap: name other cores or drop that partition "
                  "(and its streams) first");
    }
  }
}

// The backend partitions are made by (Error when another backend replaced streamrt's CPU one).
CpuBackend& partition_backend() {
  return registered_cpu_backend("cpu::Partition");
}

}  // namespace

PartitionState::PartitionState(CpuBackend& backend, int workers, std::vector<int> cores,
                               Schedule schedule)
    : backend_(backend), workers_(workers), cores_(std::move(cores)), schedule_(schedule) {
  pool_.store(build(), std::memory_order_release);
}

WorkerPool* PartitionState::build() const {
  return new WorkerPool(workers_, schedule_, backend_.worker_spin(), backend_.worker_batch(),
                        cores_);
}

WorkerPool& PartitionState::pool() {
  // Acquire pairs with the release stores: a thread that sees the pointer sees a built pool.
  if (auto* p = pool_.load(std::memory_order_acquire)) return *p;
  std::unique_lock lock(mutex_);
  // Retired: the partition's lease is gone and its streams were idle, so only a handle made
  // from inside the stream's own work (current_stream() there) can still bring work: it runs
  // on the shared pool, with no worker reserved for it.
  if (retired_) {
    lock.unlock();
    return backend_.pool();
  }
  auto* p = pool_.load(std::memory_order_relaxed);
  if (p == nullptr) {
    p = build();
    pool_.store(p, std::memory_order_release);
  }
  return *p;
}

void PartitionState::abandon_pool_in_fork_child() noexcept {
  // Its threads do not exist here: kept reachable, never destroyed (its std::thread objects name
  // threads that are gone), as the shared pool's (fork.cpp). Relaxed: only this thread exists.
  static auto* const abandoned = new std::vector<WorkerPool*>;
  if (auto* old = pool_.exchange(nullptr, std::memory_order_relaxed)) {
    try {
      abandoned->push_back(old);
    } catch (...) {
    }
  }
}

void PartitionState::stop_unused() noexcept {
  delete pool_.exchange(nullptr, std::memory_order_acq_rel);
}

void PartitionState::shutdown_pool() {
  std::lock_guard lock(mutex_);
  if (auto* p = pool_.load(std::memory_order_acquire)) p->shutdown();
}

void PartitionState::retire() noexcept {
  // No handle can bring new work any more: once the work already queued on the partition's
  // streams has finished, nothing but callbacks queued in the pool is left for its workers.
  backend_.wait_until_idle(*this);
  WorkerPool* p = nullptr;
  {
    std::lock_guard lock(mutex_);
    retired_ = true;
    p = pool_.exchange(nullptr, std::memory_order_acq_rel);
  }
  delete p;  // joins the workers: only then are they given back (no oversubscription)
  backend_.release_partition(this);
}

PartitionLease::~PartitionLease() {
  // The streams may still have queued work (it runs; nothing is dropped), and callbacks may still
  // be queued in the pool (the pool's destructor runs them before it returns).
  auto retire = [state = std::move(state_)] { state->retire(); };
  // A helper thread waits and stops the pool, whoever drops the last reference: on one of the
  // partition's own workers, waiting would wait for itself; on another worker, a shrinking
  // set_num_threads or partition may hold the lock release_partition takes while it waits for
  // that worker's task; and a thread holding a lock the exiting workers need (Python's GIL: a
  // worker that ran Python code takes it as it exits) would wait for them for ever.
  try {
    std::thread(retire).detach();
    return;
  } catch (const std::exception& e) {
    if (WorkerPool::on_worker_thread() || CpuStream::running_any_stream()) {
      // Cannot stop the pool from here: its workers stay parked, their count reserved.
      std::fprintf(stderr,
                   "streamrt: a partition's workers were not stopped (no thread to stop them: "
                   "%s); they stay idle\n",
                   e.what());
      return;
    }
  }
  retire();
}

std::shared_ptr<PartitionLease> CpuBackend::new_partition(int workers, std::vector<int> cores) {
  const std::string what = describe(workers, cores);
  refuse_from_stream_work(what);
  if (workers < 1) {
    throw Error(what + ": a partition needs at least one worker");
  }
  check_config();
  pool();  // started (and its exit handler registered) before its size changes
  std::unique_lock lock(pool_mutex_);
  const int total = threads_.load(std::memory_order_relaxed);
  wait_for_releases(lock, [&] {
    const bool overlap = std::any_of(cores.begin(), cores.end(),
                                     [&](int c) { return pinned_by(partitions_, c) != nullptr; });
    return reserved_locked() + workers < total && !overlap;
  });
  if (!cores.empty()) check_cores(cores, partitions_);
  const int reserved = reserved_locked();
  if (reserved + workers >= total) {
    throw Error(what + ": the process has " + std::to_string(total) +
                " CPU workers (num_threads()), " + std::to_string(reserved) +
                " reserved by other partitions, and the shared pool keeps at least one, so at "
                "most " +
                std::to_string(std::max(0, total - reserved - 1)) +
                " can be reserved now; ask for fewer, or raise set_num_threads() first");
  }
  partitions_.reserve(partitions_.size() + 1);  // the push below cannot throw then
  auto state = std::make_shared<PartitionState>(*this, workers, cores, schedule_);
  std::shared_ptr<PartitionLease> lease;
  try {
    lease = std::make_shared<PartitionLease>(state);
  } catch (...) {
    state->stop_unused();  // out of memory: no entry was made, so nothing is to be given back
    throw;
  }
  partitions_.push_back(PartitionEntry{state.get(), state, lease, std::move(cores), workers});
  // Shrunk after the partition's workers started: a refusal above leaves the shared pool as it
  // was. Shrinking cannot fail; it waits for the removed workers' current tasks.
  pool_.load(std::memory_order_relaxed)->resize(shared_workers_locked());
  return lease;
}

void CpuBackend::wait_for_releases(std::unique_lock<std::mutex>& lock,
                                   const std::function<bool()>& fits) {
  const auto now = std::chrono::steady_clock::now();
  const auto grace = now + kReleaseGrace;
  const auto leave_deadline = now + kLeaveTimeout;
  while (!fits()) {
    // A partition whose lease is gone is on its way out: its helper thread gives the workers back
    // once its streams' work and the workers' current tasks are done. One still referenced may be
    // about to be dropped by the worker that ran its last item: a short grace.
    const bool leaving = std::any_of(partitions_.begin(), partitions_.end(),
                                     [](const auto& e) { return e.lease.expired(); });
    if (released_.wait_until(lock, leaving ? leave_deadline : grace) == std::cv_status::timeout) {
      return;
    }
  }
}

void CpuBackend::release_partition(const PartitionState* state) noexcept {
  std::lock_guard lock(pool_mutex_);
  std::erase_if(partitions_, [state](const auto& e) { return e.state == state; });
  released_.notify_all();
  auto* p = pool_.load(std::memory_order_relaxed);
  if (p == nullptr || p->stopped()) return;  // a fork child builds it on first use; exit: none
  try {
    p->resize(shared_workers_locked());
  } catch (const Error& e) {
    std::fprintf(stderr, "streamrt: the shared pool did not get a partition's workers back: %s\n",
                 e.what());
  }
}

int CpuBackend::reserved_locked() const noexcept {
  int n = 0;
  for (const auto& e : partitions_) n += e.workers;
  return n;
}

std::vector<std::shared_ptr<PartitionState>> CpuBackend::live_partitions() {
  std::vector<std::shared_ptr<PartitionState>> out;
  std::lock_guard lock(pool_mutex_);
  for (const auto& e : partitions_) {
    if (auto p = e.handle.lock()) out.push_back(std::move(p));
  }
  return out;
}

std::shared_ptr<impl::StreamImpl> CpuBackend::new_partition_stream(
    std::shared_ptr<PartitionLease> lease, int priority) {
  impl::check_priority(*this, Device{DeviceType::CPU, 0}, priority);
  auto stream = add_stream(0, priority, lease->state());
  // The handles get a reference of their own that also holds the lease: the workers stay
  // reserved while a handle of the stream lives. The stream object itself (which events,
  // tracked accesses and cached memory hold) refers only to the pool.
  impl::StreamImpl* const raw = stream.get();
  return std::shared_ptr<impl::StreamImpl>(
      raw, [stream = std::move(stream), lease = std::move(lease)](impl::StreamImpl*) mutable {
        stream.reset();
        lease.reset();
      });
}

void CpuBackend::wait_until_idle(const PartitionState& partition) {
  // Polled, with a growing pause: the helper thread of a dropped partition is the only caller,
  // and nothing is waiting for it but a later request for workers (wait_for_releases).
  auto pause = std::chrono::microseconds(50);
  for (;;) {
    bool busy = false;
    try {
      for (const auto& s : live_streams())
        busy = busy || (s->partition() == &partition && !s->query());
    } catch (const std::bad_alloc&) {
      busy = true;  // no memory to list the streams: look again after the pause
    }
    if (!busy) return;
    std::this_thread::sleep_for(pause);
    pause = std::min<std::chrono::microseconds>(2 * pause, std::chrono::milliseconds(10));
  }
}

// --- The public handle.

Partition::Partition(int workers) : state_(partition_backend().new_partition(workers, {})) {}

Partition Partition::pinned(std::vector<int> cores) {
  if (cores.empty()) {
    throw Error("Partition::pinned({}): name at least one core (one worker is pinned to each)");
  }
  const int n = static_cast<int>(cores.size());
  return Partition(partition_backend().new_partition(n, std::move(cores)));
}

Partition::Partition(std::shared_ptr<PartitionLease> state) noexcept : state_(std::move(state)) {}

int Partition::num_workers() const noexcept {
  return state_->state()->workers();
}

std::vector<int> Partition::cores() const {
  return state_->state()->cores();
}

Stream Partition::new_stream(int priority) const {
  return Stream(partition_backend().new_partition_stream(state_, priority));
}

}  // namespace streamrt::cpu
