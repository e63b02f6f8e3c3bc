#pragma once
// The Error of a call on a moved-from Stream or Event handle (its shared pointer is null): the
// call names no stream or event, and dereferencing the null pointer would crash the process.

#include "streamrt/error.hpp"

namespace streamrt::core {

// Throws Error: `who` (the member or function called) got a moved-from handle of class `cls`
// ("Stream" or "Event"), as its object when `argument` is false, as an argument when true.
[[noreturn]] void throw_moved_from(const ErrorText& who, const char* cls, bool argument);

}  // namespace streamrt::core
