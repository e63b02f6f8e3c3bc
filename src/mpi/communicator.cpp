// Communicator: operations enqueued on streams. Each one is three stream entries: a start item
// (takes its turn in the communicator's order, calls the nonblocking MPI function), a wait on a
// UserEvent that the progress engine completes, and for Avg a scaling item. See
// docs/distributed.md.
#include <sched.h>

#include <chrono>
#include <climits>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "engine.hpp"
#include "shared_cores.hpp"
#include "streamrt/error.hpp"
#include "streamrt/mpi.hpp"
#include "streamrt/ops.hpp"

namespace streamrt::mpi {

using detail::Op;

// What the copies of a Communicator share.
struct detail::CommState {
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0;
  int size = 1;
  std::mutex mutex;
  std::uint64_t next_ticket = 0;  // guarded by mutex: host enqueue order
  std::uint64_t next_start = 0;   // guarded by mutex: the next ticket allowed to start
  // Operations whose stream reached them, waiting for earlier tickets (null: skipped).
  std::map<std::uint64_t, std::shared_ptr<Op>> arrived;  // guarded by mutex
  detail::Runner runner;                                 // large collectives, as blocking calls

  ~CommState() {
    runner.join();  // what it still has to run uses comm
    if (comm != MPI_COMM_NULL && initialized()) MPI_Comm_free(&comm);
  }
};

namespace {

using detail::CommState;

// How long the worker that starts an operation polls it before handing it to the progress
// thread: a small message often completes within a few microseconds, and a hand-off costs a
// thread wake-up (docs/performance.md, "Figures behind constants"). Bounded like the host waits'
// spin (docs/design.md).
constexpr auto kInlinePoll = std::chrono::microseconds(20);

// From this buffer size on, a collective runs as a blocking MPI call on the communicator's Runner
// instead of a nonblocking one tested by the progress thread: past it the blocking algorithms'
// bandwidth outweighs the Runner's wake-up (docs/distributed.md, "Progress model").
constexpr std::size_t kBlockingBytes = 64 * 1024;

MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::Float32:
      return MPI_FLOAT;
    case DType::Float64:
      return MPI_DOUBLE;
    case DType::Int32:
      return MPI_INT32_T;
    case DType::Int64:
      return MPI_INT64_T;
    case DType::Bool:
      return MPI_C_BOOL;  // one byte, as C++'s bool here; reductions on it are MPI's errors
  }
  return MPI_DATATYPE_NULL;
}

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg:
      return MPI_SUM;
    case ReduceOp::Prod:
      return MPI_PROD;
    case ReduceOp::Min:
      return MPI_MIN;
    case ReduceOp::Max:
      return MPI_MAX;
  }
  return MPI_OP_NULL;
}

int checked_count(std::size_t count, const char* what) {
  if (count > static_cast<std::size_t>(INT_MAX)) {
    throw Error(api::function("mpi") + " " + what + ": " + std::to_string(count) +
                " elements is more than MPI's int count allows (" + std::to_string(INT_MAX) +
                "); split the buffer");
  }
  return static_cast<int>(count);
}

// What one arrive() call has to do once the communicator mutex is released.
struct Arrivals {
  struct Failure {
    std::shared_ptr<Op> op;
    int code;  // an MPI error code, or kFinalized
  };
  static constexpr int kFinalized = -1;  // MPI was finalized before the operation could start
  std::vector<std::shared_ptr<Op>> started, skipped;
  std::vector<Failure> failed;
};

// Starts `next`, whose turn has come (communicator mutex held), or files it as failed; `mine`
// (the operation arrive() would poll) is cleared when it goes to the Runner instead.
void start_in_turn(CommState& cs, std::shared_ptr<Op> next, Op*& mine, Arrivals& out) {
  if (!initialized()) {
    out.failed.push_back({std::move(next), Arrivals::kFinalized});
    return;
  }
  // Large collectives go to the Runner (blocking); a small one follows them there while the
  // Runner has some left to issue, so MPI sees this rank's collectives in ticket order.
  const bool blocking = next->run && next->bytes >= kBlockingBytes;
  if (blocking || (next->run && cs.runner.outstanding() > 0)) {
    if (next.get() == mine) mine = nullptr;  // not polled here: the Runner takes it
    try {
      cs.runner.add(next, blocking);
    } catch (...) {
      // No thread or no memory: fail it, never park for ever.
      out.failed.push_back({std::move(next), MPI_ERR_OTHER});
    }
    return;
  }
  const int rc = next->start(&next->request);
  if (rc != MPI_SUCCESS) {
    out.failed.push_back({std::move(next), rc});
  } else {
    out.started.push_back(std::move(next));
  }
}

