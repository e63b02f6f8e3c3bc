// Profiler: sessions over the runtime's trace buffers (fed by every backend through the trace
// hook, impl/backend.hpp), and the Chrome trace JSON. (The SVG timeline is the tools':
// tools/timeline/.)
#include "streamrt/profiler.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>

#include "streamrt/error.hpp"
#include "support/escape.hpp"
#include "trace.hpp"

namespace streamrt {
namespace {

using detail::json_escape;

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

void write_file(const std::string& path, const std::string& text, ApiName what) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw Error(what + ": cannot open '" + path + "' for writing");
  f << text;
  f.close();
  if (!f) throw Error(what + ": writing '" + path + "' failed");
}

// Identifies a stream across devices, ordered for maps.
using StreamKey = std::pair<int, std::uint64_t>;
StreamKey key_of(const Device& d, std::uint64_t id) {
  return {static_cast<int>(d.type) * 1000 + d.index, id};
}

std::string default_stream_name(const TraceRecord& r) {
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
    throw Error(api::member("Profiler", "start") +
                ": another profiler is running; stop it first (one at a time)");
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
    return it != names.end() ? it->second : default_stream_name(r);
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
  write_file(path, chrome_trace_json(), api::member("Profiler", "export_chrome_trace"));
}

std::string Profiler::stream_name(const TraceRecord& record) const {
  std::lock_guard lock(state_->mutex);
  auto it = state_->names.find(key_of(record.device, record.stream_id));
  return it != state_->names.end() ? it->second : std::string();
}

std::int64_t Profiler::start_ns() const {
  std::lock_guard lock(state_->mutex);
  return state_->start_ns;
}

}  // namespace streamrt
