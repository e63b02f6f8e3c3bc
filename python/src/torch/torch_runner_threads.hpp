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

//! Sets this thread's intra-op thread count to `n` (at least 1) without touching any other thread's
//! (torch's own at::set_num_threads() also changes the count that threads which have not asked for
//! theirs yet start from); returns the count before. Never blocks.
int set_this_threads_intra_op(int n) noexcept;

}  // namespace streamrt::python::torch_runner
