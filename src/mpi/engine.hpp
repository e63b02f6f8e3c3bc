#pragma once
// The progress engine of streamrt::mpi: operations in flight in MPI and the thread that tests
// them. See docs/distributed.md ("Progress model").
#include <mpi.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "streamrt/error.hpp"
#include "streamrt/tensor.hpp"
#include "streamrt/user_event.hpp"

namespace streamrt::mpi::detail {

// What an operation moves, for its error messages ("1024 x float32, sum"): kept as fields and
// formatted only when a message is made (formatting it at every enqueue cost a tenth of the
// enqueue).
struct Describe {
  std::size_t count = 0;
  DType dtype = DType::Float32;
  const char* how = "";     // follows "count x dtype": " per rank", " to rank ", ", root ", ...
  int rank = -1;            // follows `how` when >= 0
  std::optional<int> tag;   // ", tag N"
  std::string_view reduce;  // ", sum"
  bool no_data = false;     // "no data" (barrier)

  static Describe of(std::size_t count, DType dtype, const char* how = "", int rank = -1,
                     std::optional<int> tag = std::nullopt, std::string_view reduce = {}) {
    Describe d;
    d.count = count;
    d.dtype = dtype;
    d.how = how;
    d.rank = rank;
    d.tag = tag;
    d.reduce = reduce;
    return d;
  }
  // A reduction: "count x dtype<how>, <op>".
  static Describe reduction(std::size_t count, DType dtype, const char* how, std::string_view op) {
    return of(count, dtype, how, -1, std::nullopt, op);
  }
  static Describe none() {
    Describe d;
    d.no_data = true;
    return d;
  }
  std::string str() const;
};

// One operation from enqueue to completion.
struct Op {
  const char* name = "";  // "all_reduce", ...
  Describe describe;      // for error messages
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0, size = 0;                  // of the communicator, for messages
  std::function<int(MPI_Request*)> start;  // the nonblocking MPI call
  // Collectives: the blocking MPI call doing the same, run by the communicator's Runner for large
  // buffers (see Runner); empty for point-to-point and barrier.
  std::function<int()> run;
  std::size_t bytes = 0;     // this rank's buffer size, which picks start or run
  int recv_bytes = -1;       // recv: the exact message size expected
  int peer = -1;             // recv: source, for messages
  std::vector<Tensor> keep;  // tensors whose memory the transfer uses
  UserEvent done;            // completed when MPI says the transfer is done
  MPI_Request request = MPI_REQUEST_NULL;
};

// Error text of an MPI error code: "MPI_ERR_TRUNCATE: message truncated".
std::string mpi_error_string(int code);
// "streamrt::mpi all_reduce (1024 x float32, sum) on rank 0 of 2: " + what.
ErrorText op_message(const Op& op, const ErrorText& what);
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

// A communicator's thread for large collectives, run as blocking MPI calls one after the other in
// the order they were handed over. Open MPI's nonblocking collectives (libnbc) use other
// algorithms than its blocking ones and progress only when tested; for large buffers they reach
// well under half the blocking call's bandwidth (docs/distributed.md, "Progress model"). The
// stream stays parked on the operation's UserEvent meanwhile, as with the progress thread: this
// thread is not a worker. Idle, it sleeps on a condition variable.
//
// Whether a collective is blocking must not depend on timing: MPI never matches a blocking
// collective with a nonblocking one, so every rank must choose the same form for the same call.
// The form follows the buffer size alone; a small collective that comes while this thread still
// has earlier ones to issue is handed over too, and issued here with its nonblocking call (then
// tested by the progress thread), so that MPI sees this rank's collectives in ticket order.
class Runner {
 public:
  Runner() = default;
  Runner(const Runner&) = delete;
  Runner& operator=(const Runner&) = delete;
  // Runs what was handed over, then ends the thread (join()).
  ~Runner() { join(); }
  // Runs what was handed over, then ends the thread; idempotent. The communicator calls it before
  // MPI_Comm_free.
  void join() noexcept;
  // Queues a collective: run as a blocking call (op.run) when `blocking`, else started with
  // op.start and handed to the Engine. The thread starts on first use. Callers hand operations
  // over in the communicator's ticket order, under its mutex.
  void add(std::shared_ptr<Op> op, bool blocking);
  // Operations handed over and not finished. Read under the communicator's mutex: while it is
  // non-zero, a later collective must go through this thread too, or it could be issued to MPI
  // before an earlier one (collectives must be issued in the same order on every rank).
  std::size_t outstanding() const noexcept {
    // Acquire: pairs with the release decrement after a blocking call returned, so a caller that
    // sees 0 issues its own call after that one (program order on this rank).
    return outstanding_.load(std::memory_order_acquire);
  }

 private:
  void loop();
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::pair<std::shared_ptr<Op>, bool>> queue_;  // guarded by mutex_; bool: blocking
  bool stopping_ = false;                                   // guarded by mutex_
  std::thread thread_;                                      // guarded by mutex_
  std::atomic<std::size_t> outstanding_{0};
};

}  // namespace streamrt::mpi::detail
