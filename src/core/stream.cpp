// Device-agnostic Stream handle, the thread-local current stream and StreamContext.
#include "streamrt/stream.hpp"

#include <new>
#include <string>
#include <string_view>
#include <vector>

#include "capture_state.hpp"
#include "moved_from.hpp"
#include "streamrt/error.hpp"
#include "streamrt/event.hpp"
#include "streamrt/impl/backend.hpp"
#include "streamrt/impl/hooks.hpp"
#include "streamrt/impl/host_capabilities.hpp"
#include "streamrt/stream_context.hpp"
#include "thread_exit.hpp"

namespace streamrt {
namespace {

// The most devices one thread may have set a current stream for.
constexpr int kMaxCurrentStreams = 16;

using StreamRef = std::shared_ptr<impl::StreamImpl>;

// One entry per device this thread has set a stream for. The entries live in the thread's
// static TLS, so that making one allocates nothing: a stream's drain sets its stream current on
// whatever thread runs it, a host thread's first wait included, and cannot fail there. Raw
// storage keeps the thread_local trivially destructible (a thread_local destructor registers
// itself on first use, which allocates, and glibc ends the process when that fails); a
// thread-exit hook (core/thread_exit.hpp) releases the entries.
struct CurrentStreams {
  alignas(StreamRef) unsigned char slots[kMaxCurrentStreams][sizeof(StreamRef)];
  int count;
  bool hooked;  // registering the exit hook was tried

