#pragma once
//! \file profiler.hpp
//! Tracing of stream work: which stream ran what (op name or launch label), when it was enqueued,
//! started and ended, and on which worker. Export as Chrome trace-event JSON (Perfetto,
//! chrome://tracing; one track per stream), or read the records (the `streamrt` tool draws them
//! as an SVG Gantt chart). While no profiler runs, the cost per work item is one relaxed atomic
//! load.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "streamrt/device.hpp"
#include "streamrt/export.hpp"
#include "streamrt/stream.hpp"

namespace streamrt {

//! One work item that ran on a stream while a profiler was running.
struct TraceRecord {
  //! Device of the stream.
  Device device;
  //! Stream id (0 = default stream).
  std::uint64_t stream_id = 0;
  //! Stream priority.
  int stream_priority = 0;
  //! Op name ("matmul", "add", ...), the label given to Stream::launch, or "launch".
  std::string label;
  //! Monotonic clock, ns: when the item was enqueued, started and ended.
  std::int64_t enqueue_ns = 0;
  //! Start of the item (ns, same clock).
  std::int64_t start_ns = 0;
  //! End of the item (ns, same clock).
  std::int64_t end_ns = 0;
  //! Worker index that ran it; -1 for a host thread (a waiter that ran it, or process exit).
  int worker = -1;
};

//! Records every work item enqueued (on any stream, by any thread) between start() and stop().
//! One profiler runs at a time. Methods are thread-safe; none waits for stream work.
class STREAMRT_API Profiler {
 public:
  //! A stopped profiler with no records. Never blocks.
  Profiler();
  //! Stops it if running. noexcept.
  ~Profiler();
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  //! Starts recording (clearing earlier records). Throws Error when another profiler is running.
  void start();
  //! Stops recording and collects the records of items that have finished; items still running
  //! are collected by a later records()/export call. Never blocks on stream work.
  void stop();
  //! True between start() and stop().
  bool running() const noexcept;

  //! Shows `stream` as `name` in exports (instead of "stream <id>"). Never blocks.
  void name_stream(const Stream& stream, std::string name);

  //! Records collected so far (collects finished items first), sorted by start time.
  std::vector<TraceRecord> records() const;
  //! Drops the records.
  void clear();

  //! Chrome trace-event JSON of the records: one "X" event per item, one track (tid) per stream,
  //! timestamps in microseconds since start().
  std::string chrome_trace_json() const;
  //! Writes chrome_trace_json() to `path`. Throws Error naming the path when it cannot be written.
  void export_chrome_trace(const std::string& path) const;
  //! The name name_stream() gave the stream of `record`; empty when it was given none. Never
  //! blocks.
  std::string stream_name(const TraceRecord& record) const;
  //! When start() was last called, in the records' clock (steady_clock, ns); 0 before. Never
  //! blocks.
  std::int64_t start_ns() const;

 private:
  void collect() const;
  struct State;
  std::unique_ptr<State> state_;
};

//! Starts `profiler` for the scope and stops it on exit (also by exception). Not copyable.
class ProfilerGuard {
 public:
  //! Calls profiler.start(); throws as start().
  explicit ProfilerGuard(Profiler& profiler) : profiler_(profiler) { profiler_.start(); }
  //! Calls profiler.stop().
  ~ProfilerGuard() { profiler_.stop(); }
  ProfilerGuard(const ProfilerGuard&) = delete;
  ProfilerGuard& operator=(const ProfilerGuard&) = delete;

 private:
  Profiler& profiler_;
};

}  // namespace streamrt
