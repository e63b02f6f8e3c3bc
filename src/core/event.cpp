// Device-agnostic Event handle. The handle holds the current record (an immutable EventImpl);
// re-recording swaps it, so waits that started earlier keep tracking the record they saw.
#include "streamrt/event.hpp"

#include <algorithm>
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "capture_state.hpp"
#include "cpu_relax.hpp"
#include "deadline.hpp"
#include "moved_from.hpp"
#include "streamrt/detail/block_cache.hpp"
#include "streamrt/error.hpp"
#include "streamrt/impl/backend.hpp"
#include "streamrt/stream.hpp"

namespace streamrt {

struct Event::State {
  explicit State(EventOptions o) : options(o) {}
  const EventOptions options;
  // A spin lock, not a mutex: it only ever guards a shared_ptr copy or swap (the old position is
  // destroyed after it is released), and the record-and-poll path takes it three times per event.
  mutable std::atomic<bool> busy{false};
  std::shared_ptr<impl::EventImpl> position;  // guarded by busy; null = not recorded
};

namespace {

// Holds Event::State::busy for a shared_ptr copy or swap.
class PositionLock {
 public:
  explicit PositionLock(std::atomic<bool>& busy) noexcept : busy_(busy) {
    // Acquire: sees the position the last holder stored before its release.
    for (unsigned spins = 1; busy_.exchange(true, std::memory_order_acquire);) {
      // Wait by reading (no cache-line ping-pong); yield when the holder was preempted.
      while (busy_.load(std::memory_order_relaxed)) {
        if (spins++ % 64 == 0) std::this_thread::yield();
        core::cpu_relax();
      }
    }
  }
  // Release: publishes the position stored under the lock to the next holder.
  ~PositionLock() { busy_.store(false, std::memory_order_release); }
  PositionLock(const PositionLock&) = delete;
  PositionLock& operator=(const PositionLock&) = delete;

