// streamrt::cpu (include/streamrt/cpu.hpp): the CPU backend's settings, on the backend registered
// for DeviceType::CPU.
#include <string>

#include "cpu_backend.hpp"
#include "streamrt/cpu.hpp"
#include "streamrt/error.hpp"
#include "worker_pool.hpp"

namespace streamrt::cpu {

CpuBackend& registered_cpu_backend(const char* what) {
  auto* b = dynamic_cast<CpuBackend*>(&impl::backend(DeviceType::CPU));
  if (b == nullptr) {
    throw Error(std::string(what) +
                " applies to streamrt's CPU backend, but "
                "impl::register_backend() replaced it by another backend for DeviceType::CPU; "
                "configure that backend itself");
  }
  return *b;
}

namespace {

CpuBackend& cpu_backend() {
  return registered_cpu_backend("streamrt::cpu's setting");
}

}  // namespace

void set_num_threads(int n) {
  cpu_backend().set_num_threads(n);
}

int num_threads() {
  return cpu_backend().num_threads();
}

bool on_worker_thread() noexcept {
  return WorkerPool::on_worker_thread();
}

void set_worker_spin(std::chrono::microseconds spin) {
  cpu_backend().set_worker_spin(spin);
}

std::chrono::microseconds worker_spin() {
  return cpu_backend().worker_spin();
}

void set_worker_batch(bool batch) {
  cpu_backend().set_worker_batch(batch);
}

bool worker_batch() {
  return cpu_backend().worker_batch();
}

void set_fork_timeout(std::chrono::nanoseconds timeout) {
  cpu_backend().set_fork_timeout(timeout);
}

std::chrono::nanoseconds fork_timeout() {
  return cpu_backend().fork_timeout();
}

void set_launch_blocking(bool on) {
  cpu_backend().set_launch_blocking(on);
}

bool launch_blocking() {
  return cpu_backend().launch_blocking();
}

std::pair<int, int> priority_range() {
  return cpu_backend().priority_range();
}

}  // namespace streamrt::cpu