// Files `op` under `ticket` (communicator mutex held), then starts every operation whose turn has
// come, in ticket order.
void take_turns(CommState& cs, std::uint64_t ticket, std::shared_ptr<Op>& op, bool skipped,
                Op*& mine, Arrivals& out) {
  // An operation whose turn has come (the usual case: one stream, or streams in step) is not
  // filed: it goes first, then whatever had arrived for the tickets after it.
  const bool its_turn = ticket == cs.next_start;
  std::shared_ptr<Op> first;
  if (skipped) {
    if (!its_turn) cs.arrived.emplace(ticket, nullptr);
    out.skipped.push_back(std::move(op));
  } else if (its_turn) {
    first = op;  // copies: `op` keeps *mine alive for arrive()'s out-of-memory path
  } else {
    cs.arrived.emplace(ticket, op);
  }
  for (bool take_first = its_turn;; take_first = false) {
    std::shared_ptr<Op> next;
    if (take_first) {
      next = std::move(first);  // null when skipped: it only takes its turn
    } else if (!cs.arrived.empty() && cs.arrived.begin()->first == cs.next_start) {
      next = std::move(cs.arrived.begin()->second);
      cs.arrived.erase(cs.arrived.begin());
    } else {
      break;
    }
    ++cs.next_start;
    if (next) start_in_turn(cs, std::move(next), mine, out);
  }
}

// Polls `op` briefly when it is the caller's own (a small operation often completes at once),
// else, or when it has not completed, hands it to the progress engine.
void poll_or_hand_over(std::shared_ptr<Op> op, bool poll) {
  if (poll) {
    const auto until = std::chrono::steady_clock::now() + kInlinePoll;
    int flag = 0;
    MPI_Status st;
    int rc = MPI_SUCCESS;
    for (unsigned i = 0;; ++i) {
      rc = MPI_Test(&op->request, &flag, &st);
      if (rc != MPI_SUCCESS || flag != 0) break;
      if (i % 16 == 15 && std::chrono::steady_clock::now() >= until) break;
    }
    if (rc != MPI_SUCCESS || flag != 0) {
      detail::finish(*op, st, rc);
      return;
    }
  }
  detail::Engine::get().add(std::move(op));
}

// Starts the operations whose turn has come, in ticket order (under the communicator mutex, so no
// later ticket can start in between), and returns them; `mine` is polled briefly here.
void arrive(const std::shared_ptr<CommState>& cs, std::uint64_t ticket, std::shared_ptr<Op> op,
            bool skipped) noexcept {
  Arrivals out;
  Op* mine = skipped ? nullptr : op.get();
  try {
    std::lock_guard lock(cs->mutex);
    take_turns(*cs, ticket, op, skipped, mine, out);
  } catch (...) {
    // Out of memory in the bookkeeping: fail this operation instead of parking its stream.
    if (mine != nullptr) {
      try {
        mine->done.complete(std::make_exception_ptr(
            Error(detail::op_message(*mine, "could not be started (out of memory)"))));
      } catch (...) {
      }
    }
    return;
  }
  for (auto& s : out.skipped) {
    // Skipped (the stream failed or was cancelled before it got here): the stream's own failure
    // or cancellation covers what follows; the wait entry just must not park for ever.
    try {
      s->done.complete();
    } catch (...) {
    }
  }
  for (auto& f : out.failed) {
    if (f.code == Arrivals::kFinalized) {
      detail::fail_finalized(*f.op);
    } else {
      detail::fail(*f.op, f.code);
    }
  }
  for (auto& s : out.started) {
    const bool poll = s.get() == mine;
    poll_or_hand_over(std::move(s), poll);
  }
}

