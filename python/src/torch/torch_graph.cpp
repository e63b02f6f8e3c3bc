// Capture and replay of torch ops on a stream (torch_graph.hpp). A capture records the fast path's
// work items as they are enqueued, so the captured block runs once as usual; a replay runs copies
// of them in order as one work item. Every storage the items touch stays held by the copies, so no
// memory of the graph is handed to work outside it (the output cache's blocks and the reuse of
// queued ops' memory both see the extra holder); within the capture, a temporary's memory may go
// to a later output of the capture (list_for_reuse).
#include "torch_graph.hpp"

#include <c10/util/Exception.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <new>
#include <string>
#include <utility>

#include "torch_runner_fast.hpp"
#include "torch_runner_marks.hpp"

namespace streamrt::python::torch_runner {
namespace {

thread_local CapturedGraph* tls_capture = nullptr;

// The profiler label and failure label of a replay's work item (it must outlive the work).
constexpr const char* kReplayLabel = "streamrt.torch.CPUGraph.replay";

// Tests: the next record() fails as if out of memory (fail_next_record_for_testing).
std::atomic<bool> g_fail_next_record{false};

}  // namespace

bool run_steps(const CapturedSteps& steps, std::string* type, std::string* message) {
  for (std::size_t i = 0; i < steps.items.size(); ++i) {
    const Prepared& item = *steps.items[i];
    PreparedPtr run(copy_prepared(item));
    if (!run_prepared(*run, type, message)) {
      *message = item.op.schema().name() + " (captured op " + std::to_string(i + 1) + " of " +
                 std::to_string(steps.items.size()) + "): " + *message;
      return false;
    }
  }
  return true;
}

CapturedGraph* capturing() noexcept {
  return tls_capture;
}

CapturedGraph::~CapturedGraph() {
  abort();
}

void CapturedGraph::begin() {
  const std::lock_guard lock(mutex_);
  TORCH_CHECK(!capturing_, "streamrt.torch.CPUGraph: this graph is capturing already");
  TORCH_CHECK(tls_capture == nullptr,
              "streamrt.torch.CPUGraph: this thread captures into another graph already; end "
              "that capture first");
  TORCH_CHECK(steps_ == nullptr,
              "streamrt.torch.CPUGraph: this graph holds a capture; call reset() before capturing "
              "again");
  const std::uint64_t stream = host() != nullptr ? host()->current_stream_id() : 0;
  TORCH_CHECK(inside_stream_context() && stream != 0,
              "streamrt.torch.CPUGraph: a capture needs this thread inside a stream context (with "
              "torch.cpu.StreamContext(s), after streamrt.torch.install()), in which its ops are "
              "stream work");
  steps_ = std::make_shared<CapturedSteps>();
  stream_id_ = stream;
  capturing_ = true;
  tls_capture = this;
}

void CapturedGraph::end() {
  const std::lock_guard lock(mutex_);
  TORCH_CHECK(capturing_ && tls_capture == this,
              "streamrt.torch.CPUGraph: no capture into this graph is under way on this thread");
  capturing_ = false;
  tls_capture = nullptr;
  unlist();
  if (failed_ || steps_->items.empty()) {
    const bool failed = failed_;
    clear_locked();
    TORCH_CHECK(!failed,
                "streamrt.torch.CPUGraph: an op of the capture could not be recorded (out of "
                "memory), so a replay would miss it; nothing was captured: capture again");
    TORCH_CHECK(false,
                "streamrt.torch.CPUGraph: the capture recorded no op (only ops that are stream "
                "work on the capture's stream are captured)");
  }
  freeze_locked();
}

void CapturedGraph::freeze_locked() {
  auto r = std::make_shared<Replay>();
  r->steps = steps_;
  // (reserved first: the loop moves the trackers out and must not fail halfway)
  r->reads.reserve(accesses_.size());
  r->writes.reserve(accesses_.size());
  r->trackers.reserve(accesses_.size());
  for (auto& [tracker, write] : accesses_) {
    (write ? r->writes : r->reads).push_back(tracker->get());
    r->trackers.push_back(std::move(tracker));
  }
  r->tensors = std::move(tensors_);
  clear_recorded();
  replay_ = std::move(r);
}

void CapturedGraph::abort() noexcept {
  const std::lock_guard lock(mutex_);
  clear_locked();
}

void CapturedGraph::clear_locked() noexcept {
  if (capturing_ && tls_capture == this) tls_capture = nullptr;
  capturing_ = false;
  failed_ = false;
  unlist();
  steps_.reset();
  replay_.reset();
  clear_recorded();
}

void CapturedGraph::clear_recorded() noexcept {
  accesses_.clear();
  access_at_.clear();
  tensors_.clear();
  tensor_seen_.clear();
}

void CapturedGraph::reset() {
  const std::lock_guard lock(mutex_);
  TORCH_CHECK(!capturing_, "streamrt.torch.CPUGraph: reset() during its capture");
  clear_locked();
}

std::size_t CapturedGraph::size() const {
  const std::lock_guard lock(mutex_);
  return steps_ ? steps_->items.size() : 0;
}

bool CapturedGraph::capturing() const {
  const std::lock_guard lock(mutex_);
  return capturing_;
}

void CapturedGraph::unlist() noexcept {
  for (ReuseTicket* t : tickets_) free_reusable(t);
  tickets_.clear();
  created_.clear();
}

void CapturedGraph::list_for_reuse(const Prepared& item) {
  c10::SmallVector<const c10::Storage*, 8> made;
  for (const LaterAlias& a : item.later) {
    const c10::StorageImpl* impl = a.storage.unsafeGetStorageImpl();
    if (created_.count(impl) != 0) {
      made.push_back(&a.storage);
    }
  }
  if (made.empty()) return;
  tickets_.reserve(tickets_.size() + 1);  // (so that the push below cannot lose the ticket)
  if (ReuseTicket* t = list_reusable(made.data(), made.size(), stream_id_)) tickets_.push_back(t);
}

void CapturedGraph::record(PreparedPtr item,
                           const std::vector<std::pair<TrackerPtr, bool>>& accesses,
                           const std::vector<at::Tensor>& outs,
                           const std::vector<at::Tensor>& tensors) {
  const std::lock_guard lock(mutex_);
  if (failed_) return;  // (the capture ends with an error; what it holds is never replayed)
  try {
    if (g_fail_next_record.exchange(false, std::memory_order_relaxed)) throw std::bad_alloc();
    record_locked(std::move(item), accesses, outs, tensors);
  } catch (...) {
    failed_ = true;  // a graph missing part of an op would replay without waiting for it
    throw;
  }
}

void CapturedGraph::fail_next_record_for_testing() noexcept {
  g_fail_next_record.store(true, std::memory_order_relaxed);  // (a switch: no order needed)
}

void CapturedGraph::record_locked(PreparedPtr item,
                                  const std::vector<std::pair<TrackerPtr, bool>>& accesses,
                                  const std::vector<at::Tensor>& outs,
                                  const std::vector<at::Tensor>& tensors) {
  for (const at::Tensor& o : outs) created_.insert(o.storage().unsafeGetStorageImpl());
  list_for_reuse(*item);
  steps_->items.push_back(std::move(item));
  for (const auto& [tracker, write] : accesses) {
    const auto [at, added] = access_at_.try_emplace(tracker.get(), accesses_.size());
    if (added) {
      accesses_.emplace_back(tracker, write);
    } else if (write) {
      accesses_[at->second].second = true;  // (a write supersedes the block's earlier reads)
    }
  }
  for (const auto* list : {&outs, &tensors}) {
    for (const at::Tensor& t : *list) add_tensor(t);
  }
}

void CapturedGraph::add_tensor(const at::Tensor& t) {
  if (tensor_seen_.insert(t.unsafeGetTensorImpl()).second) {
    tensors_.emplace_back(t.getIntrusivePtr());
  }
}

std::shared_ptr<const CapturedGraph::Replay> CapturedGraph::take_replay() const {
  const std::lock_guard lock(mutex_);
  TORCH_CHECK(!capturing_, "streamrt.torch.CPUGraph: replay() during its capture");
  TORCH_CHECK(tls_capture == nullptr,
              "streamrt.torch.CPUGraph: replay() during a capture on this thread would not be "
              "captured; replay after the capture ends");
  TORCH_CHECK(replay_ != nullptr,
              "streamrt.torch.CPUGraph: nothing captured; capture with streamrt.torch.graph(g) "
              "first");
  return replay_;
}

void CapturedGraph::replay() {
  // What to enqueue, taken under the lock and enqueued without it: the enqueue may wait for the
  // stream's queue limit, and no other thread must wait on this graph meanwhile.
  const std::shared_ptr<const Replay> r = take_replay();
  TORCH_CHECK(inside_stream_context() && host()->current_stream_id() != 0,
              "streamrt.torch.CPUGraph: replay() needs this thread inside a stream context");
  const Prepared& first = *r->steps->items.front();
  PreparedPtr item(new_prepared(first.op, first.excluded));
  item->steps = r->steps;
  std::string error;
  const TorchEnqueued done =
      host()->enqueue(kReplayLabel, r->reads.data(), r->reads.size(), r->writes.data(),
                      r->writes.size(), item.release(), &error);
  TORCH_CHECK(
      done != TorchEnqueued::kNo,
      "streamrt.torch.CPUGraph: the current stream takes no torch work now (launch-blocking "
      "mode, or a streamrt.graph capture on it)");
  TORCH_CHECK(
      done == TorchEnqueued::kYes,
      "streamrt.torch.CPUGraph: the replay was queued, but recording its accesses failed: ", error);
  for (const WeakTensor& w : r->tensors) {
    if (auto impl = w.lock()) mark(at::Tensor(std::move(impl)));
  }
}

}  // namespace streamrt::python::torch_runner
