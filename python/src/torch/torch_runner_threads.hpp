#pragma once
// The intra-op thread count of a torch op run as stream work: one, on the thread that runs it.

namespace streamrt::python::torch_runner {

//! One intra-op thread for the torch kernels run while it lives, on this thread only: the streams
//! are the parallelism, one core each. A pool worker keeps one from then on; a host thread that
//! runs queued items as it waits gets its own count back at the end, for its own ops. Never
//! blocks; thread-safe (per thread).
class OneIntraOpThread {
 public:
  OneIntraOpThread() noexcept;
  ~OneIntraOpThread();
  OneIntraOpThread(const OneIntraOpThread&) = delete;
  OneIntraOpThread& operator=(const OneIntraOpThread&) = delete;

 private:
  int before_;
};

}  // namespace streamrt::python::torch_runner
