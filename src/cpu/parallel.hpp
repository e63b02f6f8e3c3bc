#pragma once
// The CPU backend's intra-op parallelism (impl::IntraOpParallel) on its worker pool.
#include <cstdint>
#include <functional>

#include "streamrt/impl/host_capabilities.hpp"

namespace streamrt::cpu {

class CpuBackend;
class WorkerPool;

class CpuParallel final : public impl::IntraOpParallel {
 public:
  explicit CpuParallel(CpuBackend& backend) noexcept : backend_(backend) {}
  void parallel_for(std::int64_t begin, std::int64_t end, std::int64_t grain,
                    const std::function<void(std::int64_t, std::int64_t)>& f) override;
  // The worker count of the pool a split on this thread would use (starts the shared pool).
  int num_threads() override;
  bool in_parallel_region() const noexcept override;

 private:
  // The pool this thread's splits go to (see parallel.cpp).
  WorkerPool& pool();
  CpuBackend& backend_;
};

}  // namespace streamrt::cpu