// The start item: runs when the stream gets there; if it is dropped unrun (skipped after a
// failure, or cancelled), it still takes its turn so that later operations are not held up.
struct StartItem {
  std::shared_ptr<CommState> cs;
  std::shared_ptr<Op> op;
  std::uint64_t ticket = 0;
  StartItem(std::shared_ptr<CommState> c, std::shared_ptr<Op> o, std::uint64_t t)
      : cs(std::move(c)), op(std::move(o)), ticket(t) {}
  StartItem(StartItem&& o) noexcept = default;
  StartItem(const StartItem&) = delete;
  StartItem& operator=(const StartItem&) = delete;
  StartItem& operator=(StartItem&&) = delete;
  ~StartItem() {
    if (op) arrive(cs, ticket, std::move(op), /*skipped=*/true);
  }
  void operator()() { arrive(cs, ticket, std::move(op), /*skipped=*/false); }
};

template <class T>
void scale(void* buf, std::size_t n, double by) {
  auto* p = static_cast<T*>(buf);
  for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<T>(p[i] * by);
}

// Enqueues `op` on `s`: start item, wait on its completion, and the Avg scaling if any. Returns
// the event recorded after them.
Event enqueue(const std::shared_ptr<CommState>& cs, Stream s, std::shared_ptr<Op> op,
              std::span<const Tensor* const> reads, std::span<const Tensor* const> writes,
              void* avg_buf = nullptr, std::size_t avg_count = 0,
              DType avg_dtype = DType::Float32) {
  if (s.device().type != DeviceType::CPU) {
    throw Error(api::function("mpi") + " " + op->name + ": stream " + s.str() +
                " is not a CPU stream; MPI operations run on CPU streams");
  }
  op->comm = cs->comm;
  op->rank = cs->rank;
  op->size = cs->size;
  Event done = op->done.event();
  const char* label = op->name;
  auto body = [&](Stream& st) {
    std::uint64_t ticket;
    {
      std::lock_guard lock(cs->mutex);
      ticket = cs->next_ticket++;
    }
    StartItem item(cs, op, ticket);  // if the launch throws, its destructor takes the turn
    st.launch(label, std::move(item));
    st.wait_event(done);
    if (avg_buf != nullptr) {
      const double by = 1.0 / cs->size;
      st.launch("mpi.avg", [avg_buf, avg_count, avg_dtype, by] {
        if (avg_dtype == DType::Float32) {
          scale<float>(avg_buf, avg_count, by);
        } else {
          scale<double>(avg_buf, avg_count, by);
        }
      });
    }
  };
  enqueue_tracked(s, label, reads, writes, body);
  return s.record_event();
}

// Gives a collective both forms from one call: `call(r)` makes the nonblocking MPI call with
// request r, `call(nullptr)` the blocking one (see kBlockingBytes).
template <class Call>
void set_collective(Op& op, std::size_t bytes, Call call) {
  op.bytes = bytes;
  op.run = [call] { return call(nullptr); };
  op.start = std::move(call);
}

Stream pick(const std::optional<Stream>& s, Device d = {}) {
  return s ? *s : current_stream(d);
}

std::shared_ptr<Op> new_op(const char* name, detail::Describe describe) {
  auto op = std::make_shared<Op>();
  op->name = name;
  op->describe = describe;
  return op;
}

void check_avg(ReduceOp op, DType dtype, const char* what) {
  if (op == ReduceOp::Avg && !is_floating(dtype)) {
    throw Error(api::function("mpi") + " " + what + ": " + api::enumerator("ReduceOp", "Avg") +
                " needs a floating dtype, not " + std::string(to_string(dtype)) +
                "; use Sum and divide, or convert with to()");
  }
}

void check_rank(int r, int size, const char* what, const char* role) {
  if (r < 0 || r >= size) {
    throw Error(api::function("mpi") + " " + what + ": " + role + " rank " + std::to_string(r) +
                " is out of range for a communicator of " + std::to_string(size) + " ranks (0.." +
                std::to_string(size - 1) + ")");
  }
}

