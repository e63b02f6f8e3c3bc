// Uses the installed streamrt: two streams, a cross-stream wait on an event, a timed pair of
// events. Prints "consumer: ok" only when everything checked out.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <streamrt/streamrt.hpp>
#include <thread>

int main() {
  try {
    streamrt::Stream producer;
    streamrt::Stream consumer;
    std::atomic<int> value{0};
    int seen = -1;
    streamrt::Event start(streamrt::EventOptions{.enable_timing = true});
    streamrt::Event end(streamrt::EventOptions{.enable_timing = true});
    start.record(producer);
    producer.launch([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      value = 42;
    });
    consumer.wait_event(producer.record_event());
    consumer.launch([&] { seen = value.load(); });
    end.record(consumer);
    end.synchronize();
    const double ms = start.elapsed_time(end);
    std::printf("streams %llu and %llu, consumer saw %d, elapsed %.3f ms\n",
                static_cast<unsigned long long>(producer.id()),
                static_cast<unsigned long long>(consumer.id()), seen, ms);
    if (seen != 42 || ms < 4.9) {
      std::puts("consumer: FAILED");
      return 1;
    }
    std::puts("consumer: ok");
    return 0;
  } catch (const std::exception& e) {
    std::printf("consumer: FAILED with %s\n", e.what());
    return 1;
  }
}
