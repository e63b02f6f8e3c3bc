// The table of backends, indexed by device type (c10's device_guard_impl_registry).
#include "registry.hpp"

#include <array>
#include <atomic>
#include <mutex>
#include <string>
#include <vector>

#include "intra_op.hpp"
#include "streamrt/error.hpp"
#include "streamrt/impl/backend.hpp"

namespace streamrt {
namespace impl {
namespace {

struct Registry {
  std::mutex mutex;
  // Reads are lock-free: handles call backend() on every operation. Acquire pairs with the release
  // in register_backend so a reader sees a fully constructed backend.
  std::array<std::atomic<Backend*>, kNumDeviceTypes> table{};
  // Replaced backends are kept alive: streams created by them may still be running.
  std::vector<std::unique_ptr<Backend>> owned;
  bool tracing = false;  // guarded by mutex: what set_tracing_in_backends asked for last
};

// Makes `b` the backend of its device type; for DeviceType::CPU its intra-op hook becomes the
// host's (core/intra_op.hpp). Called with the registry's lock held, or before it is shared.
void install(Registry& r, std::unique_ptr<Backend> b) {
  r.owned.push_back(std::move(b));  // first: if it throws, nothing points to the backend
  Backend* const backend = r.owned.back().get();
  if (backend->type() == DeviceType::CPU) {
    // Release: a kernel's acquire load sees the hook's object fully built.
    runtime::g_host_parallel.store(backend->intra_op_parallel(), std::memory_order_release);
  }
  r.table[static_cast<int>(backend->type())].store(backend, std::memory_order_release);
}

Registry& registry() {
  // Leaked on purpose: handles held in static storage may call into backends during exit.
  static Registry* const r = new Registry;
  return *r;
}

}  // namespace

std::uint64_t Backend::pending(const StreamImpl&) {
  throw Error(std::string(to_string(type())) + " backend doesn't support " +
              api::member("Stream", "pending") + "()");
}
std::uint64_t Backend::cancel(StreamImpl&) {
  throw Error(std::string(to_string(type())) + " backend doesn't support " +
              api::member("Stream", "cancel") + "()");
}
void Backend::set_tracing(bool) noexcept {}
std::shared_ptr<EventImpl> Backend::new_user_event(int, EventOptions) {
  throw Error(std::string(to_string(type())) + " backend doesn't support UserEvent");
}
void Backend::complete_user_event(const std::shared_ptr<EventImpl>&, std::exception_ptr) {
  throw Error(std::string(to_string(type())) + " backend doesn't support UserEvent");
}

void register_backend(std::unique_ptr<Backend> backend) {
  if (!backend) throw Error("register_backend: backend is null");
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  if (r.tracing) backend->set_tracing(true);
  install(r, std::move(backend));
}

Backend& backend(DeviceType type) {
  const int t = static_cast<int>(type);
  Backend* b = (t >= 0 && t < kNumDeviceTypes) ? registry().table[t].load(std::memory_order_acquire)
                                               : nullptr;
  if (b == nullptr) {
    throw Error("no backend for device type '" + std::string(to_string(type)) +
                "': this build of streamrt has only the CPU backend; use " + api::device("cpu"));
  }
  return *b;
}

Backend& backend_for(const Device& device) {
  Backend& b = backend(device.type);
  const int count = b.device_count();
  if (device.index < 0 || device.index >= count) {
    throw Error("device index out of range: " + device.str() + " does not exist (" +
                std::to_string(count) + " " + std::string(to_string(device.type)) +
                " device(s); use index 0 to " + std::to_string(count - 1) + ")");
  }
  return b;
}

}  // namespace impl
}  // namespace streamrt

namespace streamrt::core {

void set_tracing_in_backends(bool on) {
  impl::Registry& r = impl::registry();
  std::lock_guard lock(r.mutex);
  r.tracing = on;
  for (const auto& b : r.owned) b->set_tracing(on);
}

}  // namespace streamrt::core
