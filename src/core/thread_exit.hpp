#pragma once
// Per-thread clean-up at thread exit without C++ thread_local destructors. Registering one of
// those allocates (glibc's __cxa_thread_atexit), and glibc ends the process ("failed to register
// TLS destructor") when that allocation fails: a thread's first launch or wait under memory
// exhaustion would kill the process. These hooks live in the thread's static TLS and run from a
// pthread key destructor, after the thread's C++ thread_local destructors. As for any pthread
// key, they do not run for the main thread at exit() (nothing they release matters then).

namespace streamrt::core {

// The most hooks one thread may hold (the runtime registers a few).
inline constexpr int kMaxThreadExitHooks = 8;

// Runs fn(arg) when the calling thread exits, after its C++ thread_local destructors; hooks run
// in reverse order of registration. False, with nothing registered, when the thread holds
// kMaxThreadExitHooks already or the OS refused the key's slot: the caller then does without
// (releases at once, or keeps nothing per thread). Never throws.
bool at_thread_exit(void (*fn)(void*), void* arg) noexcept;

}  // namespace streamrt::core
