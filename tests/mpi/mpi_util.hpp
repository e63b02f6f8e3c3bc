#pragma once
// Shared by the MPI tests: the world communicator, per-rank test data and serial references.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "streamrt/mpi.hpp"
#include "streamrt/streamrt.hpp"
#include "test_util.hpp"

namespace streamrt_mpi_test {

using streamrt::DType;
using streamrt::mpi::Communicator;
using streamrt::mpi::ReduceOp;

// One duplicate of MPI_COMM_WORLD for the whole program (creating it is collective).
inline Communicator& world() {
  static Communicator* c = new Communicator;
  return *c;
}

// Element i of rank r's data: small integers, exact in every dtype, so that sums, products, minima
// and maxima over up to 4 ranks are exact too.
inline double value(int r, std::size_t i) {
  return static_cast<double>((r + 1) * (i % 13 + 1));
}

template <class T>
std::vector<T> data_of(int r, std::size_t n) {
  std::vector<T> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<T>(value(r, i));
  return v;
}

// What all_reduce must give, computed here from every rank's data.
template <class T>
std::vector<T> reduce_reference(int size, std::size_t n, ReduceOp op) {
  std::vector<T> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    double acc = value(0, i);
    for (int r = 1; r < size; ++r) {
      const double x = value(r, i);
      switch (op) {
        case ReduceOp::Sum:
        case ReduceOp::Avg:
          acc += x;
          break;
        case ReduceOp::Prod:
          acc *= x;
          break;
        case ReduceOp::Min:
          acc = std::min(acc, x);
          break;
        case ReduceOp::Max:
          acc = std::max(acc, x);
          break;
      }
    }
    if (op == ReduceOp::Avg) acc /= size;
    out[i] = static_cast<T>(acc);
  }
  return out;
}

}  // namespace streamrt_mpi_test
