#pragma once
// The SVG Gantt chart of a profiler's records: one row per stream, one labelled box per work item,
// a time axis in ms. The library exports the records and the Chrome trace (streamrt::Profiler);
// the chart is drawn here, for the streamrt tool's demo and the Python package's
// Profiler.timeline_svg(). Not installed.
#include <string>

#include "streamrt/profiler.hpp"

namespace streamrt_timeline {

// The chart of the records `profiler` collected so far, with `title` on top. Streams named with
// Profiler::name_stream() show that name, the others "cpu:0 stream 3" (with their priority when
// it is not 0). Colours tell labels apart (a distinct colour per label, however many), and the
// name column is as wide as the longest stream name. Never blocks on stream work; throws only
// std::bad_alloc.
std::string timeline_svg(const streamrt::Profiler& profiler,
                         const std::string& title = "streamrt timeline");

// Writes timeline_svg(profiler, title) to `path`. Throws streamrt::Error naming the path when it
// cannot be written.
void export_timeline_svg(const streamrt::Profiler& profiler, const std::string& path,
                         const std::string& title = "streamrt timeline");

}  // namespace streamrt_timeline
