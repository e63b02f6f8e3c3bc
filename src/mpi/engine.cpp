// The progress thread and error reporting of streamrt::mpi.
#include "engine.hpp"

#include <sched.h>

#include "streamrt/error.hpp"
#include "streamrt/mpi.hpp"

namespace streamrt::mpi::detail {

std::string mpi_error_string(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  int cls = 0;
  MPI_Error_class(code, &cls);
  return std::string(text, static_cast<std::size_t>(len)) + " (MPI error class " +
         std::to_string(cls) + ")";
}

std::string Describe::str() const {
  if (no_data) return "no data";
  std::string s = std::to_string(count) + " x " + std::string(to_string(dtype)) + how;
  if (rank >= 0) s += std::to_string(rank);
  if (tag) s += ", tag " + std::to_string(*tag);
  if (!reduce.empty()) s += ", " + std::string(reduce);
  return s;
}

ErrorText op_message(const Op& op, const ErrorText& what) {
  return api::function("mpi") + " " + op.name + " (" + op.describe.str() + ") on rank " +
         std::to_string(op.rank) + " of " + std::to_string(op.size) + ": " + what;
}

void fail(Op& op, int code) noexcept {
  try {
    std::string what = "MPI reported " + mpi_error_string(code);
    int cls = 0;
    MPI_Error_class(code, &cls);
    if (cls == MPI_ERR_TRUNCATE) {
      what +=
          ". The message is larger than the buffer: the ranks passed different sizes or "
          "dtypes; every rank must give the same count and dtype";
    }
    op.done.complete(std::make_exception_ptr(Error(op_message(op, what))));
  } catch (...) {
    // complete() throws only when already completed; nothing else to report then.
  }
}

void fail_finalized(Op& op) noexcept {
  try {
    op.done.complete(std::make_exception_ptr(Error(op_message(
        op, "MPI has been finalised (or " + api::function("mpi::finalize") +
                "() was called) before this operation could run; finish communication before "
                "finalising"))));
  } catch (...) {
  }
}

void finish(Op& op, const MPI_Status& status, int code) noexcept {
  if (code != MPI_SUCCESS) return fail(op, code);
  try {
    if (op.recv_bytes >= 0) {
      int got = 0;
      MPI_Get_count(&status, MPI_BYTE, &got);
      if (got != op.recv_bytes) {
        op.done.complete(std::make_exception_ptr(Error(
            op_message(op, "the message from rank " + std::to_string(status.MPI_SOURCE) + " has " +
                               std::to_string(got) + " bytes but the receive expects exactly " +
                               std::to_string(op.recv_bytes) +
                               ": the ranks passed different sizes or dtypes; send and recv must "
                               "give the same count and dtype"))));
        return;
      }
    }
    op.done.complete();
  } catch (...) {
  }
}

Engine& Engine::get() {
  // Leaked: the thread is stopped by finalize() (or the MPI_Finalize hook), never by a static
  // destructor racing with it.
  static Engine* engine = new Engine;
  return *engine;
}

void Engine::add(std::shared_ptr<Op> op) {
  std::unique_lock lock(mutex_);
  if (stopping_) {
    lock.unlock();
    fail_finalized(*op);
    return;
  }
  incoming_.push_back(std::move(op));
  pending_incoming_.fetch_add(1, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
  if (!thread_.joinable()) {
    thread_ = std::thread([this] { loop(); });
  } else if (sleeping_) {
    cv_.notify_one();
  }
}

void Engine::stop() noexcept {
  std::thread t;
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    stop_hint_.store(true, std::memory_order_relaxed);
    t = std::move(thread_);
    cv_.notify_one();
  }
  if (t.joinable()) t.join();
}

void Engine::loop() {
  std::vector<std::shared_ptr<Op>> active;
  std::vector<MPI_Request> requests;
  std::vector<int> indices;
  std::vector<MPI_Status> statuses;
  unsigned idle_polls = 0;
  for (;;) {
    if (active.empty() || pending_incoming_.load(std::memory_order_relaxed) != 0 ||
        stop_hint_.load(std::memory_order_relaxed)) {
      std::unique_lock lock(mutex_);
      if (active.empty()) {
        sleeping_ = true;
        cv_.wait(lock, [&] { return stopping_ || !incoming_.empty(); });
        sleeping_ = false;
      }
      for (auto& op : incoming_) {
        requests.push_back(op->request);
        active.push_back(std::move(op));
      }
      pending_incoming_.fetch_sub(incoming_.size(), std::memory_order_relaxed);
      incoming_.clear();
      if (stopping_) {
        lock.unlock();
        // MPI is being finalised with these in flight: fail them rather than leave streams
        // parked for ever.
        for (auto& op : active) {
          try {
            op->done.complete(std::make_exception_ptr(Error(
                op_message(*op,
                           "MPI was finalised while this operation was in flight; synchronize the "
                           "streams before MPI_Finalize"))));
          } catch (...) {
          }
        }
        count_.fetch_sub(active.size(), std::memory_order_relaxed);
        return;
      }
    }
    const int n = static_cast<int>(requests.size());
    indices.resize(requests.size());
    statuses.resize(requests.size());
    int outcount = 0;
    const int rc = MPI_Testsome(n, requests.data(), &outcount, indices.data(), statuses.data());
    if (rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS) {
      // The call itself failed: no per-request answer. Fail everything in flight (their requests
      // are in an unknown state; MPI_ERRORS_RETURN leaves the process running).
      for (auto& op : active) fail(*op, rc);
      count_.fetch_sub(active.size(), std::memory_order_relaxed);
      active.clear();
      requests.clear();
      continue;
    }
    if (outcount == MPI_UNDEFINED || outcount == 0) {
      // Nothing finished: yield the core between polls once a few polls in a row found nothing,
      // so the ranks' own threads (and other processes on a shared machine) get to run.
      if (++idle_polls > 64) sched_yield();
      continue;
    }
    idle_polls = 0;
    for (int i = 0; i < outcount; ++i) {
      const int k = indices[static_cast<std::size_t>(i)];
      const MPI_Status& st = statuses[static_cast<std::size_t>(i)];
      finish(*active[static_cast<std::size_t>(k)], st,
             rc == MPI_ERR_IN_STATUS ? st.MPI_ERROR : MPI_SUCCESS);
      active[static_cast<std::size_t>(k)].reset();  // releases the tensors here
    }
    std::size_t w = 0;
    for (std::size_t r = 0; r < active.size(); ++r) {
      if (!active[r]) continue;
      active[w] = std::move(active[r]);
      requests[w] = requests[r];
      ++w;
    }
    active.resize(w);
    requests.resize(w);
    count_.fetch_sub(static_cast<std::size_t>(outcount), std::memory_order_relaxed);
  }
}

void Runner::join() noexcept {
  std::thread t;
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    t = std::move(thread_);
    cv_.notify_one();
  }
  if (t.joinable()) t.join();
}

