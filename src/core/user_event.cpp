// UserEvent: a backend position completed by the host. The handle owns the duty to complete it:
// the last handle completes it with an Error if nobody did, so no stream stays parked for ever.
#include "streamrt/user_event.hpp"

#include <atomic>

#include "streamrt/error.hpp"
#include "streamrt/impl/backend.hpp"

namespace streamrt {

struct UserEvent::State {
  State(impl::Backend& b, std::shared_ptr<impl::EventImpl> p)
      : backend(b), position(std::move(p)) {}
  ~State() {
    if (done.exchange(true, std::memory_order_acq_rel)) return;
    try {
      backend.complete_user_event(
          position, std::make_exception_ptr(
                        Error("a UserEvent was dropped without complete(): whatever was meant to "
                              "complete it is gone, so work waiting on it fails instead of waiting "
                              "for ever")));
    } catch (...) {
      // Out of memory while failing it: nothing more can be done in a destructor.
    }
  }
  State(const State&) = delete;
  State& operator=(const State&) = delete;

  impl::Backend& backend;
  const std::shared_ptr<impl::EventImpl> position;
  // acq_rel: exactly one complete() (or the destructor) wins; the winner's completion is ordered
  // by the backend's own release/acquire on the position.
  std::atomic<bool> done{false};
};

UserEvent::UserEvent(Device device, EventOptions options) {
  impl::Backend& b = impl::backend_for(device);
  state_ = std::make_shared<State>(b, b.new_user_event(device.index, options));
}

Event UserEvent::event() const {
  return Event(state_->position);
}

void UserEvent::complete(std::exception_ptr failure) {
  if (state_->done.exchange(true, std::memory_order_acq_rel)) {
    throw Error(api::member("UserEvent", "complete") +
                ": the event was already completed (complete() may be called once)");
  }
  state_->backend.complete_user_event(state_->position, std::move(failure));
}

bool UserEvent::completed() const {
  return state_->done.load(std::memory_order_acquire);
}

}  // namespace streamrt
