#pragma once
// A pause for spin loops: lets the sibling hyper-thread run and saves power. Shared by every spin
// in the runtime (worker and host polls, the event handle's lock, SpinMutex).

namespace streamrt::core {

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace streamrt::core