  StreamRef& at(int i) noexcept { return *std::launder(reinterpret_cast<StreamRef*>(slots[i])); }
  StreamRef* find(const Device& d) noexcept {
    for (int i = 0; i < count; ++i) {
      if (at(i)->device() == d) return &at(i);
    }
    return nullptr;
  }
};
constinit thread_local CurrentStreams tls_current{};

void release_current_streams(void*) {
  CurrentStreams& t = tls_current;
  while (t.count > 0) t.at(--t.count).~StreamRef();
  t.hooked = false;
}

// Adds `s` for its device (none there yet). Throws Error past kMaxCurrentStreams devices.
void add_current_stream(const StreamRef& s) {
  CurrentStreams& t = tls_current;
  if (t.count == kMaxCurrentStreams) {
    throw Error("a thread may set a current stream for at most " +
                std::to_string(kMaxCurrentStreams) + " devices; " + s->device().str() +
                " would be one more");
  }
  if (!t.hooked) {
    core::at_thread_exit(release_current_streams, nullptr);  // none left: the entries leak
    t.hooked = true;
  }
  ::new (t.slots[t.count]) StreamRef(s);
  ++t.count;
}

}  // namespace

void impl::check_priority(Backend& backend, const Device& device, int priority) {
  const auto [least, greatest] = backend.priority_range();
  if (priority > least || priority < greatest) {
    throw Error("stream priority " + std::to_string(priority) + " is out of range for " +
                device.str() + ": use a value from " + std::to_string(least) +
                " (least urgent) to " + std::to_string(greatest) + " (most urgent)");
  }
}

Stream::Stream(Device device, int priority) {
  impl::Backend& b = impl::backend_for(device);
  impl::check_priority(b, device, priority);
  impl_ = b.new_stream(device.index, priority);
}

Stream::Stream(std::shared_ptr<impl::StreamImpl> impl) noexcept : impl_(std::move(impl)) {}

Stream Stream::default_stream(Device device) {
  return Stream(impl::backend_for(device).default_stream(device.index));
}

std::pair<int, int> Stream::priority_range(Device device) {
  return impl::backend_for(device).priority_range();
}

void core::throw_moved_from(const ErrorText& who, const char* cls, bool argument) {
  const bool stream = std::string_view(cls) == "Stream";
  throw Error(who + ": " + (argument ? "the " : "this ") + cls + (argument ? " passed" : "") +
              " was moved from, so it names no " + (stream ? "stream" : "event") + "; assign " +
              (stream ? "a " : "an ") + cls +
              " to it (a copy of a live one, or a new one) before using it again");
}

impl::StreamImpl& Stream::checked(const char* member) const {
  if (!impl_) [[unlikely]] {
    core::throw_moved_from(api::member("Stream", member), "Stream", false);
  }
  return *impl_;
}

Device Stream::device() const {
  return checked("device").device();
}
int Stream::priority() const {
  return checked("priority").priority();
}
std::uint64_t Stream::id() const {
  return checked("id").id();
}

void Stream::launch_work(detail::Work work, const char* label) {
  auto& s = checked("launch");
  if (capture::active() && capture::launch(s, work, label)) return;
  s.backend().enqueue(s, std::move(work), label);
}

bool Stream::query() const {
  auto& s = checked("query");
  capture::refuse_if_capturing(s, "query");
  return s.backend().query_stream(s);
}

void Stream::synchronize() const {
  auto& s = checked("synchronize");
  capture::refuse_if_capturing(s, "synchronize");
  s.backend().synchronize_stream(s, std::nullopt);
}

bool Stream::synchronize_for(std::chrono::nanoseconds timeout) const {
  auto& s = checked("synchronize_for");
  capture::refuse_if_capturing(s, "synchronize_for");
  return s.backend().synchronize_stream(s, timeout);
}

std::uint64_t Stream::cancel() {
  auto& s = checked("cancel");
  capture::refuse_if_capturing(s, "cancel");
  return s.backend().cancel(s);
}

std::uint64_t Stream::pending() const {
  auto& s = checked("pending");
  return s.backend().pending(s);
}

void Stream::set_host_run(bool allowed) {
  auto& s = checked("set_host_run");
  impl::HostRun* const host_run = s.backend().host_run();
  if (host_run == nullptr) {
    throw Error(std::string(to_string(s.device().type)) + " backend doesn't support " +
                api::member("Stream", "set_host_run") + "()");
  }
  host_run->set_allowed(s, allowed);
}

bool Stream::host_run() const {
  auto& s = checked("host_run");
  const impl::HostRun* const host_run = s.backend().host_run();
  return host_run != nullptr && host_run->allowed(s);
}

void Stream::wait_event(const Event& e) {
  checked("wait_event");
  if (!e.valid()) core::throw_moved_from(api::member("Stream", "wait_event"), "Event", true);
  auto position = e.impl();
  if (!position) {
    throw Error(api::member("Stream", "wait_event") +
                ": the event was never recorded (or was reset); record it on a stream before "
                "waiting on it");
  }
  if (position->device().type != device().type) {
    throw Error(api::member("Stream", "wait_event") + ": event recorded on " +
                position->device().str() + " cannot be waited on by a stream of " + device().str());
  }
  if (&position->backend() != &impl_->backend()) {
    throw Error(api::member("Stream", "wait_event") + ": the event was recorded by another " +
                std::string(to_string(device().type)) + " backend than the one of " + str() +
                " (register_backend replaced it in between); record the event on a stream "
                "created after the replacement");
  }
  capture::block(impl_->backend(), position, impl_);
}

void Stream::wait_stream(const Stream& other) {
  checked("wait_stream");
  if (!other.impl_) core::throw_moved_from(api::member("Stream", "wait_stream"), "Stream", true);
  if (other == *this) return;  // in-order already
  Event e;
  e.record(other);
  wait_event(e);
}

Event Stream::record_event() {
  // A new event: no earlier record to check against or to swap out (Event::record does both).
  return Event(capture::record_position(checked("record_event"), EventOptions{}));
}

Event Stream::record_event(Event& e) {
  checked("record_event");
  if (!e.valid()) core::throw_moved_from(api::member("Stream", "record_event"), "Event", true);
  e.record(*this);
  return e;
}

bool Stream::is_capturing() const {
  return capture::is_capturing(checked("is_capturing"));
}

std::string Stream::str() const {
  const auto& s = checked("str");
  return s.device().str() + " stream " + std::to_string(s.id()) + " (priority " +
         std::to_string(s.priority()) + ")";
}

Stream current_stream(Device device) {
  if (auto* s = tls_current.find(device)) return Stream(*s);
  return Stream::default_stream(device);
}

void set_current_stream(const Stream& s) {
  if (!s.impl()) core::throw_moved_from(api::function("set_current_stream"), "Stream", true);
  impl::exchange_current_stream(s);
}

Stream default_stream(Device device) {
  return Stream::default_stream(device);
}

Stream impl::exchange_current_stream(const Stream& s) {
  if (auto* slot = tls_current.find(s.device())) {
    Stream previous(*slot);
    *slot = s.impl();
    return previous;
  }
  Stream previous = Stream::default_stream(s.device());
  add_current_stream(s.impl());
  return previous;
}

namespace {

// `s`, or Error when it was moved from: a context on it would name no stream.
const Stream& context_stream(const Stream& s) {
  if (!s.impl())
    core::throw_moved_from(api::member("StreamContext", "StreamContext"), "Stream", true);
  return s;
}

}  // namespace

StreamContext::StreamContext(const Stream& s)
    : previous_(impl::exchange_current_stream(context_stream(s))) {}

StreamContext::StreamContext(std::optional<Stream> s) {
  if (s) previous_ = impl::exchange_current_stream(context_stream(*s));
}

StreamContext::~StreamContext() {
  // exchange_current_stream only swaps a pointer in an existing slot here (the constructor made
  // it), so it cannot throw.
  if (previous_) impl::exchange_current_stream(*previous_);
}

}  // namespace streamrt
