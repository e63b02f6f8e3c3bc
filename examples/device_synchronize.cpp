// Seed examples "torch.cuda.synchronize()" and "x + x on a device, then synchronize(device)": on
// CPU the device-wide call is streamrt::synchronize(Device), which waits for every stream of the
// device (torch.cpu.synchronize does nothing).
#include <cstdio>
#include <vector>

#include "streamrt/streamrt.hpp"

int main() {
  using namespace streamrt;
  const Device device = Device::parse("cpu");
  std::vector<Stream> streams(4, Stream(device));
  for (auto& s : streams) s = Stream(device);  // four distinct streams
  std::vector<Tensor> ys;
  for (std::size_t i = 0; i < streams.size(); ++i) {
    StreamContext ctx(streams[i]);
    Tensor x = full({1000, 1000}, static_cast<double>(i), DType::Float32, device);
    ys.push_back(x + x);
  }
  synchronize(device);  // every stream of the device is idle after this
  bool idle = true;
  for (auto& s : streams) idle = idle && s.query();
  bool right = true;
  for (std::size_t i = 0; i < ys.size(); ++i) {
    right = right && ys[i].ready() && ys[i].data<float>()[999'999] == 2.0f * static_cast<float>(i);
  }
  std::printf("all %zu streams idle after synchronize(cpu): %s; results right: %s\n",
              streams.size(), idle ? "true" : "false", right ? "true" : "false");
  if (!idle || !right) {
    std::fprintf(stderr, "device_synchronize: wrong result\n");
    return 1;
  }
  return 0;
}
