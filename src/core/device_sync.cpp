// The device-wide waits (synchronize(device)), forwarded to the device's backend; refused while a
// capture's mode forbids them.
#include <chrono>
#include <optional>

#include "capture_state.hpp"
#include "streamrt/device.hpp"
#include "streamrt/impl/backend.hpp"

namespace streamrt {

void synchronize(Device device) {
  capture::refuse_device_wide("synchronize");
  impl::backend_for(device).synchronize_device(device.index, std::nullopt);
}

bool synchronize_for(std::chrono::nanoseconds timeout, Device device) {
  capture::refuse_device_wide("synchronize_for");
  return impl::backend_for(device).synchronize_device(device.index, timeout);
}

}  // namespace streamrt
