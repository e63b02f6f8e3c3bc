// streamrt::mpi against plain blocking MPI in the same run (run: mpirun -np 2 streamrt_mpi_bench):
//  1. all_reduce of 4 MiB float32 enqueued on a stream (enqueue + Event::synchronize) vs
//     MPI_Allreduce of the same buffer: bandwidth ratio;
//  2. 8 bytes: the stream round trip (enqueue + Stream::synchronize) vs MPI_Allreduce's latency,
//     and an empty item's round trip on the same stream (the runtime's share).
// Rounds alternate between the two so that drift from other load hits both. Figures are medians
// over rounds; the slowest rank's are printed. docs/distributed.md has the numbers.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "streamrt/mpi.hpp"
#include "streamrt/streamrt.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using streamrt::DType;
using streamrt::mpi::Communicator;
using streamrt::mpi::ReduceOp;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double worst(double x, MPI_Comm c) {
  double out = x;
  MPI_Allreduce(&x, &out, 1, MPI_DOUBLE, MPI_MAX, c);
  return out;
}

// Seconds per operation over `reps` back-to-back operations.
template <class F>
double per_op(int reps, MPI_Comm c, F f) {
  MPI_Barrier(c);
  const auto t0 = Clock::now();
  for (int i = 0; i < reps; ++i) f();
  return std::chrono::duration<double>(Clock::now() - t0).count() / reps;
}

}  // namespace

int main(int argc, char** argv) {
  streamrt::mpi::init(&argc, &argv);
  int rounds = 15;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) rounds = std::atoi(argv[++i]);
  }
  {
    Communicator comm;
    MPI_Comm plain;  // the baseline's own communicator, same MPI, same buffers
    MPI_Comm_dup(MPI_COMM_WORLD, &plain);
    streamrt::Stream s;

    const std::size_t big = (4u << 20) / sizeof(float);
    std::vector<float> buf(big, 1.0f);
    std::vector<double> t_mpi, t_stream;
    for (int r = 0; r < rounds + 2; ++r) {
      const double a = per_op(10, plain, [&] {
        MPI_Allreduce(MPI_IN_PLACE, buf.data(), static_cast<int>(big), MPI_FLOAT, MPI_SUM, plain);
      });
      const double b = per_op(10, plain, [&] {
        comm.all_reduce(buf.data(), buf.data(), big, DType::Float32, ReduceOp::Sum, s)
            .synchronize();
      });
      if (r >= 2) {  // two warm-up rounds
        t_mpi.push_back(a);
        t_stream.push_back(b);
      }
    }
    const double bw_mpi = worst(median(t_mpi), plain), bw_stream = worst(median(t_stream), plain);

    std::vector<float> small(2, 1.0f);
    std::vector<double> l_mpi, l_stream, l_empty;
    for (int r = 0; r < rounds + 2; ++r) {
      // The runtime's own round trip (an empty item), to tell its share from MPI's.
      const double e = per_op(2000, plain, [&] {
        s.launch([] {});
        s.synchronize();
      });
      if (r >= 2) l_empty.push_back(e);
      const double a = per_op(2000, plain, [&] {
        MPI_Allreduce(MPI_IN_PLACE, small.data(), 2, MPI_FLOAT, MPI_SUM, plain);
      });
      const double b = per_op(2000, plain, [&] {
        comm.all_reduce(small.data(), small.data(), 2, DType::Float32, ReduceOp::Sum, s);
        s.synchronize();
      });
      if (r >= 2) {
        l_mpi.push_back(a);
        l_stream.push_back(b);
      }
    }
    const double lat_mpi = worst(median(l_mpi), plain), lat_stream = worst(median(l_stream), plain);
    const double lat_empty = worst(median(l_empty), plain);
    if (comm.rank() == 0) {
      const double mib = 4.0;
      std::printf(
          "all_reduce 4 MiB float32, %d ranks: MPI_Allreduce %.3f ms (%.0f MiB/s), on a "
          "stream %.3f ms (%.0f MiB/s): %.1f%% of MPI's bandwidth\n",
          comm.size(), bw_mpi * 1e3, mib / bw_mpi, bw_stream * 1e3, mib / bw_stream,
          100.0 * bw_mpi / bw_stream);
      std::printf(
          "all_reduce 8 bytes: MPI_Allreduce %.2f us, stream round trip (enqueue + "
          "synchronize) %.2f us: +%.2f us\n",
          lat_mpi * 1e6, lat_stream * 1e6, (lat_stream - lat_mpi) * 1e6);
      std::printf("for scale: an empty item's stream round trip (launch + synchronize) %.2f us\n",
                  lat_empty * 1e6);
    }
    MPI_Comm_free(&plain);
  }
  streamrt::mpi::finalize();
  return 0;
}
