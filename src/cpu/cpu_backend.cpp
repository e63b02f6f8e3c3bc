// The CPU backend: maps the backend interface onto CpuStream and the worker pool.
#include "cpu_backend.hpp"

#include <pthread.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "core/deadline.hpp"
#include "core/work_thread.hpp"
#include "streamrt/detail/block_cache.hpp"
#include "streamrt/error.hpp"
#include "streamrt/impl/hooks.hpp"
#include "trace_sink.hpp"

namespace streamrt::cpu {
namespace tracing_detail {
std::atomic<bool> enabled{false};
}  // namespace tracing_detail

namespace {

CpuBackend* g_backend = nullptr;  // set once, before any thread can see the backend

CpuStream& cpu_stream(impl::StreamImpl& s) {
  return static_cast<CpuStream&>(s);
}
const CpuStream& cpu_stream(const impl::StreamImpl& s) {
  return static_cast<const CpuStream&>(s);
}
const CpuEvent& cpu_event(const impl::EventImpl& e) {
  return static_cast<const CpuEvent&>(e);
}

// Workers the pool really gets for a requested count: one under STREAMRT_SCHEDULE=serial.
int effective_threads(const Schedule& s, int n) {
  return s.mode == Schedule::Mode::kSerial ? 1 : n;
}

void shutdown_at_exit() {
  g_backend->shutdown();
}

// The layers' handlers (impl::add_fork_handlers) run inside ours: their locks are taken after the
// streams' (the runtime's clean-up may take theirs under a stream lock) and are usable again in the
// child before the parent's work is dropped there.
void prepare_fork_handler() {
  g_backend->prepare_fork();
  impl::run_fork_prepare();
}
void parent_fork_handler() {
  impl::run_fork_parent();
  g_backend->after_fork_in_parent();
}
void child_fork_handler() {
  impl::run_fork_child();
  g_backend->after_fork_in_child();
}

}  // namespace

void report_callback_exception(const std::exception_ptr& e) noexcept {
  try {
    std::fprintf(stderr,
                 "streamrt: a completion callback threw; the exception was dropped so the runtime "
                 "keeps working (catch it inside the callback): %s\n",
                 describe(e).c_str());
  } catch (...) {
    std::fputs("streamrt: a completion callback threw\n", stderr);
  }
}

void FunctionTask::run() noexcept {
  try {
    fn_();
  } catch (...) {
    report_callback_exception(std::current_exception());
  }
  fn_ = nullptr;  // release captured state on the worker, not wherever the task dies
}

CpuBackend::CpuBackend() {
  // Never throws here (the registry builds the backend on any first use, static initializers
  // included): a bad setting is reported by check_config() before a stream is handed out.
  try {
    const Config& c = config();
    threads_.store(c.num_threads, std::memory_order_relaxed);
    worker_spin_us_.store(c.worker_spin_us, std::memory_order_relaxed);
    worker_batch_.store(c.worker_batch, std::memory_order_relaxed);
    fork_timeout_ns_.store(c.fork_timeout_ms * 1'000'000, std::memory_order_relaxed);
    launch_blocking_.store(c.launch_blocking, std::memory_order_relaxed);
    schedule_ = c.schedule;
    // The schedule fuzzer decides every pick itself (seeded order, one worker for serial): a
    // waiting host running items would take picks out of its hands.
    host_run_ = c.host_run && schedule_.mode == Schedule::Mode::kNormal;
    config_ok_ = true;
  } catch (const Error&) {
  }
  g_backend = this;
  // Workers, and host threads while they help a wait, run stream work: what the read checker
  // allows to touch memory whose writers are still queued.
  core::set_work_thread_probe(
      []() noexcept { return WorkerPool::on_worker_thread() || CpuStream::running_any_stream(); });
  default_stream_ = std::allocate_shared<CpuStream>(detail::CachedAllocator<CpuStream>{}, *this,
                                                    Device{DeviceType::CPU, 0}, 0, 0);
  // One backend per process (the registry keeps it for ever), so the handlers are installed once.
  pthread_atfork(prepare_fork_handler, parent_fork_handler, child_fork_handler);
}

CpuBackend::~CpuBackend() = default;

WorkerPool& CpuBackend::pool() {
  // Acquire pairs with the release below: a thread that sees the pointer sees a built pool.
  if (auto* p = pool_.load(std::memory_order_acquire)) return *p;
  std::lock_guard lock(pool_mutex_);
  auto* p = pool_.load(std::memory_order_relaxed);
  if (p == nullptr) {
    check_config();
    // Leaked on purpose: handles in static storage may use it during exit; shutdown() stops it.
    p = new WorkerPool(shared_workers_locked(), schedule_,
                       std::chrono::microseconds(worker_spin_us_.load(std::memory_order_relaxed)),
                       worker_batch_.load(std::memory_order_relaxed));
    pool_.store(p, std::memory_order_release);
    // Once: a child of fork() builds a new pool (after_fork_in_child) but shares this handler.
    static const bool registered = (std::atexit(shutdown_at_exit), true);
    (void)registered;
  }
  return *p;
}

int CpuBackend::shared_workers_locked() const {
  return effective_threads(schedule_, threads_.load(std::memory_order_relaxed) - reserved_locked());
}

std::shared_ptr<impl::StreamImpl> CpuBackend::new_stream(int index, int priority) {
  return add_stream(index, priority, nullptr);
}

std::shared_ptr<impl::StreamImpl> CpuBackend::add_stream(
    int index, int priority, std::shared_ptr<PartitionState> partition) {
  check_config();
  auto s = std::allocate_shared<CpuStream>(
      detail::CachedAllocator<CpuStream>{}, *this, Device{DeviceType::CPU, index}, priority,
      next_id_.fetch_add(1, std::memory_order_relaxed), std::move(partition));
  std::lock_guard lock(streams_mutex_);
  if (streams_.size() >= prune_at_) {
    std::erase_if(streams_, [](const auto& w) { return w.expired(); });
    prune_at_ = std::max<std::size_t>(64, 2 * streams_.size());
  }
  streams_.push_back(s);
  return s;
}

std::shared_ptr<impl::StreamImpl> CpuBackend::default_stream(int) {
  check_config();
  return default_stream_;
}

std::vector<std::shared_ptr<CpuStream>> CpuBackend::live_streams() {
  std::vector<std::shared_ptr<CpuStream>> out{default_stream_};
  std::lock_guard lock(streams_mutex_);
  out.reserve(streams_.size() + 1);
  for (const auto& w : streams_) {
    if (auto s = w.lock()) out.push_back(std::move(s));
  }
  return out;
}

void CpuBackend::enqueue(impl::StreamImpl& stream, detail::Work work, const char* label) {
  cpu_stream(stream).enqueue(std::move(work), label);
}

std::shared_ptr<impl::EventImpl> CpuBackend::record(impl::StreamImpl& stream,
                                                    EventOptions options) {
  return cpu_stream(stream).record(options);
}

void CpuBackend::block(const std::shared_ptr<impl::EventImpl>& position, impl::StreamImpl& stream) {
  cpu_stream(stream).block(std::static_pointer_cast<CpuEvent>(position));
}

bool CpuBackend::query_stream(const impl::StreamImpl& stream) {
  return cpu_stream(stream).query();
}

bool CpuBackend::synchronize_stream(impl::StreamImpl& stream,
                                    std::optional<std::chrono::nanoseconds> timeout) {
  return cpu_stream(stream).synchronize(timeout);
}

bool CpuBackend::query_event(const impl::EventImpl& position) {
  const auto& e = cpu_event(position);
  return e.stream->is_complete(e.seq);
}

EventState CpuBackend::event_state(const impl::EventImpl& position) {
  const auto& e = cpu_event(position);
  if (!e.stream->is_complete(e.seq)) return EventState::Pending;
  auto f = e.stream->failure_at(e.seq);
  if (!f) return EventState::Complete;
  try {
    std::rethrow_exception(f->error);
  } catch (const Cancelled&) {
    return EventState::Cancelled;
  } catch (...) {
    return EventState::Failed;
  }
}

bool CpuBackend::wait_event(const impl::EventImpl& position,
                            std::optional<std::chrono::nanoseconds> timeout) {
  const auto& e = cpu_event(position);
  if (!e.stream->is_complete(e.seq) && e.stream->held_by_this_thread()) {
    throw Error("waiting on an event from work running on " + e.stream->str() +
                ", for a record that comes later on that same stream: it would wait for itself "
                "forever (deadlock). Wait from another thread or another stream");
  }
  const auto deadline = detail::deadline_after(timeout);
  return e.stream->wait_complete(e.seq, deadline, e.options().blocking);
}

bool CpuBackend::synchronize_event(const impl::EventImpl& position,
                                   std::optional<std::chrono::nanoseconds> timeout) {
  if (!wait_event(position, timeout)) return false;
  const auto& e = cpu_event(position);
  if (auto f = e.stream->failure_at(e.seq)) {
    // Reported here (rule 10): the event's stream stops skipping work submitted from now on.
    e.stream->clear_reported(f);
    f->rethrow();
  }
  return true;
}

double CpuBackend::elapsed_time(const impl::EventImpl& start, const impl::EventImpl& end) {
  const auto& a = cpu_event(start);
  const auto& b = cpu_event(end);
  if (!a.stream->is_complete(a.seq) || !b.stream->is_complete(b.seq)) {
    throw Error(api::member("Event", "elapsed_time") +
                ": Both events must be completed before calculating elapsed time (synchronize() "
                "the end event first)");
  }
  const auto t0 = a.timestamp_ns.load(std::memory_order_relaxed);
  const auto t1 = b.timestamp_ns.load(std::memory_order_relaxed);
  return static_cast<double>(t1 - t0) / 1e6;
}

void CpuBackend::on_complete(const std::shared_ptr<impl::EventImpl>& position,
                             std::function<void(std::exception_ptr)> cb) {
  auto ev = std::static_pointer_cast<CpuEvent>(position);
  auto call = std::make_shared<std::function<void()>>([ev, cb = std::move(cb)] {
    std::exception_ptr error;
    if (auto f = ev->stream->failure_at(ev->seq)) {
      f->observed.store(true, std::memory_order_relaxed);
      error = f->error;
    }
    try {
      cb(error);
    } catch (...) {
      report_callback_exception(std::current_exception());
    }
  });
  if (!ev->stream->on_complete(ev->seq, [call] { (*call)(); })) (*call)();
}

bool CpuBackend::synchronize_device(int, std::optional<std::chrono::nanoseconds> timeout) {
  if (CpuStream::running_any_stream()) {
    throw Error(api::function("synchronize") +
                "() called from work running on a stream: it would wait for that stream's own "
                "work (deadlock). Synchronize from outside stream work");
  }
  auto streams = live_streams();
  std::vector<std::uint64_t> targets;
  targets.reserve(streams.size());
  for (const auto& s : streams) targets.push_back(s->submitted());
  const auto deadline = detail::deadline_after(timeout);
  for (std::size_t i = 0; i < streams.size(); ++i) {
    // Timed out: nothing reported yet, so nothing changed.
    if (!streams[i]->wait_complete(targets[i], deadline, false)) return false;
  }
  for (const auto& s : streams) {
    if (s->has_active_error()) s->synchronize(std::nullopt);  // reports (and clears) the first
  }
  return true;
}

std::uint64_t CpuBackend::pending(const impl::StreamImpl& stream) {
  return cpu_stream(stream).pending();
}

std::uint64_t CpuBackend::cancel(impl::StreamImpl& stream) {
  return cpu_stream(stream).cancel();
}

void CpuHostRun::set_allowed(impl::StreamImpl& stream, bool allowed) noexcept {
  cpu_stream(stream).set_host_run(allowed);
}

bool CpuHostRun::allowed(const impl::StreamImpl& stream) const noexcept {
  return cpu_stream(stream).host_run();
}

void CpuBackend::refuse_from_stream_work(const std::string& call) {
  if (WorkerPool::on_worker_thread() || CpuStream::running_any_stream()) {
    throw Error(call +
                " called from a worker thread (from stream work or a callback, also work a "
                "waiting host thread runs): it resizes the shared pool, which waits for the "
                "workers' current work; call it from the host, outside stream work");
  }
}

void CpuBackend::set_num_threads(int n) {
  if (n < 1 || n > kMaxNumThreads) {
    throw Error("set_num_threads(" + std::to_string(n) + "): the worker count must be from 1 to " +
                std::to_string(kMaxNumThreads));
  }
  refuse_from_stream_work("set_num_threads()");
  check_config();
  std::unique_lock lock(pool_mutex_);
  wait_for_releases(lock, [&] { return n > reserved_locked(); });
  const int reserved = reserved_locked();
  if (n <= reserved) {
    throw Error("set_num_threads(" + std::to_string(n) + "): live partitions reserve " +
                std::to_string(reserved) +
                " of the workers and the shared pool keeps at least "
                "one, so the count must be at least " +
                std::to_string(reserved + 1) +
                "; drop partitions (and their streams) first, or ask for more");
  }
  // Resized first: a count the OS refuses (resize throws) leaves the setting as it was.
  if (auto* p = pool_.load(std::memory_order_acquire)) {
    p->resize(effective_threads(schedule_, n - reserved));
  }
  threads_.store(n, std::memory_order_relaxed);
}

int CpuBackend::num_threads() const {
  check_config();
  return threads_.load(std::memory_order_relaxed);
}

void CpuBackend::set_worker_spin(std::chrono::microseconds spin) {
  if (spin.count() < 0 || spin.count() > kMaxWorkerSpinUs) {
    throw Error("set_worker_spin(" + std::to_string(spin.count()) +
                " us): the poll time must be from 0 to " + std::to_string(kMaxWorkerSpinUs) +
                " microseconds");
  }
  check_config();
  // Before the lock, so released after it: the last handle's destructor takes pool_mutex_.
  const auto partitions = live_partitions();
  std::lock_guard lock(pool_mutex_);
  worker_spin_us_.store(spin.count(), std::memory_order_relaxed);
  if (auto* p = pool_.load(std::memory_order_acquire)) p->set_spin(spin);
  for (const auto& part : partitions) {
    if (auto* p = part->pool_if_started()) p->set_spin(spin);
  }
}

std::chrono::microseconds CpuBackend::worker_spin() const {
  check_config();
  return std::chrono::microseconds(worker_spin_us_.load(std::memory_order_relaxed));
}

void CpuBackend::set_worker_batch(bool batch) {
  check_config();
  const auto partitions = live_partitions();  // released after the lock, as in set_worker_spin
  std::lock_guard lock(pool_mutex_);
  // The pools first: if the OS refuses, the setting does not change (a partition's pool changed
  // before the refusal keeps the new policy; its next refusal-free call settles it).
  if (auto* p = pool_.load(std::memory_order_acquire)) p->set_batch(batch);
  for (const auto& part : partitions) {
    if (auto* p = part->pool_if_started()) p->set_batch(batch);
  }
  worker_batch_.store(batch, std::memory_order_relaxed);
}

bool CpuBackend::worker_batch() const {
  check_config();
  return worker_batch_.load(std::memory_order_relaxed);
}

void CpuBackend::set_tracing(bool on) noexcept {
  // Relaxed: see tracing_enabled().
  tracing_detail::enabled.store(on, std::memory_order_relaxed);
}

std::shared_ptr<impl::EventImpl> CpuBackend::new_user_event(int index, EventOptions options) {
  return CpuStream::new_user_position(*this, Device{DeviceType::CPU, index},
                                      next_id_.fetch_add(1, std::memory_order_relaxed), options);
}

void CpuBackend::complete_user_event(const std::shared_ptr<impl::EventImpl>& position,
                                     std::exception_ptr failure) {
  auto ev = std::static_pointer_cast<CpuEvent>(position);
  ev->stream->complete_user(*ev, std::move(failure));
}

void CpuBackend::shutdown() noexcept {
  auto* p = pool_.load(std::memory_order_acquire);
  if (p == nullptr || WorkerPool::on_worker_thread()) return;
  try {
    // Finish everything pending, including work that pending work launches.
    for (bool busy = true; busy;) {
      busy = false;
      for (const auto& s : live_streams()) {
        const auto target = s->submitted();
        if (!s->is_complete(target)) {
          busy = true;
          s->wait_complete(target, std::nullopt, false);
        }
      }
    }
  } catch (...) {
    std::fputs("streamrt: failed to finish pending work at exit\n", stderr);
  }
  p->shutdown();
  // Partitions held in static storage outlive this: their later work runs inline, as here.
  try {
    for (const auto& part : live_partitions()) part->shutdown_pool();
  } catch (...) {
    std::fputs("streamrt: failed to stop the partitions' workers at exit\n", stderr);
  }
}

}  // namespace streamrt::cpu
