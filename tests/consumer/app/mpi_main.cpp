// Uses the installed optional component streamrt::mpi (find_package(streamrt COMPONENTS mpi)).
#include <cstdio>
#include <vector>

#include "streamrt/mpi.hpp"

int main(int argc, char** argv) {
  streamrt::mpi::init(&argc, &argv);
  int rc = 0;
  {
    streamrt::mpi::Communicator comm;
    std::vector<int> v(4, 3);
    comm.all_reduce(v.data(), v.data(), v.size(), streamrt::DType::Int32).synchronize();
    rc = v[0] == 3 * comm.size() ? 0 : 1;
    std::printf("mpi consumer: all_reduce over %d rank(s): %s\n", comm.size(),
                rc == 0 ? "ok" : "WRONG");
  }
  streamrt::mpi::finalize();
  return rc;
}
