#pragma once
//! \file torch_graph.hpp
//! Capture and replay of torch ops on a stream (streamrt.torch.CPUGraph, docs/torch.md, "Graphs:
//! capture and replay"): the work items the fast path enqueues for one thread between begin() and
//! end() are recorded as they are enqueued (they also run as usual), and replay() enqueues all of
//! them again as one work item, on the same tensors, with their accesses tracked as one op's.

#include <ATen/core/Tensor.h>
#include <c10/util/intrusive_ptr.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "torch_output_reuse.hpp"
#include "torch_runner_internal.hpp"

namespace streamrt::python::torch_runner {

//! The work items of a capture as they run again: copies of the items made before their enqueue
//! (so they hold only what a work item holds: no tensor Python sees). Held by the graph and by
//! each queued replay. Immutable once the capture ended.
struct CapturedSteps {
  std::vector<PreparedPtr> items;
};

//! Runs each captured item in order on a copy of it, as a worker runs one op; stops at the first
//! failure, whose message then names the op and its place. Needs no GIL.
bool run_steps(const CapturedSteps& steps, std::string* type, std::string* message);

//! One capture. Thread-safe (one mutex, never held while waiting); the capture itself belongs to
//! the thread that began it.
class CapturedGraph {
 public:
  CapturedGraph() = default;
  ~CapturedGraph();
  CapturedGraph(const CapturedGraph&) = delete;
  CapturedGraph& operator=(const CapturedGraph&) = delete;

  //! Starts recording this thread's fast-path ops on its current stream. Throws c10::Error when
  //! this thread is outside a stream context or already captures, or this graph holds a capture
  //! (reset() first). Never blocks.
  void begin();
  //! Ends this thread's capture into this graph. Throws c10::Error when none is under way or it
  //! recorded no op (the graph is empty again then). Never blocks.
  void end();
  //! Ends the capture, if this thread has one into this graph, and drops what was recorded (the
  //! captured block raised). Never blocks, never throws.
  void abort() noexcept;
  //! Drops the capture (queued replays keep what they run). Throws c10::Error while capturing.
  void reset();
  //! Enqueues the captured work as one item on this thread's current stream: after the queued
  //! writers of what it reads and the writers and readers of what it writes, as any op; host
  //! reads of those tensors wait for it. Throws c10::Error while capturing, when nothing was
  //! captured, or outside a stream context. Never blocks on the work.
  void replay();

  //! Ops recorded.
  std::size_t size() const;
  //! True between begin() and end().
  bool capturing() const;

  //! Records an op the fast path enqueues now: `item`, a copy of its work item made before the
  //! enqueue; its accesses (a tracker and whether the op writes it); its new outputs `outs` and
  //! the tensors it reaches (both marked again after each replay). Throws std::bad_alloc; then,
  //! and for the rest of the capture, records nothing more, and end() throws.
  void record(PreparedPtr item, const std::vector<std::pair<TrackerPtr, bool>>& accesses,
              const std::vector<at::Tensor>& outs, const std::vector<at::Tensor>& tensors);
  //! Tests: the next record() (any graph's) throws std::bad_alloc, as when out of memory. Never
  //! blocks; thread-safe.
  static void fail_next_record_for_testing() noexcept;
  //! The stream this graph captures on (host()->current_stream_id() at begin()); constant
  //! during the capture.
  std::uint64_t stream_id() const noexcept { return stream_id_; }

 private:
  using WeakTensor = c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>;

  // Guards the members below (the capturing thread also reads stream_id_, which it wrote, without
  // it).
  mutable std::mutex mutex_;
  std::shared_ptr<CapturedSteps> steps_;
  // While capturing (then frozen into replay_): each tracker the block reached, once, in the order
  // first reached, and whether the block wrote it; the tensors to mark after a replay, weak, so
  // the graph never keeps a Python tensor alive (the work items keep the memory). Each with an
  // index, so that recording an op costs the same however long the capture already is (the weak
  // references keep the TensorImpls' addresses from being reused meanwhile).
  std::vector<std::pair<TrackerPtr, bool>> accesses_;
  std::unordered_map<const Tracker*, std::size_t> access_at_;
  std::vector<WeakTensor> tensors_;
  std::unordered_set<const c10::TensorImpl*> tensor_seen_;
  // The storages of the outputs the captured ops made (held by the recorded items), and the
  // listings of the recorded items' holds on them (below), given up when the capture ends.
  std::unordered_set<const c10::StorageImpl*> created_;
  std::vector<ReuseTicket*> tickets_;
  std::uint64_t stream_id_ = 0;
  bool capturing_ = false;
  // An op of the capture could not be recorded: end() refuses the capture.
  bool failed_ = false;

  // Lists the recorded item's holds on storages made in the capture for reuse by later outputs of
  // the capture (as the queued op's own are): a replay runs the items in the capture's order, so
  // the memory of a temporary that no later item and no tensor still holds may take a later
  // output, as it does in the captured run. Memory made before the capture is never handed on (a
  // replay reads it again).
  void list_for_reuse(const Prepared& item);
  // Ends a capture of this thread's and drops everything (abort(), reset()).
  void clear_locked() noexcept;
  // Drops the accesses and tensors recorded (frozen into replay_ or given up).
  void clear_recorded() noexcept;
  // record() under mutex_.
  void record_locked(PreparedPtr item, const std::vector<std::pair<TrackerPtr, bool>>& accesses,
                     const std::vector<at::Tensor>& outs, const std::vector<at::Tensor>& tensors);
  void unlist() noexcept;
  // Notes `t` for marking after replays (once per TensorImpl).
  void add_tensor(const at::Tensor& t);

  // What every replay enqueues and marks, made once when the capture ends and shared by the
  // replays under way (the trackers alive through their enqueues).
  struct Replay {
    std::shared_ptr<CapturedSteps> steps;
    std::vector<TrackerPtr> trackers;
    std::vector<const void*> reads;  // (their handles, as the enqueue takes them)
    std::vector<const void*> writes;
    std::vector<WeakTensor> tensors;
  };
  std::shared_ptr<const Replay> replay_;  // set by end(), until reset()

  // Checks that a replay may be enqueued now; what it enqueues. Throws c10::Error.
  std::shared_ptr<const Replay> take_replay() const;
  // Under mutex_: replay_ from what the capture recorded.
  void freeze_locked();
};

//! The graph this thread captures into, or null. Never blocks.
CapturedGraph* capturing() noexcept;

}  // namespace streamrt::python::torch_runner
