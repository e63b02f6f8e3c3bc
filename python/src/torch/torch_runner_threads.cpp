// torch's thread counts are per thread (OpenMP's, and MKL's local one), but at::set_num_threads()
// also stores a process-wide count from which every thread that has not asked for its own yet
// starts (torch initialises a thread's count lazily): a worker setting one through it would give
// one thread to the next host thread that runs a torch op, fewer than eager torch's. So the count
// is set here through OpenMP's and MKL's own per-thread setters, from the libraries torch loaded,
// after asking torch for the thread's count (which initialises it); torch's setter only where
// torch has no OpenMP.
#include "torch_runner_threads.hpp"

#include <ATen/Parallel.h>
#include <dlfcn.h>

#include "torch_runner_internal.hpp"

namespace streamrt::python::torch_runner {
namespace {

struct ThreadSetters {
  void (*omp)(int) = nullptr;       // omp_set_num_threads
  int (*mkl_local)(int) = nullptr;  // MKL_Set_Num_Threads_Local, where torch has MKL
};

ThreadSetters find_setters() noexcept {
  ThreadSetters found;
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&at::get_num_threads), &info) == 0) return found;
  // (libtorch_cpu and the libraries it needs: kept open, as torch is)
  void* torch_cpu = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
  if (torch_cpu == nullptr) return found;
  found.omp = reinterpret_cast<void (*)(int)>(dlsym(torch_cpu, "omp_set_num_threads"));
  // (the C entry point that mkl.h's mkl_set_num_threads_local names; the lower-case symbol is the
  // Fortran one, which takes a pointer)
  found.mkl_local = reinterpret_cast<int (*)(int)>(dlsym(torch_cpu, "MKL_Set_Num_Threads_Local"));
  return found;
}

const ThreadSetters& setters() noexcept {
  static const ThreadSetters found = find_setters();
  return found;
}

// Sets this thread's intra-op thread count to `n` without touching any other thread's; returns the
// count before.
int set_this_threads_intra_op(int n) noexcept {
  const int before = at::get_num_threads();  // (initialises this thread's count first)
  if (before == n) return before;
  const ThreadSetters& s = setters();
  if (s.omp == nullptr) {
    at::set_num_threads(n);
  } else {
    s.omp(n);
    if (s.mkl_local != nullptr) s.mkl_local(n);
  }
  return before;
}

}  // namespace

OneIntraOpThread::OneIntraOpThread() noexcept : before_(set_this_threads_intra_op(1)) {}

OneIntraOpThread::~OneIntraOpThread() {
  const TorchHost* h = host();
  if (before_ != 1 && (h == nullptr || !h->on_worker_thread())) {
    set_this_threads_intra_op(before_);
  }
}

}  // namespace streamrt::python::torch_runner
