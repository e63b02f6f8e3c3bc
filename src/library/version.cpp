// version_info(): the build's facts come from compile definitions set in src/CMakeLists.txt;
// the backends and the CPU worker count are read from the running library.
#include "streamrt/version.hpp"

#include <cstdlib>

#include "streamrt/cpu.hpp"
#include "streamrt/device.hpp"
#include "streamrt/error.hpp"
#include "streamrt/impl/backend.hpp"

#if !defined(STREAMRT_VERSION) || !defined(STREAMRT_BUILD_TYPE) || !defined(STREAMRT_COMPILER) || \
    !defined(STREAMRT_SANITIZER_NAME)
#error "version.cpp needs the compile definitions that CMakeLists.txt sets on it"
#endif

namespace streamrt {

VersionInfo version_info() {
  VersionInfo info;
  info.version = STREAMRT_VERSION;
  info.build_type = STREAMRT_BUILD_TYPE;
  info.compiler = STREAMRT_COMPILER;
  info.sanitizer = STREAMRT_SANITIZER_NAME;
  for (int t = 0; t < kNumDeviceTypes; ++t) {
    const auto type = static_cast<DeviceType>(t);
    try {
      impl::backend(type);
      info.backends.emplace_back(to_string(type));
    } catch (const Error&) {
      // No backend registered for this device type in this process: not listed.
    }
  }
  info.num_threads = cpu::num_threads();
  return info;
}

std::string version_text() {
  const VersionInfo info = version_info();
  std::string backends;
  for (const std::string& b : info.backends) {
    if (!backends.empty()) backends += ", ";
    backends += b;
  }
  std::string text = "streamrt ";
  text += info.version;
  text += "\nbuild type: ";
  text += info.build_type;
  text += "\ncompiler: ";
  text += info.compiler;
  text += "\nsanitizer: ";
  text += info.sanitizer.empty() ? std::string("none") : info.sanitizer;
  text += "\nbackends: ";
  text += backends;
  text += "\nworkers: ";
  text += std::to_string(info.num_threads);
  text += "\nSTREAMRT_NUM_THREADS: ";
  const char* env = std::getenv("STREAMRT_NUM_THREADS");
  text += env != nullptr ? env : "unset";
  text += '\n';
  return text;
}

}  // namespace streamrt
