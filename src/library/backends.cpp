// The built-in backends, registered when the library is loaded, as c10's C10_REGISTER_GUARD_IMPL
// registers its device guards: the core layer's table knows no backend by name, so it links
// alone. The one place that names every backend: the layers above the backends (ops, graph, mpi)
// reach them through the backend interface only.
#include "cpu/cpu_backend.hpp"
#include "ops/allocator.hpp"
#include "streamrt/impl/backend.hpp"

// What a static link must pull in: no other object of the library names this one, so a linker
// taking objects from an archive would drop it, and the registration below with it. The static
// archive's users link with --undefined of this name (src/CMakeLists.txt, streamrt_static).
extern "C" void streamrt_builtin_backends() noexcept;
extern "C" void streamrt_builtin_backends() noexcept {}

namespace streamrt::library {
namespace {

// The allocator comes first, then the CPU backend. Made when the library loads, before the program
// starts threads: a fork() while another thread was making the backend lazily left the child
// waiting for ever on a static guard. The order fixes the order of their fork handlers: prepare
// handlers run in reverse order of registration, so the backend's prepare runs first and waits for
// the stream work queued at the fork, which may allocate, while the allocator's mutex is still
// free; only then is the mutex taken. The other way round that work would wait for the mutex the
// forking thread holds, and fork() for that work, until the fork time-out (docs/reliability.md,
// "fork()"; tests/unit/fork_test.cpp checks it).
std::unique_ptr<impl::Backend> make_cpu_backend() {
  ops::make_caching_allocator();
  return std::make_unique<cpu::CpuBackend>();
}

const impl::BackendRegisterer g_cpu_backend(&make_cpu_backend);

}  // namespace
}  // namespace streamrt::library
