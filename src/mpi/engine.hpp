#pragma once
// The progress engine of streamrt::mpi: operations in flight in MPI and the thread that tests
// them. See docs/distributed.md ("Progress model").
#include <mpi.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "streamrt/tensor.hpp"
#include "streamrt/user_event.hpp"

namespace streamrt::mpi::detail {

// One operation from enqueue to completion.
struct Op {
  const char* name = "";      // "all_reduce", ...
  std::string describe;       // "1024 x float32, sum": for error messages
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0, size = 0;     // of the communicator, for messages
  std::function<int(MPI_Request*)> start;  // the nonblocking MPI call
  int recv_bytes = -1;        // recv: the exact message size expected
  int peer = -1;              // recv: source, for messages
  std::vector<Tensor> keep;   // tensors whose memory the transfer uses
  UserEvent done;             // completed when MPI says the transfer is done
  MPI_Request request = MPI_REQUEST_NULL;
};

// Error text of an MPI error code: "MPI_ERR_TRUNCATE: message truncated".
std::string mpi_error_string(int code);
// "streamrt::mpi all_reduce (1024 x float32, sum) on rank 0 of 2: " + what.
std::string op_message(const Op& op, const std::string& what);
// Completes op.done with an Error for MPI error `code`.
void fail(Op& op, int code) noexcept;
// Completes op.done with an Error saying MPI is finalised (or finalize() was called).
void fail_finalized(Op& op) noexcept;
// Completes op.done, checking a finished request's status (recv sizes). noexcept: reports
// failures through the event.
void finish(Op& op, const MPI_Status& status, int code) noexcept;

// The progress thread: tests the requests handed to it and completes their events. It sleeps on
// a condition variable while nothing is in flight (idle costs nothing); while something is, it
// polls MPI_Testsome, yielding the core between polls once polls stop making progress.
class Engine {
 public:
  static Engine& get();
  // Hands over a started operation (its request is owned by the engine from now on).
  void add(std::shared_ptr<Op> op);
  // Stops the thread; operations still in flight fail with an Error naming the reason.
  void stop() noexcept;
  std::size_t in_flight() const noexcept { return count_.load(std::memory_order_relaxed); }

 private:
  void loop();
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<std::shared_ptr<Op>> incoming_;  // guarded by mutex_
  bool stopping_ = false;                      // guarded by mutex_
  bool sleeping_ = false;                      // guarded by mutex_
  std::thread thread_;                         // started on first add, guarded by mutex_
  // Relaxed: a hint read by the polling loop and in_flight(); incoming_ itself is read under
  // mutex_.
  std::atomic<std::size_t> pending_incoming_{0};
  std::atomic<std::size_t> count_{0};
  // Relaxed: tells a polling loop to look at stopping_ (under mutex_); no data is published by it.
  std::atomic<bool> stop_hint_{false};
};

}  // namespace streamrt::mpi::detail
