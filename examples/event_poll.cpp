// Seed example "check for completion" (`while not event.poll(): pass`): MPS has no poll(); the
// query is Event::query() (alias completed()). Poll while doing useful host work, then read the
// result. The seed's event.record(output) records on a stream, not on a tensor.
#include <cmath>
#include <cstdio>

#include "streamrt/streamrt.hpp"

int main() {
  using namespace streamrt;
  Stream stream;
  Event done;
  Tensor out;
  {
    StreamContext ctx(stream);
    Tensor a = randn({800, 800}, 5);
    out = matmul(a, a);
    done.record();  // marks the end of the work queued so far on `stream`
  }
  long host_steps = 0;
  double host_acc = 0;
  while (!done.query()) {                                 // never blocks
    host_acc += 1.0 / static_cast<double>(++host_steps);  // "other work" on the host meanwhile
  }
  std::printf("host did %ld steps of its own work while the product ran (acc %.3f)\n", host_steps,
              host_acc);
  // After the event completed, the product is ready: data() does not wait any more.
  const bool ready = out.ready();
  const float v = out.data<float>()[0];
  if (!ready || !std::isfinite(v)) {
    std::fprintf(stderr, "event_poll: wrong result\n");
    return 1;
  }
  return 0;
}
