// MPI start-up and shut-down for streamrt::mpi: MPI_THREAD_MULTIPLE, whether or not the program
// initialised MPI itself, and a hook that stops the progress thread inside MPI_Finalize.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

#include "engine.hpp"
#include "streamrt/device.hpp"
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

// How long exit waits for queued work (STREAMRT_EXIT_TIMEOUT, seconds; default 60 s: a rank
// has no terminal for Ctrl-C). A bad value is reported and the default used: exit is no place
// to throw.
std::chrono::nanoseconds exit_timeout() {
  constexpr double kDefaultSeconds = 60;
  double seconds = kDefaultSeconds;
  if (const char* text = std::getenv("STREAMRT_EXIT_TIMEOUT"); text != nullptr && *text != 0) {
    char* end = nullptr;
    const double v = std::strtod(text, &end);
    if (*end == 0 && v >= 0 && v < 9.2e9) {
      seconds = v;
    } else {
      std::fprintf(stderr,
                   "streamrt::mpi: STREAMRT_EXIT_TIMEOUT='%s' is not a number of seconds from 0 "
                   "to 9.2e9; waiting the default %g s at exit\n",
                   text, kDefaultSeconds);
    }
  }
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::duration<double>(seconds));
}

void finalize_at_exit() {
  // Communication that cannot complete (a collective the other ranks never entered, or entered
  // with other counts) would hold exit for ever, here and in MPI_Finalize: wait a bounded time,
  // then end the whole job, saying what was left.
  if (initialized()) {
    bool done = false;
    try {
      done = streamrt::synchronize_for(exit_timeout());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "streamrt::mpi: at exit, stream work failed: %s\n", e.what());
      done = true;  // reported; what is left is finished
    }
    if (!done) {
      std::fprintf(stderr,
                   "streamrt::mpi: at exit, stream work is still queued or running after the exit "
                   "time-out (%zu MPI operations in flight): aborting the job (MPI_Abort). Set "
                   "STREAMRT_EXIT_TIMEOUT (seconds) to wait longer\n",
                   detail::Engine::get().in_flight());
      std::fflush(stderr);
      MPI_Abort(MPI_COMM_WORLD, 124);
    }
  }
  finalize();
}

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
    throw Error(api::function("mpi") +
                ": MPI has already been finalised in this process; MPI cannot be started again. "
                "Create communicators before MPI_Finalize");
  }
  int provided = MPI_THREAD_SINGLE;
  if (init == 0) {
    const int rc = MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
    if (rc != MPI_SUCCESS) {
      throw Error(api::function("mpi") +
                  ": MPI_Init_thread failed: " + detail::mpi_error_string(rc));
    }
    g_we_initialised = true;
    std::atexit(finalize_at_exit);
  } else {
    MPI_Query_thread(&provided);
  }
  if (provided < MPI_THREAD_MULTIPLE) {
    throw Error(api::function("mpi") +
                " needs MPI_THREAD_MULTIPLE (operations start on whichever worker "
                "runs their stream, a progress thread completes them, and the program may call "
                "MPI too), but MPI " +
                std::string(init == 0 ? "only provides " : "was initialised with ") +
                level_name(provided) +
                ". Initialise MPI with MPI_Init_thread(..., MPI_THREAD_MULTIPLE, ...) (mpi4py "
                "does by default), or let " +
                api::function("mpi::init") + "() do it");
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

std::size_t Communicator::in_flight() noexcept {
  return detail::Engine::get().in_flight();
}

}  // namespace streamrt::mpi
