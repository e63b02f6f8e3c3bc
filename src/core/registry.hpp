#pragma once
// What the runtime layer (src/core) needs of the backend table beyond impl/backend.hpp.
#include "streamrt/impl/backend.hpp"

namespace streamrt::core {

// Calls set_tracing(on) on every registered backend (replaced ones included: their streams may
// still run) and on every backend registered later, until the next call. Thread-safe.
void set_tracing_in_backends(bool on);

}  // namespace streamrt::core
