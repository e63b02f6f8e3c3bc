#pragma once
//! \file graph.hpp
//! Stream capture and graph replay (CUDA Graphs on CPU streams). See docs/graphs.md for the rules.

#include <cstddef>
#include <memory>
#include <string>
#include <utility>

#include "streamrt/stream.hpp"

namespace streamrt {

namespace detail {
struct GraphData;
struct ExecData;
struct GraphAccess;
}  // namespace detail

class GraphExec;

//! A graph of work captured from streams: nodes (launched callables and ops) and the edges
//! between them (stream order, event waits, dependency tracking). A handle: copies share the
//! graph. Thread-safe to read; filled by one capture at a time.
class STREAMRT_API Graph {
 public:
  //! A new, empty graph. Never blocks.
  Graph();

  //! Number of nodes (launches and ops captured). Never blocks; thread-safe.
  std::size_t num_nodes() const;
  //! Number of dependency edges between nodes. Never blocks; thread-safe.
  std::size_t num_edges() const;
  //! True when no node was captured. Never blocks; thread-safe.
  bool empty() const { return num_nodes() == 0; }

  //! The graph in Graphviz DOT form (one node per capture, labelled with its label and the
  //! stream it was captured on), for debugging. Never blocks; thread-safe.
  std::string to_dot() const;

  //! An executable snapshot of the graph: later changes to this graph do not affect it. Throws
  //! Error while the graph is being captured into. Never blocks; thread-safe.
  GraphExec instantiate() const;

  //! Drops every node (and with them the callables and the memory they hold). Throws Error while
  //! the graph is being captured into. Never blocks.
  void clear();

 private:
  friend struct detail::GraphAccess;
  explicit Graph(std::shared_ptr<detail::GraphData> d) noexcept : data_(std::move(d)) {}
  std::shared_ptr<detail::GraphData> data_;
};

//! An instantiated graph that can be launched (replayed) on streams, many times. A handle: copies
//! share it. Methods are thread-safe.
class STREAMRT_API GraphExec {
 public:
  //! Enqueues one replay of the graph on `stream`, after the work submitted to it so far, and
  //! after any earlier launch of this exec (launches of one exec never overlap). The nodes run in
  //! the graph's order: a chain inline, independent branches in parallel on the worker pool.
  //! A node that throws fails the replay as a throwing item fails its stream. Returns at once.
  //! Throws Error when `stream` is capturing.
  void launch(const Stream& stream);
  //! launch(current_stream()).
  void launch();

  //! Replaces the callables of this exec by those of `g`, which must have the same topology
  //! (same node count, same dependencies of each node, in capture order); as
  //! cudaGraphExecUpdate. Throws Error naming the first difference otherwise (nothing changes
  //! then). Applies to launches made after the call. Thread-safe; never blocks.
  void update(const Graph& g);

  //! Number of nodes. Never blocks.
  std::size_t num_nodes() const;

 private:
  friend struct detail::GraphAccess;
  explicit GraphExec(std::shared_ptr<detail::ExecData> d) noexcept : data_(std::move(d)) {}
  std::shared_ptr<detail::ExecData> data_;
};

//! RAII capture: begins capturing `stream` into `graph` (stream.begin_capture(graph, mode)) and
//! ends it on destruction. If the scope is left by an exception, the capture is ended and its
//! graph discarded without throwing; otherwise the destructor throws what end_capture throws
//! (unjoined streams, an invalidated capture). Use on one thread.
class STREAMRT_API GraphCapture {
 public:
  //! Begins the capture. Throws Error if `stream` is already capturing.
  GraphCapture(Stream& stream, Graph& graph, CaptureMode mode = CaptureMode::Global);
  //! Ends the capture (see the class comment).
  ~GraphCapture() noexcept(false);
  GraphCapture(const GraphCapture&) = delete;
  GraphCapture& operator=(const GraphCapture&) = delete;

 private:
  Stream stream_;
  int exceptions_;
};

}  // namespace streamrt
