// Thread-exit hooks through one pthread key (thread_exit.hpp).
#include "thread_exit.hpp"

#include <pthread.h>

namespace streamrt::core {
namespace {

struct Hooks {
  void (*fn[kMaxThreadExitHooks])(void*);
  void* arg[kMaxThreadExitHooks];
  int count;
};
// Static TLS, trivially destructible: using it allocates nothing and registers nothing.
constinit thread_local Hooks tls_hooks{};

void run_hooks(void*) {
  Hooks& h = tls_hooks;
  // A hook may register another (a parker needed by a last wait): the key is set again then,
  // and the pthread runtime calls us once more.
  while (h.count > 0) {
    --h.count;
    h.fn[h.count](h.arg[h.count]);
  }
}

pthread_key_t make_key() noexcept {
  pthread_key_t key{};
  // Fails only when the process has used up its keys; then no hook registers (every caller
  // copes with a refusal).
  if (pthread_key_create(&key, run_hooks) != 0) return static_cast<pthread_key_t>(-1);
  return key;
}

}  // namespace

bool at_thread_exit(void (*fn)(void*), void* arg) noexcept {
  static const pthread_key_t key = make_key();
  if (key == static_cast<pthread_key_t>(-1)) return false;
  Hooks& h = tls_hooks;
  if (h.count == kMaxThreadExitHooks) return false;
  // The key's value only has to be non-null for its destructor to run. Within glibc's first
  // block of keys setting it allocates nothing; past it, a refusal (ENOMEM) is reported.
  if (h.count == 0 && pthread_setspecific(key, &h) != 0) return false;
  h.fn[h.count] = fn;
  h.arg[h.count] = arg;
  ++h.count;
  return true;
}

}  // namespace streamrt::core
