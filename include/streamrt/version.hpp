#pragma once
//! \file version.hpp
//! What this build of the library is: its version, how it was built and what it runs on. The
//! `streamrt --version` tool command and `python3 -m streamrt` print version_text().

#include <string>
#include <vector>

#include "streamrt/export.hpp"

namespace streamrt {

//! A description of the loaded library, for bug reports and for checking which build a program
//! picked up. A plain value.
struct VersionInfo {
  //! The library version, "major.minor.patch" (the CMake project version).
  std::string version;
  //! The CMake build type the library was compiled with ("Release", "RelWithDebInfo", ...).
  std::string build_type;
  //! The compiler that built the library, "<CMake compiler id> <version>" ("GNU 12.2.0").
  std::string compiler;
  //! The sanitizer the library was built with ("thread", "address"), empty for none.
  std::string sanitizer;
  //! Lower-case names of the device types that have a backend in this process ("cpu").
  std::vector<std::string> backends;
  //! The number of CPU worker threads now (cpu::num_threads()).
  int num_threads = 0;
};

//! Describes the loaded library. Never blocks; thread-safe. May start the CPU backend (as any
//! first use of the runtime does) to read its worker count.
STREAMRT_API VersionInfo version_info();

//! version_info() as text, one "name: value" line per field after a first "streamrt <version>"
//! line, each ending in '\n'. Never blocks; thread-safe.
STREAMRT_API std::string version_text();

}  // namespace streamrt
