// Seed example "reset an event": after reset() the event is back to never-recorded, so
// completed() is false (as MPS). streamrt refuses waits on it with an Error, where CUDA would
// silently treat them as complete.
#include <cstdio>

#include "streamrt/streamrt.hpp"

int main() {
  using namespace streamrt;
  Stream stream;
  Event event;
  Tensor out;
  {
    StreamContext ctx(stream);
    out = matmul(ones({300, 300}), ones({300, 300}));
    event.record();
  }
  event.synchronize();  // the seed's blocking event.wait()
  const bool before = event.completed();
  event.reset();
  const bool after = event.completed();
  std::printf("completed before reset: %s, after reset: %s\n", before ? "true" : "false",
              after ? "true" : "false");
  bool refused = false;
  try {
    event.synchronize();
  } catch (const Error& e) {
    refused = true;
    std::printf("synchronize() on a reset event: Error: %s\n", e.what());
  }
  const bool value_ok = out.data<float>()[0] == 300.0f;
  if (!before || after || !refused || !value_ok) {
    std::fprintf(stderr, "event_reset: wrong result\n");
    return 1;
  }
  return 0;
}