void Runner::add(std::shared_ptr<Op> op, bool blocking) {
  std::lock_guard lock(mutex_);
  if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });  // may throw: nothing changed
  queue_.emplace_back(std::move(op), blocking);
  // Relaxed: the reader that must see it is the caller's own later outstanding() (same thread, or
  // ordered by the communicator's mutex); the decrement's release orders the rest.
  outstanding_.fetch_add(1, std::memory_order_relaxed);
  cv_.notify_one();
}

void Runner::loop() {
  for (;;) {
    std::shared_ptr<Op> op;
    bool blocking = false;
    {
      std::unique_lock lock(mutex_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, nothing left
      op = std::move(queue_.front().first);
      blocking = queue_.front().second;
      queue_.pop_front();
    }
    if (!initialized()) {
      fail_finalized(*op);
    } else if (blocking) {
      finish(*op, MPI_Status{}, op->run());
    } else if (const int rc = op->start(&op->request); rc != MPI_SUCCESS) {
      fail(*op, rc);
    } else {
      Engine::get().add(std::move(op));
    }
    op.reset();  // releases the tensors here, before the count says it is done
    // Release: the call above happened before a caller that reads 0 issues the next collective.
    outstanding_.fetch_sub(1, std::memory_order_release);
  }
}

}  // namespace streamrt::mpi::detail
