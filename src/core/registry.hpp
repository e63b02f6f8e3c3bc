#pragma once
// What the runtime layer (src/core) needs of the backend table beyond impl/backend.hpp.
#include <memory>
#include <vector>

#include "streamrt/impl/backend.hpp"

namespace streamrt::core {

// The backends the table starts with, one per device type (the library assembles them:
// src/library/backends.cpp). Called once, when the table is first used, not from a static
// initializer: the backends are there even when the library is linked statically and nothing
// else names their code.
std::vector<std::unique_ptr<impl::Backend>> make_builtin_backends();

// Calls set_tracing(on) on every registered backend (replaced ones included: their streams may
// still run) and on every backend registered later, until the next call. Thread-safe.
void set_tracing_in_backends(bool on);

}  // namespace streamrt::core
