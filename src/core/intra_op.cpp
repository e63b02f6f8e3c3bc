// The host's intra-op hook (intra_op.hpp): the CPU backend's, or the calling thread alone.
#include "intra_op.hpp"

namespace streamrt::runtime {
namespace {

thread_local int tls_inline_depth = 0;

// For a CPU backend without intra-op parallelism: every kernel runs on the calling thread.
class InlineParallel final : public impl::IntraOpParallel {
 public:
  void parallel_for(std::int64_t begin, std::int64_t end, std::int64_t,
                    const std::function<void(std::int64_t, std::int64_t)>& f) override {
    if (end <= begin) return;
    ++tls_inline_depth;
    struct Leave {
      ~Leave() { --tls_inline_depth; }
    } leave;
    f(begin, end);
  }
  int num_threads() override { return 1; }
  bool in_parallel_region() const noexcept override { return tls_inline_depth > 0; }
};

}  // namespace

std::atomic<impl::IntraOpParallel*> g_host_parallel{nullptr};

impl::IntraOpParallel& host_parallel_slow() noexcept {
  // Null before the library registered its CPU backend (static initialisation) or for a CPU
  // backend without the hook: kernels run inline. Acquire: as in host_parallel().
  if (impl::IntraOpParallel* p = g_host_parallel.load(std::memory_order_acquire)) return *p;
  static InlineParallel inline_parallel;
  return inline_parallel;
}

}  // namespace streamrt::runtime