// MPI's tags run from 0 to the MPI_TAG_UB attribute (at least 32767); MPI_ANY_TAG is for
// receives in MPI, but streamrt matches messages in order and takes none.
void check_tag(int tag, MPI_Comm comm, const char* what) {
  int* ub = nullptr;
  int found = 0;
  MPI_Comm_get_attr(comm, MPI_TAG_UB, &ub, &found);
  const int limit = found != 0 && ub != nullptr ? *ub : 32767;
  if (tag < 0 || tag > limit) {
    throw Error(api::function("mpi") + " " + what + ": tag " + std::to_string(tag) +
                " is out of range; MPI tags run from 0 to " + std::to_string(limit) +
                " (MPI_TAG_UB)");
  }
}

void check_tensor(const Tensor& t, const char* what) {
  if (!t.defined()) throw Error(api::function("mpi") + " " + what + ": the tensor is undefined");
  if (t.device().type != DeviceType::CPU) {
    throw Error(api::function("mpi") + " " + what + ": tensor on " + t.device().str() +
                "; MPI operations take CPU tensors");
  }
}

}  // namespace

Communicator::Communicator() : Communicator(MPI_COMM_WORLD) {}

Communicator::Communicator(MPI_Comm comm) : state_(std::make_shared<CommState>()) {
  init();
  if (comm == MPI_COMM_NULL) {
    throw Error(api::function("mpi::Communicator") + ": the communicator is MPI_COMM_NULL");
  }
  int rc = MPI_Comm_dup(comm, &state_->comm);
  if (rc != MPI_SUCCESS) {
    throw Error(api::function("mpi::Communicator") +
                ": MPI_Comm_dup failed: " + detail::mpi_error_string(rc));
  }
  MPI_Comm_set_errhandler(state_->comm, MPI_ERRORS_RETURN);
  MPI_Comm_rank(state_->comm, &state_->rank);
  MPI_Comm_size(state_->comm, &state_->size);
  detail::fit_workers_to_shared_cores(state_->comm);
}

int Communicator::rank() const noexcept {
  return state_->rank;
}
int Communicator::size() const noexcept {
  return state_->size;
}
MPI_Comm Communicator::native() const noexcept {
  return state_->comm;
}

// ---- raw buffers ----

Event Communicator::all_reduce(const void* send, void* recv, std::size_t count, DType dtype,
                               ReduceOp op, std::optional<Stream> stream) {
  check_avg(op, dtype, "all_reduce");
  const int n = checked_count(count, "all_reduce");
  auto o = new_op("all_reduce", detail::Describe::reduction(count, dtype, "", to_string(op)));
  const MPI_Comm c = state_->comm;
  const void* sb = send == recv ? MPI_IN_PLACE : send;
  set_collective(*o, count * element_size(dtype), [=](MPI_Request* r) {
    return r ? MPI_Iallreduce(sb, recv, n, mpi_type(dtype), mpi_op(op), c, r)
             : MPI_Allreduce(sb, recv, n, mpi_type(dtype), mpi_op(op), c);
  });
  return enqueue(state_, pick(stream), std::move(o), {}, {}, op == ReduceOp::Avg ? recv : nullptr,
                 count, dtype);
}

Event Communicator::broadcast(void* buf, std::size_t count, DType dtype, int root,
                              std::optional<Stream> stream) {
  check_rank(root, size(), "broadcast", "root");
  const int n = checked_count(count, "broadcast");
  auto o = new_op("broadcast", detail::Describe::of(count, dtype, ", root ", root));
  const MPI_Comm c = state_->comm;
  set_collective(*o, count * element_size(dtype), [=](MPI_Request* r) {
    return r ? MPI_Ibcast(buf, n, mpi_type(dtype), root, c, r)
             : MPI_Bcast(buf, n, mpi_type(dtype), root, c);
  });
  return enqueue(state_, pick(stream), std::move(o), {}, {});
}

Event Communicator::all_gather(const void* send, void* recv, std::size_t count, DType dtype,
                               std::optional<Stream> stream) {
  const int n = checked_count(count, "all_gather");
  checked_count(count * static_cast<std::size_t>(size()), "all_gather");
  auto o = new_op("all_gather", detail::Describe::of(count, dtype, " per rank"));
  const MPI_Comm c = state_->comm;
  set_collective(
      *o, count * element_size(dtype) * static_cast<std::size_t>(size()), [=](MPI_Request* r) {
        return r ? MPI_Iallgather(send, n, mpi_type(dtype), recv, n, mpi_type(dtype), c, r)
                 : MPI_Allgather(send, n, mpi_type(dtype), recv, n, mpi_type(dtype), c);
      });
  return enqueue(state_, pick(stream), std::move(o), {}, {});
}

