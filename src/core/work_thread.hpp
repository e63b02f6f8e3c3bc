#pragma once
// Which threads run stream work: the backend that owns the workers answers (a probe it registers),
// for layers that must tell a worker's access to memory from a host thread's (the read checker,
// ops/read_check.hpp) without knowing the backend.
namespace streamrt::core {

// True when the calling thread is running stream work now (a worker, or a host thread helping a
// wait by running queued items). Must be safe to call from a signal handler on any thread.
using WorkThreadProbe = bool (*)() noexcept;

// Sets the probe (once, by the backend that owns the workers, when it is made). Never blocks.
void set_work_thread_probe(WorkThreadProbe probe) noexcept;

// The probe's answer; false when no backend registered one. Never blocks; safe in a signal
// handler when the probe is.
bool on_work_thread() noexcept;

}  // namespace streamrt::core
