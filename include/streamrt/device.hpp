#pragma once
//! \file device.hpp
//! Devices, and the device-wide waits (synchronize). The CPU backend's own settings (worker
//! count, idle polling, scheduling policy) are in cpu.hpp.

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "streamrt/export.hpp"

namespace streamrt {

//! The kinds of device streamrt knows about. Only CPU has a backend in this build.
enum class DeviceType : std::uint8_t { CPU = 0, CUDA = 1 };

//! Number of DeviceType values (for backend tables).
inline constexpr int kNumDeviceTypes = 2;

//! Lower-case name of a device type ("cpu", "cuda"). Never blocks; thread-safe.
STREAMRT_API std::string_view to_string(DeviceType type) noexcept;

//! A device: a type and an index. A plain value; thread-safe to copy.
struct STREAMRT_API Device {
  //! The device type; CPU by default.
  DeviceType type = DeviceType::CPU;
  //! The device index; 0 by default.
  int index = 0;

  //! Parses "cpu", "cpu:0", "cuda", "cuda:1". Throws Error naming the text on anything else.
  //! Never blocks; thread-safe. Does not check that a backend exists for the device.
  static Device parse(std::string_view text);

  //! "cpu:0" style text. Never blocks; thread-safe.
  std::string str() const;

  //! Same type and index.
  bool operator==(const Device&) const = default;
};

//! Blocks until all work submitted, before this call, to every stream of `device` has finished,
//! then rethrows the first failure found among those streams (that failure counts as reported).
//! Thread-safe. Throws Error when called from work running on a stream of the device.
STREAMRT_API void synchronize(Device device = {});

//! As synchronize(device), but gives up after `timeout` and returns false (nothing changes then:
//! no failure is reported). Any time-out is valid: one past what the clock counts
//! (nanoseconds::max()) waits as long as it can, a negative one polls. Thread-safe; the same
//! errors as synchronize().
STREAMRT_API bool synchronize_for(std::chrono::nanoseconds timeout, Device device = {});

}  // namespace streamrt

//! Hash of a device, so it can key unordered containers.
template <>
struct std::hash<streamrt::Device> {
  //! Combines type and index. Never blocks; thread-safe.
  std::size_t operator()(const streamrt::Device& d) const noexcept {
    return (static_cast<std::size_t>(d.type) << 16) ^ static_cast<std::size_t>(d.index);
  }
};