Event Communicator::reduce_scatter(const void* send, void* recv, std::size_t count, DType dtype,
                                   ReduceOp op, std::optional<Stream> stream) {
  check_avg(op, dtype, "reduce_scatter");
  const int n = checked_count(count, "reduce_scatter");
  checked_count(count * static_cast<std::size_t>(size()), "reduce_scatter");
  auto o = new_op("reduce_scatter",
                  detail::Describe::reduction(count, dtype, " per rank", to_string(op)));
  const MPI_Comm c = state_->comm;
  set_collective(
      *o, count * element_size(dtype) * static_cast<std::size_t>(size()), [=](MPI_Request* r) {
        return r ? MPI_Ireduce_scatter_block(send, recv, n, mpi_type(dtype), mpi_op(op), c, r)
                 : MPI_Reduce_scatter_block(send, recv, n, mpi_type(dtype), mpi_op(op), c);
      });
  return enqueue(state_, pick(stream), std::move(o), {}, {}, op == ReduceOp::Avg ? recv : nullptr,
                 count, dtype);
}

Event Communicator::all_to_all(const void* send, void* recv, std::size_t count, DType dtype,
                               std::optional<Stream> stream) {
  const int n = checked_count(count, "all_to_all");
  checked_count(count * static_cast<std::size_t>(size()), "all_to_all");
  auto o = new_op("all_to_all", detail::Describe::of(count, dtype, " per rank pair"));
  const MPI_Comm c = state_->comm;
  set_collective(
      *o, count * element_size(dtype) * static_cast<std::size_t>(size()), [=](MPI_Request* r) {
        return r ? MPI_Ialltoall(send, n, mpi_type(dtype), recv, n, mpi_type(dtype), c, r)
                 : MPI_Alltoall(send, n, mpi_type(dtype), recv, n, mpi_type(dtype), c);
      });
  return enqueue(state_, pick(stream), std::move(o), {}, {});
}

Event Communicator::send(const void* buf, std::size_t count, DType dtype, int dst, int tag,
                         std::optional<Stream> stream) {
  check_rank(dst, size(), "send", "destination");
  check_tag(tag, state_->comm, "send");
  const int n = checked_count(count, "send");
  auto o = new_op("send", detail::Describe::of(count, dtype, " to rank ", dst, tag));
  const MPI_Comm c = state_->comm;
  o->start = [=](MPI_Request* r) { return MPI_Isend(buf, n, mpi_type(dtype), dst, tag, c, r); };
  return enqueue(state_, pick(stream), std::move(o), {}, {});
}

Event Communicator::recv(void* buf, std::size_t count, DType dtype, int src, int tag,
                         std::optional<Stream> stream) {
  check_rank(src, size(), "recv", "source");
  check_tag(tag, state_->comm, "recv");
  const int n = checked_count(count, "recv");
  checked_count(count * element_size(dtype), "recv");
  auto o = new_op("recv", detail::Describe::of(count, dtype, " from rank ", src, tag));
  o->recv_bytes = static_cast<int>(count * element_size(dtype));
  o->peer = src;
  const MPI_Comm c = state_->comm;
  o->start = [=](MPI_Request* r) { return MPI_Irecv(buf, n, mpi_type(dtype), src, tag, c, r); };
  return enqueue(state_, pick(stream), std::move(o), {}, {});
}

Event Communicator::barrier(std::optional<Stream> stream) {
  auto o = new_op("barrier", detail::Describe::none());
  const MPI_Comm c = state_->comm;
  o->start = [=](MPI_Request* r) { return MPI_Ibarrier(c, r); };
  return enqueue(state_, pick(stream), std::move(o), {}, {});
}

// ---- tensors: the same operations, with dependency tracking and the tensors kept alive ----

namespace {

std::size_t numel_of(const Tensor& t) {
  return static_cast<std::size_t>(t.numel());
}

}  // namespace

