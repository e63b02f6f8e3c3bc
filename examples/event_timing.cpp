// Seed examples "record an event and time it": the seed calls event.elapsed_time(stream) (a stream
// is not an event) and MPS's event.time_elapsed() (no such method). Timing takes two events created
// with enable_timing, recorded around the work; elapsed_time is in milliseconds, measured when the
// stream reaches each record (not when record() is called).
#include <cmath>
#include <cstdio>

#include "streamrt/streamrt.hpp"

int main() {
  using namespace streamrt;
  Stream stream;
  Event start(EventOptions{.enable_timing = true});
  Event end(EventOptions{.enable_timing = true});
  Tensor a = randn({512, 512}, 3);
  Tensor c;
  {
    StreamContext ctx(stream);
    start.record();
    c = a;
    for (int i = 0; i < 8; ++i) c = relu(matmul(c, a)) * (1.0 / 512);
    end.record();
  }
  end.synchronize();
  const double ms = start.elapsed_time(end);
  std::printf("8 x (512x512 matmul + relu) on one stream: %.3f ms (from events)\n", ms);
  // Misuse is refused with a clear message instead of a silent wrong number.
  bool refused = false;
  try {
    Event no_timing;
    no_timing.record(stream);
    no_timing.synchronize();
    (void)no_timing.elapsed_time(end);
  } catch (const Error& e) {
    refused = true;
    std::printf("elapsed_time without enable_timing: Error: %s\n", e.what());
  }
  if (!(ms > 0) || !refused || !std::isfinite(sum(c).item<float>())) {
    std::fprintf(stderr, "event_timing: wrong result\n");
    return 1;
  }
  return 0;
}
