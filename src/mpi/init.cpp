// MPI start-up and shut-down for streamrt::mpi: MPI_THREAD_MULTIPLE, whether or not the program
// initialised MPI itself, and a hook that stops the progress thread inside MPI_Finalize.
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

#include "engine.hpp"
#include "streamrt/error.hpp"
#include "streamrt/mpi.hpp"
#include "streamrt/stream.hpp"

namespace streamrt::mpi {
namespace {

std::mutex g_init_mutex;
bool g_we_initialised = false;  // guarded by g_init_mutex
bool g_hooked = false;          // guarded by g_init_mutex

std::string level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE:
      return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED:
      return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED:
      return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE:
      return "MPI_THREAD_MULTIPLE";
  }
  return "thread level " + std::to_string(level);
}

// Called by MPI at the start of MPI_Finalize (attributes of MPI_COMM_SELF are deleted first, MPI
// 3.1 section 8.7.1), whoever calls it (the program, mpi4py's atexit): the progress thread must
// stop calling MPI before MPI goes away.
int on_finalize(MPI_Comm, int, void*, void*) {
  detail::Engine::get().stop();
  return MPI_SUCCESS;
}

void finalize_at_exit() { finalize(); }

}  // namespace

std::string_view to_string(ReduceOp op) noexcept {
  switch (op) {
    case ReduceOp::Sum:
      return "sum";
    case ReduceOp::Prod:
      return "prod";
    case ReduceOp::Min:
      return "min";
    case ReduceOp::Max:
      return "max";
    case ReduceOp::Avg:
      return "avg";
  }
  return "unknown";
}

bool initialized() noexcept {
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  return init != 0 && fin == 0;
}

void init(int* argc, char*** argv) {
  std::lock_guard lock(g_init_mutex);
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  if (fin != 0) {
    throw Error("streamrt::mpi: MPI has already been finalised in this process; MPI cannot be "
                "started again. Create communicators before MPI_Finalize");
  }
  int provided = MPI_THREAD_SINGLE;
  if (init == 0) {
    const int rc = MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
    if (rc != MPI_SUCCESS) {
      throw Error("streamrt::mpi: MPI_Init_thread failed: " + detail::mpi_error_string(rc));
    }
    g_we_initialised = true;
    std::atexit(finalize_at_exit);
  } else {
    MPI_Query_thread(&provided);
  }
  if (provided < MPI_THREAD_MULTIPLE) {
    throw Error("streamrt::mpi needs MPI_THREAD_MULTIPLE (operations start on whichever worker "
                "runs their stream, a progress thread completes them, and the program may call "
                "MPI too), but MPI " +
                std::string(init == 0 ? "only provides " : "was initialised with ") +
                level_name(provided) +
                ". Initialise MPI with MPI_Init_thread(..., MPI_THREAD_MULTIPLE, ...) (mpi4py "
                "does by default), or let streamrt::mpi::init() do it");
  }
  if (!g_hooked) {
    int keyval = MPI_KEYVAL_INVALID;
    MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, on_finalize, &keyval, nullptr);
    MPI_Comm_set_attr(MPI_COMM_SELF, keyval, nullptr);
    g_hooked = true;
  }
}

void finalize() {
  bool ours = false;
  {
    std::lock_guard lock(g_init_mutex);
    ours = g_we_initialised;
    g_we_initialised = false;
  }
  if (!initialized()) return;
  try {
    streamrt::synchronize();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "streamrt::mpi::finalize: stream work failed: %s\n", e.what());
  }
  detail::Engine::get().stop();
  if (ours) MPI_Finalize();
}

std::size_t Communicator::in_flight() noexcept { return detail::Engine::get().in_flight(); }

}  // namespace streamrt::mpi
