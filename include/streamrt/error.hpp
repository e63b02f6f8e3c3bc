#pragma once
//! \file error.hpp
//! The exception types streamrt throws.

#include <stdexcept>
#include <string>

#include "streamrt/export.hpp"

namespace streamrt {

//! Thrown for misuse and runtime failures that streamrt itself detects (bad arguments, waits on
//! events that were never recorded, self-deadlocks). Thread-safe to throw and copy; never blocks.
class STREAMRT_API Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

//! Thrown by waits on work that was dropped by Stream::cancel(); a kind of Error.
class STREAMRT_API Cancelled : public Error {
 public:
  using Error::Error;
};

}  // namespace streamrt
