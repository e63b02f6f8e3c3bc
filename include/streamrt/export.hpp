#pragma once
//! \file export.hpp
//! STREAMRT_API marks what libstreamrt exports: the public API and the backend interface. The
//! library is built with -fvisibility=hidden, so every other symbol (the CPU backend, the worker
//! pool, the ops kernels) stays inside it. Whitebox tests link the object library instead
//! (tests/internal/).

#if defined(__GNUC__) || defined(__clang__)
//! Exports a class (its vtable, typeinfo and out-of-line members) or a function.
#define STREAMRT_API __attribute__((visibility("default")))
#else
#define STREAMRT_API
#endif
