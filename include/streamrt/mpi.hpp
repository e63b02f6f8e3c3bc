#pragma once
//! \file mpi.hpp
//! streamrt::mpi (optional component, `find_package(streamrt COMPONENTS mpi)`, target
//! streamrt::mpi): MPI point-to-point and collectives as stream work, like NCCL on CUDA streams.
//! Each operation is enqueued on a stream (default: the current stream) and returns at once with
//! an Event that completes when the communication has; it starts when the stream gets there, in
//! stream order with the compute around it. While it is in flight its stream is parked, not a
//! worker: a progress thread drives MPI (docs/distributed.md). Tensor arguments take part in
//! automatic dependency tracking like any op. MPI errors fail the stream with an Error carrying
//! MPI's error string and the operation (rule 10 of docs/design.md).
//!
//! Ordering across ranks: the operations of one Communicator start in the order the host
//! enqueued them (whatever stream each is on), as MPI needs every rank to issue its collectives
//! on a communicator in the same order. Every rank must enqueue the same sequence.

#include <mpi.h>

#include <cstddef>
#include <memory>
#include <optional>
#include <string_view>

#include "streamrt/event.hpp"
#include "streamrt/stream.hpp"
#include "streamrt/tensor.hpp"

namespace streamrt::mpi {

namespace detail {
struct CommState;
}  // namespace detail

//! Reduction operators (torch.distributed.ReduceOp). Avg is a sum divided by the communicator
//! size, for floating dtypes only.
enum class ReduceOp { Sum, Prod, Min, Max, Avg };

//! Lower-case name ("sum", ...). Never blocks.
std::string_view to_string(ReduceOp op) noexcept;

//! Initialises MPI with MPI_THREAD_MULTIPLE unless the program already did; then checks that the
//! level is MPI_THREAD_MULTIPLE (stream work on any worker and the progress thread call MPI, and
//! so may the program's own threads), else throws Error naming the level. When streamrt
//! initialised MPI, it also finalises it at exit (after finishing pending stream work).
//! Collective over MPI_COMM_WORLD the first time; later calls return at once. Thread-safe.
void init(int* argc = nullptr, char*** argv = nullptr);

//! True when MPI is initialised and not finalised. Never blocks.
bool initialized() noexcept;

//! Waits for all stream work (streamrt::synchronize(), failures are printed), stops the
//! progress thread and, when streamrt initialised MPI, calls MPI_Finalize. Runs at exit by
//! itself; call it earlier to finalise at a chosen point. Blocks; collective like MPI_Finalize.
void finalize();

//! A communicator whose operations run on streams. Copies share the MPI communicator, which is
//! freed when the last copy and the last queued operation are gone. Methods are thread-safe.
//! Buffers given as raw pointers must stay valid until the returned event completes; tensors are
//! kept alive by the operation.
class Communicator {
 public:
  //! A duplicate of MPI_COMM_WORLD (initialising MPI first, see init()). Blocks: collective
  //! over MPI_COMM_WORLD (MPI_Comm_dup).
  Communicator();
  //! A duplicate of `comm` (so streamrt's messages never match the program's own), with
  //! MPI_ERRORS_RETURN as its error handler. Blocks: collective over `comm`.
  explicit Communicator(MPI_Comm comm);

  //! This process's rank. Never blocks.
  int rank() const noexcept;
  //! Number of ranks. Never blocks.
  int size() const noexcept;
  //! The duplicated MPI communicator (for the program's own MPI calls). Never blocks.
  MPI_Comm native() const noexcept;

  //! In-place reduction of `t` over all ranks. Every rank passes the same shape and dtype.
  //! Enqueued on `stream` (default: the current stream of t's device); returns at once.
  Event all_reduce(Tensor& t, ReduceOp op = ReduceOp::Sum,
                   std::optional<Stream> stream = std::nullopt);
  //! Copies `t` of rank `root` into `t` on every rank. Returns at once.
  Event broadcast(Tensor& t, int root, std::optional<Stream> stream = std::nullopt);
  //! Concatenates every rank's `input` (rank order) into `output` (size() * input.numel()
  //! elements, same dtype). Returns at once.
  Event all_gather(const Tensor& input, Tensor& output,
                   std::optional<Stream> stream = std::nullopt);
  //! Reduces `input` (size() * output.numel() elements) over all ranks and leaves block rank()
  //! of the result in `output`. Returns at once.
  Event reduce_scatter(const Tensor& input, Tensor& output, ReduceOp op = ReduceOp::Sum,
                       std::optional<Stream> stream = std::nullopt);
  //! Block j of `input` (numel / size() elements) goes to rank j; `output` receives block i from
  //! rank i. Same numel and dtype, numel divisible by size(). Returns at once.
  Event all_to_all(const Tensor& input, Tensor& output,
                   std::optional<Stream> stream = std::nullopt);
  //! Sends `t` to rank `dst` with `tag` (0 to MPI_TAG_UB; Error otherwise). Returns at once.
  Event send(const Tensor& t, int dst, int tag = 0, std::optional<Stream> stream = std::nullopt);
  //! Receives into `t` from rank `src` with `tag` (0 to MPI_TAG_UB); the message must have
  //! exactly t.nbytes().
  //! Returns at once.
  Event recv(Tensor& t, int src, int tag = 0, std::optional<Stream> stream = std::nullopt);
  //! Completes when every rank has reached it in its stream. Returns at once.
  Event barrier(std::optional<Stream> stream = std::nullopt);

  //! Raw buffers: `count` elements of `dtype`; `send == recv` reduces in place. Returns at once.
  Event all_reduce(const void* send, void* recv, std::size_t count, DType dtype,
                   ReduceOp op = ReduceOp::Sum, std::optional<Stream> stream = std::nullopt);
  //! Raw broadcast of `count` elements from `root`. Returns at once.
  Event broadcast(void* buf, std::size_t count, DType dtype, int root,
                  std::optional<Stream> stream = std::nullopt);
  //! Raw all-gather: `count` elements per rank; `recv` holds size() * count. Returns at once.
  Event all_gather(const void* send, void* recv, std::size_t count, DType dtype,
                   std::optional<Stream> stream = std::nullopt);
  //! Raw reduce-scatter: `send` holds size() * count, `recv` gets count. Returns at once.
  Event reduce_scatter(const void* send, void* recv, std::size_t count, DType dtype,
                       ReduceOp op = ReduceOp::Sum, std::optional<Stream> stream = std::nullopt);
  //! Raw all-to-all: `count` elements per rank pair; both buffers hold size() * count.
  Event all_to_all(const void* send, void* recv, std::size_t count, DType dtype,
                   std::optional<Stream> stream = std::nullopt);
  //! Raw send of `count` elements. Returns at once.
  Event send(const void* buf, std::size_t count, DType dtype, int dst, int tag = 0,
             std::optional<Stream> stream = std::nullopt);
  //! Raw receive of exactly `count` elements. Returns at once.
  Event recv(void* buf, std::size_t count, DType dtype, int src, int tag = 0,
             std::optional<Stream> stream = std::nullopt);

  //! Operations in flight in MPI now, on all communicators (for tests and debugging). Never
  //! blocks.
  static std::size_t in_flight() noexcept;

 private:
  std::shared_ptr<detail::CommState> state_;
};

}  // namespace streamrt::mpi
