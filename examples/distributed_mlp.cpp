// Data-parallel training of a two-layer MLP with streamrt::mpi (run: mpirun -np 2
// example_distributed_mlp). Each rank trains on its slice of a synthetic batch; gradients are
// averaged with all_reduce. With overlap, the all_reduce of the second layer's gradient runs on a
// communication stream while the first layer's backward runs on the compute stream (DDP's bucket
// overlap); without, everything runs in order on one stream. Checks that every rank ends with
// identical weights, equal (allclose) to one process training on the whole batch; prints the step
// times and writes one trace per rank. The matrix products are OpenBLAS calls launched on the
// streams over raw buffers, ordered by streams and events (CUDA style; tracking is not involved).
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "streamrt/mpi.hpp"
#include "streamrt/streamrt.hpp"

namespace {

using namespace streamrt;
using streamrt::mpi::Communicator;
using streamrt::mpi::ReduceOp;

struct Sizes {
  int batch = 16;  // rows per rank
  int in = 256, hidden = 2048, out = 1024;
};

using Buf = std::vector<float>;

// C[m,n] (=|+=) op(A) op(B), row-major.
void gemm(bool ta, bool tb, int m, int n, int k, const float* a, const float* b, float* c) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n,
              k, 1.0f, a, ta ? m : k, b, tb ? k : n, 0.0f, c, n);
}

// Deterministic pseudo-random numbers in [-scale, scale].
void fill(Buf& v, unsigned seed, float scale) {
  unsigned x = seed * 2654435761u + 12345u;
  for (auto& e : v) {
    x = x * 1664525u + 1013904223u;
    e = scale * (static_cast<float>(x >> 8) / 8388608.0f - 1.0f);
  }
}

struct Model {
  Sizes s;
  int rows;  // batch rows this model trains on
  Buf w1, w2, x, target, hpre, h, y, dy, dh, dw1, dw2;
  Model(Sizes sz, int r, const Buf& x_all, const Buf& t_all, int first_row)
      : s(sz),
        rows(r),
        w1(static_cast<std::size_t>(sz.in) * sz.hidden),
        w2(static_cast<std::size_t>(sz.hidden) * sz.out),
        x(x_all.begin() + static_cast<std::ptrdiff_t>(first_row) * sz.in,
          x_all.begin() + static_cast<std::ptrdiff_t>(first_row + r) * sz.in),
        target(t_all.begin() + static_cast<std::ptrdiff_t>(first_row) * sz.out,
               t_all.begin() + static_cast<std::ptrdiff_t>(first_row + r) * sz.out),
        hpre(static_cast<std::size_t>(r) * sz.hidden),
        h(hpre.size()),
        y(static_cast<std::size_t>(r) * sz.out),
        dy(y.size()),
        dh(h.size()),
        dw1(w1.size()),
        dw2(w2.size()) {
    fill(w1, 1, 1.0f / std::sqrt(static_cast<float>(sz.in)));
    fill(w2, 2, 1.0f / std::sqrt(static_cast<float>(sz.hidden)));
  }

  void forward_and_output_grad() {
    gemm(false, false, rows, s.hidden, s.in, x.data(), w1.data(), hpre.data());
    for (std::size_t i = 0; i < h.size(); ++i) h[i] = std::max(hpre[i], 0.0f);
    gemm(false, false, rows, s.out, s.hidden, h.data(), w2.data(), y.data());
    const float k = 2.0f / (static_cast<float>(rows) * s.out);  // d(mean squared error)/dy
    for (std::size_t i = 0; i < y.size(); ++i) dy[i] = k * (y[i] - target[i]);
  }
  void grad_w2() { gemm(true, false, s.hidden, s.out, rows, h.data(), dy.data(), dw2.data()); }
  void backward_layer1() {
    gemm(false, true, rows, s.hidden, s.out, dy.data(), w2.data(), dh.data());
    for (std::size_t i = 0; i < dh.size(); ++i) dh[i] = hpre[i] > 0 ? dh[i] : 0.0f;
    gemm(true, false, s.in, s.hidden, rows, x.data(), dh.data(), dw1.data());
  }
  void update(float lr) {
    for (std::size_t i = 0; i < w1.size(); ++i) w1[i] -= lr * dw1[i];
    for (std::size_t i = 0; i < w2.size(); ++i) w2[i] -= lr * dw2[i];
  }
};

constexpr float kLr = 0.05f;

// One data-parallel step. overlap: dW2's all_reduce on `comm_stream` while `compute` runs the
// first layer's backward; else all on `compute`, in order.
void step(Model& m, Communicator& comm, Stream& compute, Stream& comm_stream, bool overlap) {
  compute.launch("forward", [&m] { m.forward_and_output_grad(); });
  compute.launch("grad_w2", [&m] { m.grad_w2(); });
  if (overlap) {
    comm_stream.wait_event(compute.record_event());
    comm.all_reduce(m.dw2.data(), m.dw2.data(), m.dw2.size(), DType::Float32, ReduceOp::Avg,
                    comm_stream);
    compute.launch("backward_layer1", [&m] { m.backward_layer1(); });
    comm_stream.wait_event(compute.record_event());
    comm.all_reduce(m.dw1.data(), m.dw1.data(), m.dw1.size(), DType::Float32, ReduceOp::Avg,
                    comm_stream);
    compute.wait_event(comm_stream.record_event());
  } else {
    compute.launch("backward_layer1", [&m] { m.backward_layer1(); });
    comm.all_reduce(m.dw2.data(), m.dw2.data(), m.dw2.size(), DType::Float32, ReduceOp::Avg,
                    compute);
    comm.all_reduce(m.dw1.data(), m.dw1.data(), m.dw1.size(), DType::Float32, ReduceOp::Avg,
                    compute);
  }
  compute.launch("sgd", [&m] { m.update(kLr); });
}