 private:
  std::atomic<bool>& busy_;
};

// `member`: the Event member asking (a literal), named in the error.
std::shared_ptr<impl::EventImpl> recorded_or_throw(const Event& e, const char* member) {
  auto p = e.impl();
  if (!p) {
    throw Error(api::member("Event", member) +
                ": the event was never recorded (or was reset); call record() first. (CUDA would "
                "treat this as complete; streamrt refuses, as it hides ordering bugs)");
  }
  return p;
}

// Error unless `s` names a stream: `member` of Event got a moved-from Stream.
void check_stream_argument(const Stream& s, const char* member) {
  if (!s.impl()) core::throw_moved_from(api::member("Event", member), "Stream", true);
}

}  // namespace

Event::State& Event::checked(const char* member) const {
  if (!state_) [[unlikely]] {
    core::throw_moved_from(api::member("Event", member), "Event", false);
  }
  return *state_;
}

std::string_view to_string(EventState state) noexcept {
  switch (state) {
    case EventState::NotRecorded:
      return "not_recorded";
    case EventState::Pending:
      return "pending";
    case EventState::Complete:
      return "complete";
    case EventState::Failed:
      return "failed";
    case EventState::Cancelled:
      return "cancelled";
  }
  return "unknown";
}

// The handle's state comes from the block cache: record_event() makes one per call, and hot loops
// (record, poll, drop) should not go to malloc for it.
Event::Event(EventOptions options)
    : state_(std::allocate_shared<State>(detail::CachedAllocator<State>{}, options)) {}

Event::Event(std::shared_ptr<impl::EventImpl> position)
    : state_(std::allocate_shared<State>(detail::CachedAllocator<State>{},
                                         position ? position->options() : EventOptions{})) {
  state_->position = std::move(position);
}

void Event::record() {
  checked("record");
  std::optional<Device> d = device();
  record(current_stream(d.value_or(Device{})));
}

void Event::record(const Stream& s) {
  State& state = checked("record");
  check_stream_argument(s, "record");
  auto& impl = s.impl();
  if (auto old = this->impl(); old && old->device() != s.device()) {
    throw Error(api::member("Event", "record") + ": the event was recorded on " +
                old->device().str() + " and cannot be recorded on " + s.device().str() +
                "; call reset() first or use another event");
  }
  // Recorded outside the lock: the backend may take its own stream lock, and a record must never
  // wait for another thread's query.
  auto position = capture::record_position(*impl, state.options);
  {
    PositionLock lock(state.busy);
    state.position.swap(position);
  }
  // The earlier record (now in `position`) is released here, outside the lock.
}

std::shared_ptr<impl::EventImpl> Event::impl() const {
  State& state = checked("impl");
  PositionLock lock(state.busy);
  return state.position;
}

bool Event::query() const {
  {
    // Polled in loops: no reference count traffic on the common path. query_event never blocks
    // (backend contract), so it may run under the spin lock, which keeps the position alive.
    State& state = checked("query");
    PositionLock lock(state.busy);
    const impl::EventImpl* raw = state.position.get();
    if (raw == nullptr) return false;
    if (!raw->captured()) return raw->backend().query_event(*raw);
  }
  auto p = impl();
  if (p && p->captured()) {
    p = capture::resolve(p, [] {
      return api::member("Event", "query") + " on an event recorded during the capture";
    });
    if (!p) return true;  // the capture is over and its graph was never replayed
  }
  return p && p->backend().query_event(*p);
}

EventState Event::state() const {
  checked("state");
  auto p = impl();
  if (!p) return EventState::NotRecorded;
  if (p->captured()) {
    // For reprs and debugging: never refused, never invalidates. Pending while the capture runs.
    auto real = capture::resolve(p, nullptr, false);
    if (!real) {
      return capture::query(p->backend(), p) ? EventState::Complete : EventState::Pending;
    }
    p = std::move(real);
  }
  return p->backend().event_state(*p);
}

void Event::synchronize() const {
  {
    // A record that is already complete and clean (record + wait loops, a tensor read after its
    // op finished): returns without reference count traffic. event_state never blocks (backend
    // contract), so it may run under the spin lock, which keeps the position alive.
    State& state = checked("synchronize");
    PositionLock lock(state.busy);
    const impl::EventImpl* raw = state.position.get();
    if (raw != nullptr && !raw->captured() &&
        raw->backend().event_state(*raw) == EventState::Complete) {
      return;
    }
  }
  auto p = recorded_or_throw(*this, "synchronize");
  if (p->captured()) {
    p = capture::resolve(p, [] {
      return api::member("Event", "synchronize") +
             " (a host wait) on an event recorded during the capture";
    });
    if (!p) return;
  }
  p->backend().synchronize_event(*p, std::nullopt);
}

bool Event::wait_for(std::chrono::nanoseconds timeout) const {
  checked("wait_for");
  auto p = capture::resolve(recorded_or_throw(*this, "wait_for"), [] {
    return api::member("Event", "wait_for") +
           " (a host wait) on an event recorded during the capture";
  });
  return !p || p->backend().synchronize_event(*p, timeout);
}

void Event::wait(const Stream& s) const {
  checked("wait");
  check_stream_argument(s, "wait");
  Stream target = s;  // a handle copy names the same stream
  target.wait_event(*this);
}

void Event::wait() const {
  checked("wait");
  auto p = recorded_or_throw(*this, "wait");
  Stream s = current_stream(p->device());
  s.wait_event(*this);
}

double Event::elapsed_time(const Event& end) const {
  checked("elapsed_time");
  if (!end.valid()) core::throw_moved_from(api::member("Event", "elapsed_time"), "Event", true);
  if (!options().enable_timing || !end.options().enable_timing) {
    throw Error(api::member("Event", "elapsed_time") +
                ": Both events must be created with enable_timing=true (" +
                api::option("Event", "enable_timing", true) + ")");
  }
  auto a = impl();
  auto b = end.impl();
  if (!a || !b) {
    throw Error(api::member("Event", "elapsed_time") +
                ": Both events must be recorded before calculating elapsed time");
  }
  for (const auto* p : {&a, &b}) {
    if ((*p)->captured()) {
      capture::resolve(*p, [] {
        return api::member("Event", "elapsed_time") + " on an event recorded during the capture";
      });
      throw Error(api::member("Event", "elapsed_time") +
                  ": an event recorded during a capture has no timestamp (it stands for a place "
                  "in a graph); record timing events around " +
                  api::member("GraphExec", "launch") + "()");
    }
  }
  if (a->device() != b->device()) {
    throw Error(api::member("Event", "elapsed_time") +
                ": the events were recorded on different devices (" + a->device().str() + " and " +
                b->device().str() + ")");
  }
  if (&a->backend() != &b->backend()) {
    throw Error(api::member("Event", "elapsed_time") +
                ": the events were recorded by different backends of " + a->device().str() +
                " (register_backend replaced one in between); record both "
                "events on streams created after the replacement");
  }
  return a->backend().elapsed_time(*a, *b);
}

void Event::reset() {
  State& state = checked("reset");
  std::shared_ptr<impl::EventImpl> old;
  {
    PositionLock lock(state.busy);
    state.position.swap(old);
  }
}

std::optional<Device> Event::device() const {
  checked("device");
  auto p = impl();
  if (!p) return std::nullopt;
  return p->device();
}

EventOptions Event::options() const {
  return checked("options").options;
}

void Event::on_complete(std::function<void(std::exception_ptr)> cb) const {
  checked("on_complete");
  if (!cb) throw Error(api::member("Event", "on_complete") + ": the callback is empty");
  auto p = capture::resolve(recorded_or_throw(*this, "on_complete"), [] {
    return api::member("Event", "on_complete") + " on an event recorded during the capture";
  });
  if (!p) {
    cb(nullptr);  // the capture is over and its graph was never replayed: nothing to wait for
    return;
  }
  p->backend().on_complete(p, std::move(cb));
}

namespace {

// `function`: the streamrt function asking (a literal), named in the error.
std::vector<std::shared_ptr<impl::EventImpl>> positions_of(std::span<const Event> events,
                                                           const char* function) {
  std::vector<std::shared_ptr<impl::EventImpl>> out;
  out.reserve(events.size());
  for (std::size_t i = 0; i < events.size(); ++i) {
    if (!events[i].valid()) {
      throw Error(api::function(function) + ": event " + std::to_string(i) +
                  " was moved from, so it names no event; pass events that name one");
    }
    auto p = events[i].impl();
    if (!p) {
      throw Error(api::function(function) + ": event " + std::to_string(i) +
                  " was never recorded (or was reset); record every event before waiting");
    }
    if (p->captured()) {
      p = capture::resolve(p, [] {
        return api::function("wait_all") + " (a host wait) on an event recorded during the capture";
      });
      if (!p) continue;  // never replayed: nothing to wait for
    }
    out.push_back(std::move(p));
  }
  return out;
}

bool wait_positions(const std::vector<std::shared_ptr<impl::EventImpl>>& positions,
                    std::optional<std::chrono::nanoseconds> timeout) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = timeout ? detail::deadline_after(*timeout) : Clock::time_point::max();
  // First wait for all without reporting failures, so "changes nothing on time-out" holds, and
  // the failure reported (and so cleared, rule 10) is only the first in argument order.
  for (const auto& p : positions) {
    auto& b = p->backend();
    if (b.query_event(*p)) continue;
    if (!timeout) {
      b.wait_event(*p, std::nullopt);
      continue;
    }
    const auto left = deadline - Clock::now();
    if (!b.wait_event(*p, std::max(left, Clock::duration::zero()))) return false;
  }
  for (const auto& p : positions) {
    p->backend().synchronize_event(*p, std::nullopt);  // rethrows the first
  }
  return true;
}

}  // namespace

