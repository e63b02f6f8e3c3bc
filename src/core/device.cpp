// Devices: their names and the parsing of device strings ("cpu", "cuda:1"). The device-wide
// waits are in device_sync.cpp.
#include "streamrt/device.hpp"

#include <charconv>
#include <string>

#include "streamrt/error.hpp"

namespace streamrt {

std::string_view to_string(DeviceType type) noexcept {
  switch (type) {
    case DeviceType::CPU:
      return "cpu";
    case DeviceType::CUDA:
      return "cuda";
  }
  return "unknown";
}

Device Device::parse(std::string_view text) {
  auto fail = [&]() -> Error {
    return Error("invalid device string '" + std::string(text) +
                 "': expected 'cpu', 'cpu:N', 'cuda' or 'cuda:N' with N a non-negative integer");
  };
  const auto colon = text.find(':');
  const std::string_view name = text.substr(0, colon);
  Device d;
  if (name == "cpu") {
    d.type = DeviceType::CPU;
  } else if (name == "cuda") {
    d.type = DeviceType::CUDA;
  } else {
    throw fail();
  }
  if (colon != std::string_view::npos) {
    const std::string_view digits = text.substr(colon + 1);
    if (digits.empty() || digits.size() > 9) throw fail();
    for (char c : digits) {
      if (c < '0' || c > '9') throw fail();
    }
    std::from_chars(digits.data(), digits.data() + digits.size(), d.index);
  }
  return d;
}

std::string Device::str() const {
  return std::string(to_string(type)) + ":" + std::to_string(index);
}

}  // namespace streamrt