Event Communicator::all_reduce(Tensor& t, ReduceOp op, std::optional<Stream> stream) {
  check_tensor(t, "all_reduce");
  check_avg(op, t.dtype(), "all_reduce");
  const int n = checked_count(numel_of(t), "all_reduce");
  auto o =
      new_op("all_reduce", detail::Describe::reduction(numel_of(t), t.dtype(), "", to_string(op)));
  void* p = t.data_ptr_unsafe();
  const MPI_Comm c = state_->comm;
  const DType dt = t.dtype();
  set_collective(*o, t.nbytes(), [=](MPI_Request* r) {
    return r ? MPI_Iallreduce(MPI_IN_PLACE, p, n, mpi_type(dt), mpi_op(op), c, r)
             : MPI_Allreduce(MPI_IN_PLACE, p, n, mpi_type(dt), mpi_op(op), c);
  });
  o->keep = {t};
  const Tensor* w[] = {&t};
  return enqueue(state_, pick(stream, t.device()), std::move(o), {}, w,
                 op == ReduceOp::Avg ? p : nullptr, numel_of(t), dt);
}

Event Communicator::broadcast(Tensor& t, int root, std::optional<Stream> stream) {
  check_tensor(t, "broadcast");
  check_rank(root, size(), "broadcast", "root");
  const int n = checked_count(numel_of(t), "broadcast");
  auto o = new_op("broadcast", detail::Describe::of(numel_of(t), t.dtype(), ", root ", root));
  void* p = t.data_ptr_unsafe();
  const MPI_Comm c = state_->comm;
  const DType dt = t.dtype();
  set_collective(*o, t.nbytes(), [=](MPI_Request* r) {
    return r ? MPI_Ibcast(p, n, mpi_type(dt), root, c, r) : MPI_Bcast(p, n, mpi_type(dt), root, c);
  });
  o->keep = {t};
  const Tensor* w[] = {&t};
  return enqueue(state_, pick(stream, t.device()), std::move(o), {}, w);
}

Event Communicator::all_gather(const Tensor& input, Tensor& output, std::optional<Stream> stream) {
  check_tensor(input, "all_gather");
  check_tensor(output, "all_gather");
  if (input.dtype() != output.dtype() || output.numel() != input.numel() * size()) {
    throw Error(api::function("mpi") + " all_gather: output " + output.str() +
                " must have size() (" + std::to_string(size()) + ") times the elements of input " +
                input.str() + " and the same dtype");
  }
  const int n = checked_count(numel_of(input), "all_gather");
  checked_count(numel_of(output), "all_gather");
  auto o = new_op("all_gather", detail::Describe::of(numel_of(input), input.dtype(), " per rank"));
  const void* in = input.data_ptr_unsafe();
  void* out = output.data_ptr_unsafe();
  const MPI_Comm c = state_->comm;
  const DType dt = input.dtype();
  set_collective(*o, output.nbytes(), [=](MPI_Request* r) {
    return r ? MPI_Iallgather(in, n, mpi_type(dt), out, n, mpi_type(dt), c, r)
             : MPI_Allgather(in, n, mpi_type(dt), out, n, mpi_type(dt), c);
  });
  o->keep = {input, output};
  const Tensor* rd[] = {&input};
  const Tensor* w[] = {&output};
  return enqueue(state_, pick(stream, input.device()), std::move(o), rd, w);
}