void wait_all(std::span<const Event> events) {
  wait_positions(positions_of(events, "wait_all"), std::nullopt);
}

bool wait_all_for(std::span<const Event> events, std::chrono::nanoseconds timeout) {
  return wait_positions(positions_of(events, "wait_all_for"), timeout);
}

WaitEnd wait_interruptibly(const Event& event, std::optional<std::chrono::nanoseconds> timeout,
                           std::chrono::nanoseconds slice,
                           const std::function<bool()>& interrupted) {
  if (!event.valid()) core::throw_moved_from(api::function("wait_interruptibly"), "Event", true);
  auto position = event.impl();
  if (!position) {
    throw Error(api::function("wait_interruptibly") +
                ": the event was never recorded (or was reset); call record() first");
  }
  // Not refused while its capture runs: the caller's synchronize() refuses it, naming itself.
  position = capture::resolve(position, nullptr, false);
  if (!position) return WaitEnd::Done;
  impl::Backend& b = position->backend();
  // A slice of 0 would never wait; at least a microsecond keeps the loop from spinning.
  slice = std::max<std::chrono::nanoseconds>(slice, std::chrono::microseconds(1));
  // Time left is the time-out minus the time waited: no deadline sum that a huge time-out could
  // overflow.
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  for (;;) {
    std::chrono::nanoseconds step = slice;
    if (timeout) {
      const auto waited =
          std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start);
      if (waited >= *timeout) {
        return b.wait_event(*position, std::chrono::nanoseconds::zero()) ? WaitEnd::Done
                                                                         : WaitEnd::TimedOut;
      }
      step = std::min(step, *timeout - waited);
    }
    if (b.wait_event(*position, step)) return WaitEnd::Done;
    if (interrupted && interrupted()) return WaitEnd::Interrupted;
  }
}

}  // namespace streamrt
