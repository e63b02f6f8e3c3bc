// The fork handlers of the layers above the runtime (impl/hooks.hpp), which backends run inside
// their own.
#include <atomic>
#include <string>

#include "streamrt/error.hpp"
#include "streamrt/impl/hooks.hpp"

namespace streamrt::impl {

namespace {

struct ForkHandlers {
  void (*prepare)();
  void (*parent)();
  void (*child)();
};
constexpr int kMaxForkHandlers = 8;
// Written at load (add_fork_handlers), read in fork handlers: a plain array, no lock to inherit.
ForkHandlers g_fork_handlers[kMaxForkHandlers];
std::atomic<int> g_fork_handler_count{0};

}  // namespace

void add_fork_handlers(void (*prepare)(), void (*parent)(), void (*child)()) {
  // Relaxed: set at load, before any fork(); fork() itself orders it for the handlers.
  const int n = g_fork_handler_count.load(std::memory_order_relaxed);
  if (n == kMaxForkHandlers) {
    throw Error("add_fork_handlers: at most " + std::to_string(kMaxForkHandlers) +
                " layers may add fork handlers");
  }
  g_fork_handlers[n] = ForkHandlers{prepare, parent, child};
  g_fork_handler_count.store(n + 1, std::memory_order_release);
}

void run_fork_prepare() noexcept {
  // Acquire: pairs with the store above, so the entries are complete.
  for (int i = g_fork_handler_count.load(std::memory_order_acquire); i-- > 0;) {
    if (g_fork_handlers[i].prepare != nullptr) g_fork_handlers[i].prepare();
  }
}

void run_fork_parent() noexcept {
  const int n = g_fork_handler_count.load(std::memory_order_acquire);  // as above
  for (int i = 0; i < n; ++i) {
    if (g_fork_handlers[i].parent != nullptr) g_fork_handlers[i].parent();
  }
}

void run_fork_child() noexcept {
  const int n = g_fork_handler_count.load(std::memory_order_acquire);  // as above
  for (int i = 0; i < n; ++i) {
    if (g_fork_handlers[i].child != nullptr) g_fork_handlers[i].child();
  }
}

}  // namespace streamrt::impl
