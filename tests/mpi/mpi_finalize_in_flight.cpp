// MPI_Finalize, called by the program itself, while a receive is still in flight on a stream
// (nothing may hang silently): the hook streamrt::mpi puts on MPI_COMM_SELF stops the
// progress thread inside MPI_Finalize and fails the operation with an Error naming the reason,
// so the stream's synchronize reports it instead of waiting for ever. Run under mpirun -np 2;
// exits 0 when every rank saw what it should.
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "streamrt/mpi.hpp"
#include "streamrt/streamrt.hpp"

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);  // the program's own MPI
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int failures = 0;
  {
    streamrt::mpi::Communicator comm;
    streamrt::Stream s;
    int never = 0;
    // Nobody sends tag 99: the receive stays in flight until MPI goes away.
    comm.recv(&never, 1, streamrt::DType::Int32, 1 - rank, 99, s);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (streamrt::mpi::Communicator::in_flight() == 0 &&
           std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (streamrt::mpi::Communicator::in_flight() == 0) {
      std::fprintf(stderr, "rank %d: the receive never reached MPI\n", rank);
      ++failures;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();  // with the receive in flight
    std::string what;
    try {
      if (!s.synchronize_for(std::chrono::seconds(60))) what = "(synchronize_for timed out)";
    } catch (const streamrt::Error& e) {
      what = e.what();
    }
    if (what.find("MPI was finalised while this operation was in flight") == std::string::npos ||
        what.find("recv (1 x int32 from rank") == std::string::npos) {
      std::fprintf(stderr, "rank %d: expected the in-flight receive to fail naming it, got: %s\n",
                   rank, what.c_str());
      ++failures;
    }
    try {
      comm.barrier(s);  // after MPI_Finalize: fails the stream, never calls MPI
      s.synchronize();
      std::fprintf(stderr, "rank %d: an operation after MPI_Finalize did not fail\n", rank);
      ++failures;
    } catch (const streamrt::Error& e) {
      if (std::string(e.what()).find("finalised") == std::string::npos) {
        std::fprintf(stderr, "rank %d: unexpected error after finalize: %s\n", rank, e.what());
        ++failures;
      }
    }
  }
  if (failures == 0) std::printf("rank %d: ok\n", rank);
  return failures == 0 ? 0 : 1;
}
