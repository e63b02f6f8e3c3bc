// Seed example "threading.Event + add_completion_callback" (tensors have no such method): an
// event's on_complete callback runs once, on a runtime thread, after the work before the record
// has finished; it gets the failure (or null). Here it signals a host-side std::promise.
#include <cstdio>
#include <future>

#include "streamrt/streamrt.hpp"

int main() {
  using namespace streamrt;
  Stream stream;
  Event done;
  Tensor out;
  {
    StreamContext ctx(stream);
    out = sum(matmul(ones({256, 256}), ones({256, 256})));
    done.record();
  }
  std::promise<bool> signalled;
  done.on_complete([&](std::exception_ptr failure) {
    // Runs on a worker: keep it short; the product is complete here.
    signalled.set_value(failure == nullptr);
  });
  auto fut = signalled.get_future();
  if (fut.wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
    std::fprintf(stderr, "completion_callback: the callback never ran\n");
    return 1;
  }
  const bool ok = fut.get();
  const float total = out.item<float>();  // 256*256 entries of 256
  std::printf("callback ran (no failure: %s); sum = %.0f\n", ok ? "true" : "false", total);
  if (!ok || total != 256.0f * 256.0f * 256.0f) {
    std::fprintf(stderr, "completion_callback: wrong result\n");
    return 1;
  }
  return 0;
}
