// Random numbers: Generator (a seed and an offset into a Philox sequence, random.hpp) and the
// rand/randn creation ops.
#include "random.hpp"

#include <atomic>
#include <memory>
#include <string>

#include "creation.hpp"
#include "kernels.hpp"
#include "simd_kernels.hpp"
#include "storage.hpp"
#include "streamrt/error.hpp"
#include "streamrt/tensor.hpp"
#include "tensor_access.hpp"
#include "tracking.hpp"

namespace streamrt {

struct Generator::State {
  std::atomic<std::uint64_t> seed;
  std::atomic<std::uint64_t> offset{0};
  explicit State(std::uint64_t s) : seed(s) {}
};

Generator::Generator(std::uint64_t seed) : state_(std::make_shared<State>(seed)) {}
// Relaxed throughout: the generator publishes no other memory; reserve() needs atomicity only.
std::uint64_t Generator::seed() const noexcept {
  return state_->seed.load(std::memory_order_relaxed);
}
std::uint64_t Generator::offset() const noexcept {
  return state_->offset.load(std::memory_order_relaxed);
}
void Generator::manual_seed(std::uint64_t seed) noexcept {
  state_->seed.store(seed, std::memory_order_relaxed);
  state_->offset.store(0, std::memory_order_relaxed);
}
std::uint64_t Generator::reserve(std::uint64_t n) noexcept {
  return state_->offset.fetch_add(n, std::memory_order_relaxed);
}

namespace {

Tensor random_tensor(const char* op, Shape shape, std::uint64_t seed, std::uint64_t offset,
                     bool normal, DType dtype, Device device) {
  if (!is_floating(dtype)) {
    throw Error(std::string(op) + ": dtype " + std::string(to_string(dtype)) +
                " is not a floating type; use " + api::enumerator("DType", "Float32") + " or " +
                api::enumerator("DType", "Float64"));
  }
  Tensor t = ops::new_tensor(std::move(shape), dtype, device);
  void* pt = detail::TensorAccess::storage(t)->data();
  const std::int64_t n = t.numel();
  ops::submit(op, device, {}, {&t}, [pt, n, seed, offset, normal, dtype] {
    ops::dispatch_floating(dtype, [&](auto tag) {
      using T = decltype(tag);
      T* p = static_cast<T*>(pt);
      ops::parallel_ranges(n, [&](std::int64_t begin, std::int64_t end) {
        const auto first = offset + static_cast<std::uint64_t>(begin);
        if (normal) {
          ops::simd::fill_normal(p + begin, first, end - begin, seed);
        } else {
          ops::simd::fill_uniform(p + begin, first, end - begin, seed);
        }
      });
    });
  });
  return t;
}

}  // namespace

Tensor rand(Shape shape, std::uint64_t seed, DType dtype, Device device) {
  return random_tensor("rand", std::move(shape), seed, 0, false, dtype, device);
}

Tensor rand(Shape shape, Generator& gen, DType dtype, Device device) {
  const auto n = static_cast<std::uint64_t>(shape_numel(shape));
  return random_tensor("rand", std::move(shape), gen.seed(), gen.reserve(n), false, dtype, device);
}

Tensor randn(Shape shape, std::uint64_t seed, DType dtype, Device device) {
  return random_tensor("randn", std::move(shape), seed, 0, true, dtype, device);
}

Tensor randn(Shape shape, Generator& gen, DType dtype, Device device) {
  const auto n = static_cast<std::uint64_t>(shape_numel(shape));
  return random_tensor("randn", std::move(shape), gen.seed(), gen.reserve(n), true, dtype, device);
}

}  // namespace streamrt
