// The CPU backend's implementation of the intra-op contract (src/core/intra_op.hpp).
#include "core/intra_op.hpp"

#include "parallel.hpp"

namespace streamrt::intra_op {

void parallel_for(std::int64_t n, std::int64_t grain,
                  const std::function<void(std::int64_t, std::int64_t)>& fn,
                  std::int64_t max_chunks) {
  cpu::parallel_for(n, grain, fn, max_chunks);
}

int num_workers() {
  return cpu::parallel_workers();
}

}  // namespace streamrt::intra_op
