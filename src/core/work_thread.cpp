// The work-thread probe (work_thread.hpp).
#include "work_thread.hpp"

#include <atomic>

namespace streamrt::core {
namespace {

// Acquire/release: the probe is set once before work runs; relaxed would do as well, since a
// function pointer publishes nothing else, but the pair costs nothing off the hot path.
std::atomic<WorkThreadProbe> g_probe{nullptr};

}  // namespace

void set_work_thread_probe(WorkThreadProbe probe) noexcept {
  g_probe.store(probe, std::memory_order_release);
}

bool on_work_thread() noexcept {
  const WorkThreadProbe probe = g_probe.load(std::memory_order_acquire);
  return probe != nullptr && probe();
}

}  // namespace streamrt::core
