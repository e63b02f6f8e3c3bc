// The SVG Gantt chart of a profiler's records (timeline_svg.hpp).
#include "timeline_svg.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <utility>
#include <vector>

#include "streamrt/error.hpp"
#include "support/escape.hpp"

namespace streamrt_timeline {
namespace {

using streamrt::TraceRecord;
using streamrt::detail::xml_escape;

// A stream's row: its device type and index folded into one number, and its id.
using TimelineRowKey = std::pair<int, std::uint64_t>;

// Text is 12 px DejaVu Sans (or Arial): 7.5 px is a generous average advance, so a column sized
// with it holds its text.
constexpr double kCharW = 7.5;
constexpr double kTop = 56, kRowH = 34, kBoxH = 24, kRight = 30, kPlotW = 980;
constexpr double kMinLeft = 190, kMinLegendCol = 160;
// Longer stream names and labels are shortened with an ellipsis; the full text is the tooltip.
constexpr std::size_t kMaxText = 80;

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

// Characters, counting a UTF-8 sequence as one.
std::size_t text_length(const std::string& s) {
  return static_cast<std::size_t>(
      std::count_if(s.begin(), s.end(), [](char c) { return (c & 0xC0) != 0x80; }));
}

// `s` cut to kMaxText characters (at a UTF-8 boundary) with an ellipsis; escaped for XML, with the
// full text as a tooltip when cut.
std::string svg_text(const std::string& s) {
  if (text_length(s) <= kMaxText) return xml_escape(s);
  std::size_t bytes = 0;
  for (std::size_t chars = 0; bytes < s.size(); ++bytes) {
    if ((s[bytes] & 0xC0) != 0x80 && chars++ == kMaxText - 1) break;
  }
  return "<title>" + xml_escape(s) + "</title>" + xml_escape(s.substr(0, bytes)) + "\u2026";
}

double text_width(const std::string& s) {
  return kCharW * static_cast<double>(std::min(text_length(s), kMaxText));
}

// The row key of a record.
TimelineRowKey timeline_row(const TraceRecord& r) noexcept {
  return {static_cast<int>(r.device.type) * 1000 + r.device.index, r.stream_id};
}

// The fill colour ("#rrggbb") of the i-th distinct label: a 10-colour palette, then hues spread
// by the golden angle at alternating lightness, so no two labels of one chart share a colour.
std::string timeline_colour(std::size_t i) {
  static const char* kPalette[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2",
                                   "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
  constexpr std::size_t kN = sizeof kPalette / sizeof kPalette[0];
  if (i < kN) return kPalette[i];
  // HSL to RGB, hue by the golden angle: consecutive labels land far apart on the wheel.
  const double h = std::fmod(static_cast<double>(i - kN) * 137.508 + 20.0, 360.0) / 60.0;
  const double light = (i - kN) % 2 == 0 ? 0.42 : 0.62, sat = 0.6;
  const double c = (1 - std::fabs(2 * light - 1)) * sat;
  const double x = c * (1 - std::fabs(std::fmod(h, 2.0) - 1));
  const double m = light - c / 2;
  double r = 0, g = 0, b = 0;
  switch (static_cast<int>(h)) {
    case 0:
      r = c, g = x;
      break;
    case 1:
      r = x, g = c;
      break;
    case 2:
      g = c, b = x;
      break;
    case 3:
      g = x, b = c;
      break;
    case 4:
      r = x, b = c;
      break;
    default:
      r = c, b = x;
      break;
  }
  char buf[8];
  auto byte = [&](double v) { return static_cast<unsigned>(std::lround((v + m) * 255)); };
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", byte(r), byte(g), byte(b));
  return buf;
}

// Whether dark text reads better than white on `colour` ("#rrggbb").
bool timeline_light_colour(const std::string& colour) {
  unsigned r = 0, g = 0, b = 0;
  if (std::sscanf(colour.c_str(), "#%02x%02x%02x", &r, &g, &b) != 3) return false;
  return 0.2126 * r + 0.7152 * g + 0.0722 * b > 0.6 * 255;
}

struct Layout {
  double left = kMinLeft, width = 0, axis_y = 0, legend_y = 0, height = 0;
  double legend_col = kMinLegendCol;
  std::size_t legend_cols = 1;
  std::int64_t t0 = 0;
  double span_ms = 1e-3;
  double x_of(std::int64_t ns) const {
    return left + kPlotW * (static_cast<double>(ns - t0) / 1e6) / span_ms;
  }
};

Layout layout(const std::vector<TraceRecord>& recs, const std::map<TimelineRowKey, int>& rows,
              const std::map<TimelineRowKey, std::string>& names,
              const std::vector<std::string>& labels, std::int64_t origin) {
  Layout l;
  for (const auto& [key, row] : rows) l.left = std::max(l.left, text_width(names.at(key)) + 24);
  l.width = l.left + kPlotW + kRight;
  for (const auto& label : labels) l.legend_col = std::max(l.legend_col, text_width(label) + 34);
  l.legend_cols =
      std::max<std::size_t>(1, static_cast<std::size_t>((l.width - l.left) / l.legend_col));
  l.axis_y = kTop + static_cast<double>(std::max<std::size_t>(1, rows.size())) * kRowH + 6;
  l.legend_y = l.axis_y + 44;
  const auto legend_rows = (labels.size() + l.legend_cols - 1) / l.legend_cols;
  l.height = l.legend_y + static_cast<double>(legend_rows) * 22 + 16;
  std::int64_t t1 = recs.empty() ? origin : recs.front().start_ns;
  l.t0 = t1;
  for (const auto& r : recs) {
    l.t0 = std::min(l.t0, r.start_ns);
    t1 = std::max(t1, r.end_ns);
  }
  l.span_ms = std::max(1e-3, static_cast<double>(t1 - l.t0) / 1e6);
  return l;
}

// Time axis with a 1-2-5 step giving about 10 ticks, and its caption.
void write_axis(std::ostringstream& o, const Layout& l) {
  const double raw_step = l.span_ms / 10;
  const double mag = std::pow(10.0, std::floor(std::log10(raw_step)));
  const double step = raw_step / mag < 2 ? 2 * mag : raw_step / mag < 5 ? 5 * mag : 10 * mag;
  for (double t = 0; t <= l.span_ms + 1e-9; t += step) {
    const double x = l.left + kPlotW * t / l.span_ms;
    o << "<line x1=\"" << fmt("%.1f", x) << "\" y1=\"" << kTop - 4 << "\" x2=\"" << fmt("%.1f", x)
      << "\" y2=\"" << l.axis_y << "\" stroke=\"#ddd\"/>\n";
    o << "<text x=\"" << fmt("%.1f", x) << "\" y=\"" << l.axis_y + 16
      << "\" text-anchor=\"middle\" fill=\"#333\">"
      << fmt(step < 0.01 ? "%.3f"
             : step < 1  ? "%.2f"
                         : "%.0f",
             t)
      << "</text>\n";
  }
  o << "<line x1=\"" << l.left << "\" y1=\"" << l.axis_y << "\" x2=\"" << l.left + kPlotW
    << "\" y2=\"" << l.axis_y << "\" stroke=\"#333\"/>\n";
  o << "<text x=\"" << l.left + kPlotW / 2 << "\" y=\"" << l.axis_y + 34
    << "\" text-anchor=\"middle\" fill=\"#333\">time since first item (ms)</text>\n";
}

void write_rows(std::ostringstream& o, const Layout& l, const std::map<TimelineRowKey, int>& rows,
                const std::map<TimelineRowKey, std::string>& names) {
  for (const auto& [key, row] : rows) {
    const double y = kTop + row * kRowH;
    o << "<rect x=\"" << l.left << "\" y=\"" << y << "\" width=\"" << kPlotW << "\" height=\""
      << kRowH << "\" fill=\"" << (row % 2 ? "#f7f7f7" : "#ffffff") << "\"/>\n";
    o << "<text x=\"" << l.left - 8 << "\" y=\"" << y + kRowH / 2 + 4
      << "\" text-anchor=\"end\" fill=\"#222\">" << svg_text(names.at(key)) << "</text>\n";
  }
}

void write_items(std::ostringstream& o, const Layout& l, const std::vector<TraceRecord>& recs,
                 const std::map<TimelineRowKey, int>& rows,
                 const std::map<TimelineRowKey, std::string>& names,
                 const std::map<std::string, std::string>& colour) {
  for (const auto& r : recs) {
    const auto key = timeline_row(r);
    const double y = kTop + rows.at(key) * kRowH + (kRowH - kBoxH) / 2;
    const double x = l.x_of(r.start_ns);
    const double w = std::max(0.8, l.x_of(r.end_ns) - x);
    const std::string& fill = colour.at(r.label);
    o << "<g><title>" << xml_escape(r.label) << " on " << xml_escape(names.at(key)) << ": "
      << fmt("%.3f", static_cast<double>(r.start_ns - l.t0) / 1e6) << " - "
      << fmt("%.3f", static_cast<double>(r.end_ns - l.t0) / 1e6) << " ms ("
      << fmt("%.3f", static_cast<double>(r.end_ns - r.start_ns) / 1e6) << " ms), worker "
      << r.worker << ", queued "
      << fmt("%.3f", static_cast<double>(r.start_ns - r.enqueue_ns) / 1e6) << " ms</title>";
    o << "<rect x=\"" << fmt("%.2f", x) << "\" y=\"" << y << "\" width=\"" << fmt("%.2f", w)
      << "\" height=\"" << kBoxH << "\" rx=\"2\" fill=\"" << fill
      << "\" stroke=\"#222\" stroke-width=\"0.4\"/>";
    // The label inside the box when it fits, in a colour that reads on the fill.
    if (w > text_width(r.label) + 6 && text_length(r.label) <= kMaxText) {
      o << "<text x=\"" << fmt("%.2f", x + w / 2) << "\" y=\"" << y + kBoxH / 2 + 4
        << "\" text-anchor=\"middle\" fill=\"" << (timeline_light_colour(fill) ? "#222" : "white")
        << "\">" << xml_escape(r.label) << "</text>";
    }
    o << "</g>\n";
  }
}

void write_legend(std::ostringstream& o, const Layout& l, const std::vector<std::string>& labels,
                  const std::map<std::string, std::string>& colour) {
  for (std::size_t i = 0; i < labels.size(); ++i) {
    const double x = l.left + static_cast<double>(i % l.legend_cols) * l.legend_col;
    const double y = l.legend_y + static_cast<double>(i / l.legend_cols) * 22;
    o << "<rect x=\"" << x << "\" y=\"" << y << "\" width=\"14\" height=\"14\" fill=\""
      << colour.at(labels[i]) << "\" stroke=\"#222\" stroke-width=\"0.4\"/><text x=\"" << x + 20
      << "\" y=\"" << y + 12 << "\">" << svg_text(labels[i]) << "</text>\n";
  }
}

// The chart of `recs` (sorted by start), each on the row of its stream named `names.at(row)`;
// `origin` is the time of an empty chart's axis.
std::string render(const std::vector<TraceRecord>& recs,
                   const std::map<TimelineRowKey, std::string>& names, std::int64_t origin,
                   const std::string& title) {
  std::map<TimelineRowKey, int> rows;  // row index by stream, in id order
  for (const auto& r : recs) rows.emplace(timeline_row(r), 0);
  int index = 0;
  for (auto& [key, row] : rows) row = index++;
  std::vector<std::string> labels;  // in order of first appearance
  std::map<std::string, std::string> colour;
  for (const auto& r : recs) {
    if (colour.emplace(r.label, timeline_colour(labels.size())).second) labels.push_back(r.label);
  }
  const Layout l = layout(recs, rows, names, labels, origin);

  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << fmt("%.0f", l.width)
    << "\" height=\"" << fmt("%.0f", l.height) << "\" viewBox=\"0 0 " << fmt("%.0f", l.width) << " "
    << fmt("%.0f", l.height)
    << "\" font-family=\"DejaVu Sans, Arial, sans-serif\" font-size=\"12\">\n";
  o << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  o << "<text x=\"" << l.left << "\" y=\"24\" font-size=\"16\" font-weight=\"bold\">"
    << xml_escape(title) << "</text>\n";
  o << "<text x=\"" << l.left << "\" y=\"42\" fill=\"#555\">" << recs.size() << " items on "
    << rows.size() << " streams, " << fmt("%.2f", l.span_ms)
    << " ms (boxes: work items, one colour per label; hover for details)</text>\n";
  write_axis(o, l);
  write_rows(o, l, rows, names);
  write_items(o, l, recs, rows, names, colour);
  write_legend(o, l, labels, colour);
  o << "</svg>\n";
  return o.str();
}

}  // namespace

std::string timeline_svg(const streamrt::Profiler& profiler, const std::string& title) {
  const auto recs = profiler.records();
  // Every row's name: the given one, else "cpu:0 stream 3".
  std::map<TimelineRowKey, std::string> rows;
  for (const auto& r : recs) {
    const auto key = timeline_row(r);
    if (rows.count(key) != 0) continue;
    std::string name = profiler.stream_name(r);
    if (name.empty()) {
      name = r.device.str() +
             (r.stream_id == 0 ? " default stream" : " stream " + std::to_string(r.stream_id));
      if (r.stream_priority != 0) name += " (prio " + std::to_string(r.stream_priority) + ")";
    }
    rows.emplace(key, std::move(name));
  }
  return render(recs, rows, profiler.start_ns(), title);
}

void export_timeline_svg(const streamrt::Profiler& profiler, const std::string& path,
                         const std::string& title) {
  const std::string text = timeline_svg(profiler, title);
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw streamrt::Error("export_timeline_svg: cannot open '" + path + "' for writing");
  f << text;
  f.close();
  if (!f) throw streamrt::Error("export_timeline_svg: writing '" + path + "' failed");
}

}  // namespace streamrt_timeline
