#pragma once
// The SVG Gantt chart of Profiler::timeline_svg(): one row per stream, one box per work item.
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "streamrt/profiler.hpp"

namespace streamrt::core {

// A stream's row: its device type and index folded into one number, and its id.
using TimelineRowKey = std::pair<int, std::uint64_t>;

// The chart of `records` (sorted by start), each on the row `row_of(record)` named `names.at(row)`;
// `origin` is the time of an empty chart's axis. Colours tell labels apart (a distinct colour per
// label, however many), and the name column is as wide as the longest stream name. Pure; throws
// only std::bad_alloc.
std::string render_timeline_svg(const std::vector<TraceRecord>& records,
                                 const std::map<TimelineRowKey, std::string>& names,
                                 std::int64_t origin, const std::string& title);

// The row key of a record.
TimelineRowKey timeline_row(const TraceRecord& r) noexcept;

// The fill colour ("#rrggbb") of the i-th distinct label: a 10-colour palette, then hues spread
// by the golden angle at alternating lightness, so no two labels of one chart share a colour.
std::string timeline_colour(std::size_t i);

// Whether dark text reads better than white on `colour` ("#rrggbb").
bool timeline_light_colour(const std::string& colour);

}  // namespace streamrt::core
