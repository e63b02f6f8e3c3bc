// Seed example 1 ("torch.cpu.StreamContext"): two 1000x1000 matrix products on two streams, then
// compare. The seed passes torch.cuda.Stream objects to a CPU context and relies on every op being
// a no-op on CPU; here both products really run at the same time, and reading C1/C2 needs no manual
// synchronisation (tracking makes allclose wait for exactly the two products).
#include <cmath>
#include <cstdio>

#include "streamrt/streamrt.hpp"

int main() {
  using namespace streamrt;
  Stream stream1, stream2;  // CPU streams (the seed's torch.cuda.Stream() was the wrong device)
  Tensor a = randn({1000, 1000}, /*seed=*/1);
  Tensor b = randn({1000, 1000}, /*seed=*/2);
  Tensor c1, c2;
  {
    StreamContext ctx(stream1);
    c1 = matmul(a, b);  // enqueued on stream1; returns at once
  }
  {
    StreamContext ctx(stream2);
    c2 = matmul(a, b);  // enqueued on stream2; runs alongside stream1
  }
  stream1.synchronize();  // optional with tracking, kept to mirror the seed
  stream2.synchronize();
  const bool same = allclose(c1, c2);
  // Check against a plain float64 product of one element, independent of BLAS.
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  double ref = 0;
  for (int k = 0; k < 1000; ++k) ref += static_cast<double>(pa[17 * 1000 + k]) * pb[k * 1000 + 42];
  const double got = c1.data<float>()[17 * 1000 + 42];
  std::printf("allclose(C1, C2) = %s; C1[17,42] = %.5f (float64 reference %.5f)\n",
              same ? "true" : "false", got, ref);
  if (!same || std::abs(got - ref) > 1e-3 * (1 + std::abs(ref))) {
    std::fprintf(stderr, "two_stream_matmul: wrong result\n");
    return 1;
  }
  return 0;
}
