// Seed example "synchronise several operations" (torch.mps.wait_all, which does not exist): record
// one event per stream and block until all have completed with streamrt::wait_all.
#include <cstdio>
#include <vector>

#include "streamrt/streamrt.hpp"

int main() {
  using namespace streamrt;
  Tensor a = randn({400, 400}, 7), b = randn({400, 400}, 8);
  Tensor c = randn({400, 400}, 9), d = randn({400, 400}, 10);
  Stream s1, s2;
  Event e1, e2;
  Tensor out1, out2;
  {
    StreamContext ctx(s1);
    out1 = matmul(a, b);
    e1.record();
  }
  {
    StreamContext ctx(s2);
    out2 = matmul(c, d);
    e2.record();
  }
  std::vector<Event> events = {e1, e2};
  wait_all(events);  // blocks until both products are done; rethrows a failure if any
  const bool both = e1.completed() && e2.completed() && s1.query() && s2.query();
  // The results equal the same products computed afterwards on the default stream.
  const bool right = equal(out1, matmul(a, b)) && equal(out2, matmul(c, d));
  std::printf("both events complete: %s; results match: %s\n", both ? "true" : "false",
              right ? "true" : "false");
  if (!both || !right) {
    std::fprintf(stderr, "wait_all: wrong result\n");
    return 1;
  }
  return 0;
}
