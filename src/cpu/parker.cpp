// The per-thread parker's life: made on a thread's first wait, released by a thread-exit hook.
#include "parker.hpp"

#include <memory>
#include <new>
#include <vector>

#include "core/thread_exit.hpp"

namespace streamrt::cpu {
namespace parker_detail {
namespace {

void release(void* holder) {
  tls_parker = nullptr;
  delete static_cast<std::shared_ptr<Parker>*>(holder);
}

}  // namespace

std::shared_ptr<Parker> new_thread_parker() {
  auto holder = std::make_unique<std::shared_ptr<Parker>>(std::make_shared<Parker>());
  // No hook left: this wait gets its own parker (correct, only not reused).
  if (!core::at_thread_exit(release, holder.get())) return *holder;
  tls_parker = holder.release();
  return *tls_parker;
}

}  // namespace parker_detail

void renew_this_thread_parker() {
  auto* p = parker_detail::tls_parker;
  if (p == nullptr) return;  // no parker yet: the next wait makes a fresh one
  static auto* const abandoned = new std::vector<std::shared_ptr<Parker>>;  // stays reachable
  try {
    abandoned->push_back(std::move(*p));
  } catch (...) {
    // Out of memory to keep it: leak it by hand, it must never be destroyed here.
    new (std::nothrow) std::shared_ptr<Parker>(std::move(*p));
  }
  try {
    *p = std::make_shared<Parker>();
  } catch (...) {
    parker_detail::tls_parker = nullptr;  // the next wait makes one (or fails there, cleanly)
  }
}

}  // namespace streamrt::cpu
