// main() of the MPI test program: every rank runs every test; the exit code is the worst rank's.
#include <gtest/gtest.h>
#include <mpi.h>

#include "streamrt/mpi.hpp"

int main(int argc, char** argv) {
  streamrt::mpi::init(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) {
    // One rank prints the progress; every rank still prints its failures.
    ::testing::GTEST_FLAG(brief) = true;
  }
  int rc = RUN_ALL_TESTS();
  int worst = rc;
  MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  streamrt::mpi::finalize();
  return worst;
}
