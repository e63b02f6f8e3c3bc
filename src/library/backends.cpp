// The backends the library starts with. The one place that names every backend: the layers above
// the backends (ops, graph, mpi) reach them through the backend interface only.
#include "core/registry.hpp"
#include "cpu/cpu_backend.hpp"

namespace streamrt::core {

std::vector<std::unique_ptr<impl::Backend>> make_builtin_backends() {
  std::vector<std::unique_ptr<impl::Backend>> backends;
  backends.push_back(std::make_unique<cpu::CpuBackend>());
  return backends;
}

}  // namespace streamrt::core
