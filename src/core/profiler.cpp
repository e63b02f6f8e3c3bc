// Profiler: sessions over the runtime's trace buffers (fed by every backend through the trace
// hook, impl/backend.hpp), Chrome trace JSON and SVG timelines.
#include "streamrt/profiler.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>

#include "streamrt/detail/escape.hpp"
#include "streamrt/error.hpp"
#include "trace.hpp"

namespace streamrt {
namespace {

using detail::json_escape;
using detail::xml_escape;

// Which profiler owns the trace buffers now; sessions count up so that an old profiler never
// drains records that belong to a newer one.
std::mutex g_session_mutex;
const void* g_active = nullptr;      // guarded by g_session_mutex
std::uint64_t g_latest_session = 0;  // guarded by g_session_mutex

// The clock of trace items (impl::TraceItem): steady_clock, in nanoseconds.
std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

void write_file(const std::string& path, const std::string& text, const char* what) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw Error(std::string(what) + ": cannot open '" + path + "' for writing");
  f << text;
  f.close();
  if (!f) throw Error(std::string(what) + ": writing '" + path + "' failed");
}

// Identifies a stream across devices, ordered for maps.
using StreamKey = std::pair<int, std::uint64_t>;
StreamKey key_of(const Device& d, std::uint64_t id) {
  return {static_cast<int>(d.type) * 1000 + d.index, id};
}

std::string stream_name(const TraceRecord& r) {
  std::string name = r.stream_id == 0 ? "default stream" : "stream " + std::to_string(r.stream_id);
  if (r.stream_priority != 0) name += " (prio " + std::to_string(r.stream_priority) + ")";
  return name;
}

}  // namespace

struct Profiler::State {
  mutable std::mutex mutex;
  bool running = false;                    // guarded by mutex
  std::uint64_t session = 0;               // guarded by mutex
  std::int64_t start_ns = 0;               // guarded by mutex
  std::int64_t stop_ns = 0;                // guarded by mutex; 0 while running
  std::vector<TraceRecord> records;        // guarded by mutex
  std::map<StreamKey, std::string> names;  // guarded by mutex
};

Profiler::Profiler() : state_(std::make_unique<State>()) {}

Profiler::~Profiler() {
  try {
    stop();
  } catch (...) {
    // stop() only throws on allocation failure; nothing left to report to.
  }
}

void Profiler::start() {
  std::lock_guard session_lock(g_session_mutex);
  if (g_active != nullptr && g_active != this) {
    throw Error("Profiler::start: another profiler is running; stop it first (one at a time)");
  }
  std::lock_guard lock(state_->mutex);
  if (state_->running) return;
  core::tracing_collect();  // drop leftovers of earlier sessions
  state_->session = ++g_latest_session;
  state_->start_ns = now_ns();
  state_->stop_ns = 0;
  state_->records.clear();
  state_->running = true;
  g_active = this;
  core::tracing_start();
}

void Profiler::stop() {
  {
    std::lock_guard session_lock(g_session_mutex);
    std::lock_guard lock(state_->mutex);
    if (!state_->running) return;
    core::tracing_stop();
    state_->running = false;
    state_->stop_ns = now_ns();
    g_active = nullptr;
  }
  collect();
}

void Profiler::name_stream(const Stream& stream, std::string name) {
  std::lock_guard lock(state_->mutex);
  state_->names[key_of(stream.device(), stream.id())] = std::move(name);
}

bool Profiler::running() const noexcept {
  std::lock_guard lock(state_->mutex);
  return state_->running;
}

void Profiler::collect() const {
  std::lock_guard session_lock(g_session_mutex);
  std::lock_guard lock(state_->mutex);
  if (state_->session == 0 || state_->session != g_latest_session) return;
  for (const auto& raw : core::tracing_collect()) {
    if (raw.enqueue_ns < state_->start_ns) continue;
    if (state_->stop_ns != 0 && raw.enqueue_ns > state_->stop_ns) continue;
    state_->records.push_back(TraceRecord{raw.device, raw.stream_id, raw.priority, raw.label,
                                          raw.enqueue_ns, raw.start_ns, raw.end_ns, raw.worker});
  }
}

std::vector<TraceRecord> Profiler::records() const {
  collect();
  std::lock_guard lock(state_->mutex);
  auto out = state_->records;
  std::stable_sort(out.begin(), out.end(), [](const TraceRecord& a, const TraceRecord& b) {
    return a.start_ns < b.start_ns;
  });
  return out;
}

void Profiler::clear() {
  collect();
  std::lock_guard lock(state_->mutex);
  state_->records.clear();
}

