// Interruptible waits with the GIL released (waits.hpp).
#include "waits.hpp"

#include <algorithm>
#include <optional>

#include "streamrt/event.hpp"
#include "streamrt/stream.hpp"

namespace streamrt::python {
namespace {

// Short enough that Ctrl-C feels immediate, long enough that a long wait costs nothing.
constexpr std::chrono::nanoseconds kWaitSlice = std::chrono::milliseconds(50);

// The thread ident of Python's main thread, the only one that runs signal handlers.
unsigned long g_main_thread = 0;

}  // namespace

void remember_main_thread() {
  g_main_thread =
      py::module_::import("threading").attr("main_thread")().attr("ident").cast<unsigned long>();
}

bool on_main_thread() {
  return PyThread_get_thread_ident() == g_main_thread;
}

bool wait_interruptibly_for(const std::function<bool(std::chrono::nanoseconds)>& try_wait,
                            std::chrono::nanoseconds timeout) {
  if (!on_main_thread()) {
    py::gil_scoped_release release;
    return try_wait(timeout);
  }
  // Each slice that times out changes nothing (the waits promise it), so slices add up to one
  // wait of `timeout` that Ctrl-C can end. Time left is timeout minus time waited: no deadline
  // sum that a huge time-out could overflow.
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  for (;;) {
    const auto waited = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start);
    if (waited >= timeout) return try_wait(std::chrono::nanoseconds::zero());
    bool done = false;
    {
      py::gil_scoped_release release;
      done = try_wait(std::min<std::chrono::nanoseconds>(timeout - waited, kWaitSlice));
    }
    if (done) return true;
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
  }
}

void wait_interruptibly(const std::function<bool(std::chrono::nanoseconds)>& try_wait) {
  if (!on_main_thread()) {
    py::gil_scoped_release release;
    while (!try_wait(std::chrono::hours(1))) {
    }
    return;
  }
  for (;;) {
    bool done = false;
    {
      py::gil_scoped_release release;
      done = try_wait(kWaitSlice);
    }
    if (done) return;
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
  }
}

void wait_record(const Event& record) {
  const bool main = on_main_thread();
  WaitEnd end = WaitEnd::Done;
  {
    py::gil_scoped_release release;
    // Off the main thread no signal handler runs: one slice as long as any wait.
    const auto slice = main ? kWaitSlice : std::chrono::nanoseconds(std::chrono::hours(1));
    end = streamrt::wait_interruptibly(record, std::nullopt, slice, [main] {
      if (!main) return false;
      py::gil_scoped_acquire gil;
      return PyErr_CheckSignals() != 0;  // leaves the exception set on this thread
    });
  }
  if (end == WaitEnd::Interrupted) throw py::error_already_set();
}

void synchronize_event(const Event& e) {
  auto position = e.impl();
  if (!position || !on_main_thread()) {
    py::gil_scoped_release release;
    e.synchronize();  // raises for a never-recorded event
    return;
  }
  const Event record(std::move(position));  // the record current now, whatever e records later
  wait_record(record);
  py::gil_scoped_release release;
  record.synchronize();  // complete: reports its failure
}

void wait_tensor(const Tensor& t, bool writable) {
  if (t.ready() && !writable) return;
  wait_interruptibly([&](std::chrono::nanoseconds slice) { return t.wait_for(slice, writable); });
}

void wait_current_stream() {
  Stream s = current_stream();
  if (s.query()) return;
  const Event end = s.record_event();
  wait_interruptibly([&](std::chrono::nanoseconds slice) { return end.wait_for(slice); });
}

}  // namespace streamrt::python
