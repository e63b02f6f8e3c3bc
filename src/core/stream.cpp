// Device-agnostic Stream handle, the thread-local current stream and StreamContext.
#include <string>
#include <vector>

#include "capture.hpp"
#include "graph_data.hpp"
#include "streamrt/error.hpp"
#include "streamrt/event.hpp"
#include "streamrt/graph.hpp"
#include "streamrt/impl/backend.hpp"
#include "streamrt/stream.hpp"
#include "streamrt/stream_context.hpp"

namespace streamrt {
namespace {

// One entry per device this thread has set a stream for; a handful at most, so a vector.
struct CurrentStreams {
  std::vector<std::shared_ptr<impl::StreamImpl>> streams;

  std::shared_ptr<impl::StreamImpl>* find(const Device& d) {
    for (auto& s : streams) {
      if (s->device() == d) return &s;
    }
    return nullptr;
  }
};

// Thread-local destructors run before atexit handlers; work that runs during exit (pending work
// finished by the CPU backend) then gets a fresh, empty table instead of a destroyed one.
CurrentStreams& current_streams() {
  thread_local bool destroyed = false;  // trivially destructible: readable during exit
  struct Holder {
    CurrentStreams streams;
    ~Holder() { destroyed = true; }
  };
  if (destroyed) {
    thread_local CurrentStreams* late = new CurrentStreams;  // leaked: the thread is exiting
    return *late;
  }
  thread_local Holder holder;
  return holder.streams;
}

}  // namespace

Stream::Stream(Device device, int priority) {
  impl::Backend& b = impl::backend_for(device);
  const auto [least, greatest] = b.priority_range();
  if (priority > least || priority < greatest) {
    throw Error("stream priority " + std::to_string(priority) + " is out of range for " +
                device.str() + ": use a value from " + std::to_string(least) +
                " (least urgent) to " + std::to_string(greatest) + " (most urgent)");
  }
  impl_ = b.new_stream(device.index, priority);
}

Stream::Stream(std::shared_ptr<impl::StreamImpl> impl) noexcept : impl_(std::move(impl)) {}

Stream Stream::default_stream(Device device) {
  return Stream(impl::backend_for(device).default_stream(device.index));
}

std::pair<int, int> Stream::priority_range() {
  return impl::backend(DeviceType::CPU).priority_range();
}

Device Stream::device() const noexcept { return impl_->device(); }
int Stream::priority() const noexcept { return impl_->priority(); }
std::uint64_t Stream::id() const noexcept { return impl_->id(); }

void Stream::launch_work(detail::Work work, const char* label) {
  if (capture::active() && capture::launch(*impl_, work, label)) return;
  impl_->backend().enqueue(*impl_, std::move(work), label);
}

bool Stream::query() const {
  capture::refuse_if_capturing(*impl_, "Stream::query");
  return impl_->backend().query_stream(*impl_);
}

void Stream::synchronize() const {
  capture::refuse_if_capturing(*impl_, "Stream::synchronize");
  impl_->backend().synchronize_stream(*impl_, std::nullopt);
}

bool Stream::synchronize_for(std::chrono::nanoseconds timeout) const {
  capture::refuse_if_capturing(*impl_, "Stream::synchronize_for");
  return impl_->backend().synchronize_stream(*impl_, timeout);
}

std::uint64_t Stream::cancel() {
  capture::refuse_if_capturing(*impl_, "Stream::cancel");
  return impl_->backend().cancel(*impl_);
}

std::uint64_t Stream::pending() const { return impl_->backend().pending(*impl_); }

void Stream::set_host_run(bool allowed) { impl_->backend().set_host_run(*impl_, allowed); }

bool Stream::host_run() const { return impl_->backend().host_run(*impl_); }

void Stream::wait_event(const Event& e) {
  auto position = e.impl();
  if (!position) {
    throw Error("Stream::wait_event: the event was never recorded (or was reset); record it on a "
                "stream before waiting on it");
  }
  if (position->device().type != device().type) {
    throw Error("Stream::wait_event: event recorded on " + position->device().str() +
                " cannot be waited on by a stream of " + device().str());
  }
  if (&position->backend() != &impl_->backend()) {
    throw Error("Stream::wait_event: the event was recorded by another " +
                std::string(to_string(device().type)) + " backend than the one of " + str() +
                " (register_backend replaced it in between); record the event on a stream "
                "created after the replacement");
  }
  capture::block(impl_->backend(), position, impl_);
}

void Stream::wait_stream(const Stream& other) {
  if (other == *this) return;  // in-order already
  Event e;
  e.record(other);
  wait_event(e);
}

Event Stream::record_event() {
  // A new event: no earlier record to check against or to swap out (Event::record does both).
  return Event(capture::record_position(*impl_, EventOptions{}));
}

Event Stream::record_event(Event& e) {
  e.record(*this);
  return e;
}

void Stream::begin_capture(CaptureMode mode) {
  Graph g;
  begin_capture(g, mode);
}

void Stream::begin_capture(Graph& graph, CaptureMode mode) {
  capture::begin(impl_, graph.data(), mode);
}

Graph Stream::end_capture() {
  Graph g = Graph::from_data(capture::end(*impl_));
  return g;
}

bool Stream::is_capturing() const { return capture::is_capturing(*impl_); }

std::string Stream::str() const {
  return device().str() + " stream " + std::to_string(id()) + " (priority " +
         std::to_string(priority()) + ")";
}

Stream current_stream(Device device) {
  if (auto* s = current_streams().find(device)) return Stream(*s);
  return Stream::default_stream(device);
}

void set_current_stream(const Stream& s) { impl::exchange_current_stream(s); }

Stream default_stream(Device device) { return Stream::default_stream(device); }

Stream impl::exchange_current_stream(const Stream& s) {
  auto& tls = current_streams();
  if (auto* slot = tls.find(s.device())) {
    Stream previous(*slot);
    *slot = s.impl();
    return previous;
  }
  tls.streams.push_back(s.impl());
  return Stream::default_stream(s.device());
}

StreamContext::StreamContext(const Stream& s) : previous_(impl::exchange_current_stream(s)) {}

StreamContext::StreamContext(std::optional<Stream> s) {
  if (s) previous_ = impl::exchange_current_stream(*s);
}

StreamContext::~StreamContext() {
  // exchange_current_stream only swaps a pointer in an existing slot here (the constructor made
  // it), so it cannot throw.
  if (previous_) impl::exchange_current_stream(*previous_);
}

}  // namespace streamrt