// Median of per-step times (ms), the slowest rank's.
double timed_steps(Model& m, Communicator& comm, Stream& compute, Stream& comm_stream, bool overlap,
                   int steps) {
  std::vector<double> ms;
  for (int i = 0; i < steps; ++i) {
    MPI_Barrier(comm.native());
    const auto t0 = std::chrono::steady_clock::now();
    step(m, comm, compute, comm_stream, overlap);
    compute.synchronize();
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  double med = ms[ms.size() / 2], worst = med;
  MPI_Allreduce(&med, &worst, 1, MPI_DOUBLE, MPI_MAX, comm.native());
  return worst;
}

}  // namespace

int main(int argc, char** argv) {
  streamrt::mpi::init(&argc, &argv);
  int steps = 20;
  std::string trace_dir = ".";
  Sizes sz;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--steps") == 0 && i + 1 < argc) steps = std::atoi(argv[++i]);
    if (std::strcmp(argv[i], "--trace-dir") == 0 && i + 1 < argc) trace_dir = argv[++i];
    // Smaller layers for a quick correctness run (the tests): --hidden 256 --out 128.
    if (std::strcmp(argv[i], "--hidden") == 0 && i + 1 < argc) sz.hidden = std::atoi(argv[++i]);
    if (std::strcmp(argv[i], "--out") == 0 && i + 1 < argc) sz.out = std::atoi(argv[++i]);
  }
  if (steps < 1 || sz.hidden < 1 || sz.out < 1) {
    std::fprintf(stderr,
                 "usage: example_distributed_mlp [--steps N] [--trace-dir DIR] "
                 "[--hidden N] [--out N] (all N >= 1)\n");
    return 2;
  }
  openblas_set_num_threads(1);  // the ranks and streams are the parallelism
  int rc = 0;
  {
    Communicator comm;
    const int rank = comm.rank(), size = comm.size();
    const int total = sz.batch * size;
    Buf x_all(static_cast<std::size_t>(total) * sz.in),
        t_all(static_cast<std::size_t>(total) * sz.out);
    fill(x_all, 3, 1.0f);
    fill(t_all, 4, 0.5f);
    Stream compute, comm_stream;

    // Correctness: `steps` data-parallel steps with overlap vs one process on the whole batch.
    Model dp(sz, sz.batch, x_all, t_all, rank * sz.batch);
    Model serial(sz, total, x_all, t_all, 0);
    for (int i = 0; i < steps; ++i) step(dp, comm, compute, comm_stream, true);
    Stream solo;
    for (int i = 0; i < steps; ++i) {
      solo.launch([&] {
        serial.forward_and_output_grad();
        serial.grad_w2();
        serial.backward_layer1();
        serial.update(kLr);
      });
    }
    compute.synchronize();
    solo.synchronize();
    // Identical on every rank: gather every rank's W2 and compare bytes.
    Buf all_w2(serial.w2.size() * static_cast<std::size_t>(size));
    comm.all_gather(dp.w2.data(), all_w2.data(), dp.w2.size(), DType::Float32).synchronize();
    bool identical = true;
    for (int r = 0; r < size; ++r) {
      identical =
          identical && std::memcmp(all_w2.data() + dp.w2.size() * static_cast<std::size_t>(r),
                                   dp.w2.data(), dp.w2.size() * sizeof(float)) == 0;
    }
    auto close = [](const Buf& a, const Buf& b) {
      for (std::size_t i = 0; i < a.size(); ++i) {
        if (std::abs(a[i] - b[i]) > 1e-5f + 1e-3f * std::abs(b[i])) return false;
      }
      return true;
    };
    const bool matches = close(dp.w1, serial.w1) && close(dp.w2, serial.w2);
    if (rank == 0) {
      std::printf(
          "distributed MLP: %d ranks x %d rows, %d steps: weights identical on every "
          "rank: %s; allclose to one process on the whole batch: %s\n",
          size, sz.batch, steps, identical ? "yes" : "NO", matches ? "yes" : "NO");
    }
    if (!identical || !matches) rc = 1;

    // Timing: median step time, with and without overlap (interleaved, same run).
    const double plain = timed_steps(dp, comm, compute, comm_stream, false, steps);
    const double overlapped = timed_steps(dp, comm, compute, comm_stream, true, steps);
    Profiler prof;
    prof.name_stream(compute, "compute");
    prof.name_stream(comm_stream, "communication");
    {
      ProfilerGuard guard(prof);
      for (int i = 0; i < 3; ++i) step(dp, comm, compute, comm_stream, true);
      compute.synchronize();
    }
    const std::string trace = trace_dir + "/distributed_mlp_rank" + std::to_string(rank) + ".json";
    prof.export_chrome_trace(trace);
    if (rank == 0) {
      std::printf(
          "step time (median, slowest rank): without overlap %.2f ms, with overlap %.2f "
          "ms (%.2fx); traces: %s/distributed_mlp_rank*.json\n",
          plain, overlapped, overlapped / plain, trace_dir.c_str());
    }
  }
  streamrt::mpi::finalize();
  return rc;
}