std::string Profiler::chrome_trace_json() const {
  const auto recs = records();
  std::int64_t origin;
  std::map<StreamKey, std::string> names;
  {
    std::lock_guard lock(state_->mutex);
    origin = state_->start_ns;
    names = state_->names;
  }
  auto name_of = [&](const TraceRecord& r) {
    auto it = names.find(key_of(r.device, r.stream_id));
    return it != names.end() ? it->second : stream_name(r);
  };
  auto pid_of = [](const Device& d) { return static_cast<int>(d.type) * 1000 + d.index + 1; };
  std::ostringstream o;
  o << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[";
  bool first = true;
  auto sep = [&] {
    if (!first) o << ",\n";
    first = false;
  };
  std::set<std::pair<int, std::uint64_t>> tracks;
  std::set<int> processes;
  for (const auto& r : recs) {
    const int pid = pid_of(r.device);
    if (processes.insert(pid).second) {
      sep();
      o << "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" << pid
        << ",\"args\":{\"name\":\"streamrt " << r.device.str() << "\"}}";
    }
    if (tracks.insert({pid, r.stream_id}).second) {
      sep();
      o << "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" << pid
        << ",\"tid\":" << r.stream_id + 1 << ",\"args\":{\"name\":\"" << json_escape(name_of(r))
        << "\"}}";
      sep();
      o << "{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":" << pid
        << ",\"tid\":" << r.stream_id + 1 << ",\"args\":{\"sort_index\":" << r.stream_id << "}}";
    }
    sep();
    o << "{\"name\":\"" << json_escape(r.label) << "\",\"cat\":\"stream\",\"ph\":\"X\",\"ts\":"
      << fmt("%.3f", static_cast<double>(r.start_ns - origin) / 1e3)
      << ",\"dur\":" << fmt("%.3f", static_cast<double>(r.end_ns - r.start_ns) / 1e3)
      << ",\"pid\":" << pid << ",\"tid\":" << r.stream_id + 1
      << ",\"args\":{\"worker\":" << r.worker
      << ",\"queued_us\":" << fmt("%.3f", static_cast<double>(r.start_ns - r.enqueue_ns) / 1e3)
      << "}}";
  }
  o << "]}\n";
  return o.str();
}

void Profiler::export_chrome_trace(const std::string& path) const {
  write_file(path, chrome_trace_json(), "Profiler::export_chrome_trace");
}

std::string Profiler::timeline_svg(const std::string& title) const {
  const auto recs = records();
  std::int64_t origin;
  std::map<StreamKey, std::string> names;
  {
    std::lock_guard lock(state_->mutex);
    origin = state_->start_ns;
    names = state_->names;
  }
  auto name_of = [&](const TraceRecord& r) {
    auto it = names.find(key_of(r.device, r.stream_id));
    return it != names.end() ? it->second : r.device.str() + " " + stream_name(r);
  };
  // Rows: one per stream, in id order.
  std::map<std::pair<int, std::uint64_t>, std::pair<int, std::string>> rows;
  for (const auto& r : recs) {
    rows.emplace(
        std::make_pair(static_cast<int>(r.device.type) * 1000 + r.device.index, r.stream_id),
        std::make_pair(0, name_of(r)));
  }
  int row_index = 0;
  for (auto& [key, row] : rows) row.first = row_index++;
  std::int64_t t0 = recs.empty() ? origin : recs.front().start_ns, t1 = t0;
  for (const auto& r : recs) {
    t0 = std::min(t0, r.start_ns);
    t1 = std::max(t1, r.end_ns);
  }
  const double span_ms = std::max(1e-3, static_cast<double>(t1 - t0) / 1e6);

  constexpr double kLeft = 190, kRight = 30, kTop = 56, kRowH = 34, kBoxH = 24, kWidth = 1200;
  const double plot_w = kWidth - kLeft - kRight;
  const int nrows = std::max(1, row_index);
  // Legend: one swatch per distinct label.
  std::vector<std::string> labels;
  for (const auto& r : recs) {
    if (std::find(labels.begin(), labels.end(), r.label) == labels.end()) labels.push_back(r.label);
  }
  const double axis_y = kTop + nrows * kRowH + 6;
  const double legend_y = axis_y + 44;
  const int legend_cols = 6;
  const double height =
      legend_y + (static_cast<double>(labels.size() + legend_cols - 1) / legend_cols) * 22 + 16;
  static const char* kPalette[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2",
                                   "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
  auto color_of = [&](const std::string& label) {
    const auto i =
        static_cast<std::size_t>(std::find(labels.begin(), labels.end(), label) - labels.begin());
    return kPalette[i % (sizeof kPalette / sizeof kPalette[0])];
  };
  auto x_of = [&](std::int64_t ns) {
    return kLeft + plot_w * (static_cast<double>(ns - t0) / 1e6) / span_ms;
  };

  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kWidth << "\" height=\""
    << fmt("%.0f", height) << "\" viewBox=\"0 0 " << kWidth << " " << fmt("%.0f", height)
    << "\" font-family=\"DejaVu Sans, Arial, sans-serif\" font-size=\"12\">\n";
  o << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  o << "<text x=\"" << kLeft << "\" y=\"24\" font-size=\"16\" font-weight=\"bold\">"
    << xml_escape(title) << "</text>\n";
  o << "<text x=\"" << kLeft << "\" y=\"42\" fill=\"#555\">" << recs.size() << " items on "
    << row_index << " streams, " << fmt("%.2f", span_ms)
    << " ms (boxes: work items; hover for details)</text>\n";
  // Time axis with a 1-2-5 step giving about 10 ticks.
  const double raw_step = span_ms / 10;
  const double mag = std::pow(10.0, std::floor(std::log10(raw_step)));
  const double step = raw_step / mag < 2 ? 2 * mag : raw_step / mag < 5 ? 5 * mag : 10 * mag;
  for (double t = 0; t <= span_ms + 1e-9; t += step) {
    const double x = kLeft + plot_w * t / span_ms;
    o << "<line x1=\"" << fmt("%.1f", x) << "\" y1=\"" << kTop - 4 << "\" x2=\"" << fmt("%.1f", x)
      << "\" y2=\"" << axis_y << "\" stroke=\"#ddd\"/>\n";
    o << "<text x=\"" << fmt("%.1f", x) << "\" y=\"" << axis_y + 16
      << "\" text-anchor=\"middle\" fill=\"#333\">"
      << fmt(step < 0.01 ? "%.3f"
             : step < 1  ? "%.2f"
                         : "%.0f",
             t)
      << "</text>\n";
  }
  o << "<line x1=\"" << kLeft << "\" y1=\"" << axis_y << "\" x2=\"" << kLeft + plot_w << "\" y2=\""
    << axis_y << "\" stroke=\"#333\"/>\n";
  o << "<text x=\"" << kLeft + plot_w / 2 << "\" y=\"" << axis_y + 34
    << "\" text-anchor=\"middle\" fill=\"#333\">time since first item (ms)</text>\n";
  for (const auto& [key, row] : rows) {
    const double y = kTop + row.first * kRowH;
    o << "<rect x=\"" << kLeft << "\" y=\"" << y << "\" width=\"" << plot_w << "\" height=\""
      << kRowH << "\" fill=\"" << (row.first % 2 ? "#f7f7f7" : "#ffffff") << "\"/>\n";
    o << "<text x=\"" << kLeft - 8 << "\" y=\"" << y + kRowH / 2 + 4
      << "\" text-anchor=\"end\" fill=\"#222\">" << xml_escape(row.second) << "</text>\n";
  }
  for (const auto& r : recs) {
    const auto& row =
        rows.at({static_cast<int>(r.device.type) * 1000 + r.device.index, r.stream_id});
    const double y = kTop + row.first * kRowH + (kRowH - kBoxH) / 2;
    const double x = x_of(r.start_ns);
    const double w = std::max(0.8, x_of(r.end_ns) - x);
    o << "<g><title>" << xml_escape(r.label) << " on " << xml_escape(row.second) << ": "
      << fmt("%.3f", static_cast<double>(r.start_ns - t0) / 1e6) << " - "
      << fmt("%.3f", static_cast<double>(r.end_ns - t0) / 1e6) << " ms ("
      << fmt("%.3f", static_cast<double>(r.end_ns - r.start_ns) / 1e6) << " ms), worker "
      << r.worker << ", queued "
      << fmt("%.3f", static_cast<double>(r.start_ns - r.enqueue_ns) / 1e6) << " ms</title>";
    o << "<rect x=\"" << fmt("%.2f", x) << "\" y=\"" << y << "\" width=\"" << fmt("%.2f", w)
      << "\" height=\"" << kBoxH << "\" rx=\"2\" fill=\"" << color_of(r.label)
      << "\" stroke=\"#222\" stroke-width=\"0.4\"/>";
    // Label inside the box when it fits (about 7 px per character).
    if (w > 7.0 * static_cast<double>(r.label.size()) + 6) {
      o << "<text x=\"" << fmt("%.2f", x + w / 2) << "\" y=\"" << y + kBoxH / 2 + 4
        << "\" text-anchor=\"middle\" fill=\"white\">" << xml_escape(r.label) << "</text>";
    }
    o << "</g>\n";
  }
  for (std::size_t i = 0; i < labels.size(); ++i) {
    const double x = kLeft + static_cast<double>(i % legend_cols) * 160;
    const double y = legend_y + static_cast<double>(i / legend_cols) * 22;
    o << "<rect x=\"" << x << "\" y=\"" << y << "\" width=\"14\" height=\"14\" fill=\""
      << color_of(labels[i]) << "\"/><text x=\"" << x + 20 << "\" y=\"" << y + 12 << "\">"
      << xml_escape(labels[i]) << "</text>\n";
  }
  o << "</svg>\n";
  return o.str();
}

void Profiler::export_timeline_svg(const std::string& path, const std::string& title) const {
  write_file(path, timeline_svg(title), "Profiler::export_timeline_svg");
}

}  // namespace streamrt
