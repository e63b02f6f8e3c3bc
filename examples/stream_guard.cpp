// Seed example "explicit stream management" (with torch.cuda.stream(stream): ...): StreamContext
// makes a stream current for the scope and restores the previous one on exit, also by exception.
// Ops inside go to that stream; a stream handed work from another thread keeps its own order.
#include <cstdio>
#include <stdexcept>

#include "streamrt/streamrt.hpp"

int main() {
  using namespace streamrt;
  Stream stream;
  const Stream before = current_stream();
  Tensor y;
  bool inside_ok = false;
  {
    StreamContext guard(stream);
    inside_ok = current_stream() == stream;
    Tensor x = arange(10, DType::Float64);
    y = x * x;  // on `stream`
  }
  const bool restored = current_stream() == before;
  bool restored_after_throw = false;
  try {
    StreamContext guard(stream);
    throw std::runtime_error("leaving the scope by exception");
  } catch (const std::runtime_error&) {
    restored_after_throw = current_stream() == before;
  }
  stream.synchronize();
  const double* p = y.data<double>();
  const bool right = p[9] == 81.0 && p[3] == 9.0;
  std::printf("inside the guard: %s; restored: %s; restored after exception: %s; y[9] = %.0f\n",
              inside_ok ? "stream" : "wrong", restored ? "yes" : "no",
              restored_after_throw ? "yes" : "no", p[9]);
  if (!inside_ok || !restored || !restored_after_throw || !right) {
    std::fprintf(stderr, "stream_guard: wrong result\n");
    return 1;
  }
  return 0;
}
