// Capturing into a Graph: the Stream calls that begin and end a capture, and GraphCapture. The
// capture mechanism on the streams is core's (core/capture_state.hpp); a Graph is what it records
// into.
#include <exception>

#include "graph_access.hpp"
#include "streamrt/graph.hpp"
#include "streamrt/stream.hpp"

namespace streamrt {

void Stream::begin_capture(CaptureMode mode) {
  checked("begin_capture");
  Graph g;
  begin_capture(g, mode);
}

void Stream::begin_capture(Graph& graph, CaptureMode mode) {
  checked("begin_capture");
  capture::begin(impl(), detail::GraphAccess::data(graph), mode);
}

Graph Stream::end_capture() {
  return detail::GraphAccess::wrap(
      std::static_pointer_cast<detail::GraphData>(capture::end(checked("end_capture"))));
}

GraphCapture::GraphCapture(Stream& stream, Graph& graph, CaptureMode mode)
    : stream_(stream), exceptions_(std::uncaught_exceptions()) {
  stream_.begin_capture(graph, mode);
}

GraphCapture::~GraphCapture() noexcept(false) {
  if (std::uncaught_exceptions() > exceptions_) {
    // Leaving by an exception: end the capture, report nothing more (the first error wins).
    try {
      stream_.end_capture();
    } catch (...) {
    }
    return;
  }
  stream_.end_capture();
}

}  // namespace streamrt
