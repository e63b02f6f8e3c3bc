// A program linked with the static archive of the library (streamrt_static) instead of the shared
// library. The built-in backends register themselves from an object that no other object names,
// which a linker taking objects from an archive drops unless told to keep it: then there is no CPU
// backend and the first stream throws. Exits 0 when the CPU backend is there and runs work.
#include <cstdio>
#include <exception>

#include "streamrt/impl/backend.hpp"
#include "streamrt/streamrt.hpp"

int main() {
  try {
    const int devices = streamrt::impl::backend(streamrt::DeviceType::CPU).device_count();
    streamrt::Stream s;
    int ran = 0;
    s.launch([&] { ran = 1; });
    s.synchronize();
    const streamrt::Tensor sum = streamrt::ones({1}) + streamrt::ones({1});
    const bool ok = devices > 0 && ran == 1 && sum.item<float>() == 2.0F;
    std::printf("static link: %s\n", ok ? "the CPU backend is registered and runs work" : "wrong");
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "static link: %s\n", e.what());
    return 1;
  }
}