Event Communicator::reduce_scatter(const Tensor& input, Tensor& output, ReduceOp op,
                                   std::optional<Stream> stream) {
  check_tensor(input, "reduce_scatter");
  check_tensor(output, "reduce_scatter");
  check_avg(op, output.dtype(), "reduce_scatter");
  if (input.dtype() != output.dtype() || input.numel() != output.numel() * size()) {
    throw Error(api::function("mpi") + " reduce_scatter: input " + input.str() +
                " must have size() (" + std::to_string(size()) + ") times the elements of output " +
                output.str() + " and the same dtype");
  }
  const int n = checked_count(numel_of(output), "reduce_scatter");
  checked_count(numel_of(input), "reduce_scatter");
  auto o = new_op("reduce_scatter", detail::Describe::reduction(numel_of(output), output.dtype(),
                                                                " per rank", to_string(op)));
  const void* in = input.data_ptr_unsafe();
  void* out = output.data_ptr_unsafe();
  const MPI_Comm c = state_->comm;
  const DType dt = output.dtype();
  set_collective(*o, input.nbytes(), [=](MPI_Request* r) {
    return r ? MPI_Ireduce_scatter_block(in, out, n, mpi_type(dt), mpi_op(op), c, r)
             : MPI_Reduce_scatter_block(in, out, n, mpi_type(dt), mpi_op(op), c);
  });
  o->keep = {input, output};
  const Tensor* rd[] = {&input};
  const Tensor* w[] = {&output};
  return enqueue(state_, pick(stream, input.device()), std::move(o), rd, w,
                 op == ReduceOp::Avg ? out : nullptr, numel_of(output), dt);
}

Event Communicator::all_to_all(const Tensor& input, Tensor& output, std::optional<Stream> stream) {
  check_tensor(input, "all_to_all");
  check_tensor(output, "all_to_all");
  if (input.dtype() != output.dtype() || input.numel() != output.numel() ||
      input.numel() % size() != 0) {
    throw Error(api::function("mpi") + " all_to_all: input " + input.str() + " and output " +
                output.str() +
                " need the same dtype and number of elements, divisible by size() (" +
                std::to_string(size()) + ")");
  }
  const std::size_t per = numel_of(input) / static_cast<std::size_t>(size());
  const int n = checked_count(per, "all_to_all");
  checked_count(numel_of(input), "all_to_all");
  auto o = new_op("all_to_all", detail::Describe::of(per, input.dtype(), " per rank pair"));
  const void* in = input.data_ptr_unsafe();
  void* out = output.data_ptr_unsafe();
  const MPI_Comm c = state_->comm;
  const DType dt = input.dtype();
  set_collective(*o, input.nbytes(), [=](MPI_Request* r) {
    return r ? MPI_Ialltoall(in, n, mpi_type(dt), out, n, mpi_type(dt), c, r)
             : MPI_Alltoall(in, n, mpi_type(dt), out, n, mpi_type(dt), c);
  });
  o->keep = {input, output};
  const Tensor* rd[] = {&input};
  const Tensor* w[] = {&output};
  return enqueue(state_, pick(stream, input.device()), std::move(o), rd, w);
}

Event Communicator::send(const Tensor& t, int dst, int tag, std::optional<Stream> stream) {
  check_tensor(t, "send");
  check_rank(dst, size(), "send", "destination");
  check_tag(tag, state_->comm, "send");
  const int n = checked_count(numel_of(t), "send");
  auto o = new_op("send", detail::Describe::of(numel_of(t), t.dtype(), " to rank ", dst, tag));
  const void* p = t.data_ptr_unsafe();
  const MPI_Comm c = state_->comm;
  const DType dt = t.dtype();
  o->start = [=](MPI_Request* r) { return MPI_Isend(p, n, mpi_type(dt), dst, tag, c, r); };
  o->keep = {t};
  const Tensor* rd[] = {&t};
  return enqueue(state_, pick(stream, t.device()), std::move(o), rd, {});
}

Event Communicator::recv(Tensor& t, int src, int tag, std::optional<Stream> stream) {
  check_tensor(t, "recv");
  check_rank(src, size(), "recv", "source");
  check_tag(tag, state_->comm, "recv");
  const int n = checked_count(numel_of(t), "recv");
  checked_count(t.nbytes(), "recv");
  auto o = new_op("recv", detail::Describe::of(numel_of(t), t.dtype(), " from rank ", src, tag));
  o->recv_bytes = static_cast<int>(t.nbytes());
  o->peer = src;
  void* p = t.data_ptr_unsafe();
  const MPI_Comm c = state_->comm;
  const DType dt = t.dtype();
  o->start = [=](MPI_Request* r) { return MPI_Irecv(p, n, mpi_type(dt), src, tag, c, r); };
  o->keep = {t};
  const Tensor* w[] = {&t};
  return enqueue(state_, pick(stream, t.device()), std::move(o), {}, w);
}

}  // namespace streamrt::mpi
