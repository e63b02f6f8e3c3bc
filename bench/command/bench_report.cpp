// `streamrt bench`: the table on stdout, bench.json and table.md.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "bench.hpp"
#include "support/escape.hpp"

namespace streamrt_tool::bench {
namespace {

using streamrt::detail::json_escape;

std::string printf_string(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

// 3 significant digits.
std::string sig3(double v) {
  const double a = std::fabs(v);
  if (a >= 100) return printf_string("%.0f", v);
  if (a >= 10) return printf_string("%.1f", v);
  return printf_string("%.2f", v);
}

std::string q(const std::string& s) {
  // Appended, not `"\"" + std::string`: that trips g++ 12's -Wrestrict false positive at -O3 (GCC
  // bug 105329), an error under STREAMRT_WERROR.
  std::string out = "\"";
  out += json_escape(s);
  out += '"';
  return out;
}

// JSON number; non-finite values (which JSON cannot hold) become null.
std::string num(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

const char* better_text(Better b) {
  return b == Better::kLower ? "lower" : "higher";
}

// Writes `text` to `path`; false with `error` set when it could not.
bool write_text(const std::string& path, const std::string& text, std::string& error) {
  std::ofstream f(path);
  f << text;
  f.close();
  if (!f) {
    error = "cannot write " + path;
    return false;
  }
  return true;
}

}  // namespace

std::string spread_text(const Result& r) {
  // Fewer runs have no interquartile range to speak of: a single run shows no spread at all.
  if (r.samples.size() < kMinSpreadSamples || r.stats.median == 0) return "";
  return printf_string("±%.1f%%", 50.0 * (r.stats.p75 - r.stats.p25) / std::fabs(r.stats.median));
}

std::string caveat(const Report& report, const CaseSpec& c, const Result& r) {
  const auto& m = report.machine;
  const std::string load = printf_string("%.1f", m.load_before[0]) + " before, " +
                           printf_string("%.1f", m.load_after[0]) + " after";
  if (c.group == "granularity" && r.stats.median > 100.0) {
    return "above 100 %: the bare threads ran slower than this peer, so other processes took "
           "cores from them (load " +
           load + "); noise, not a gain";
  }
  // Streams against one stream on the same work: more than the cores would be parallelism the
  // machine does not have.
  if (c.group == "overlap" && r.stats.median > 1.05 * m.hardware_threads) {
    return "above the " + std::to_string(m.hardware_threads) +
           " cores: the one-stream run was slowed by other processes (load " + load +
           "); noise, not a gain";
  }
  return "";
}

std::string format_value(double v, const std::string& unit) {
  if (unit == "ns" || unit == "ns/item" || unit == "CPU ns/item") {
    const std::string per = unit == "ns" ? "" : "/item";
    const double a = std::fabs(v);
    if (a < 1e3) return sig3(v) + " ns" + per;
    if (a < 1e6) return sig3(v / 1e3) + " µs" + per;
    if (a < 1e9) return sig3(v / 1e6) + " ms" + per;
    return sig3(v / 1e9) + " s" + per;
  }
  if (unit == "ms") return v >= 1000 ? sig3(v / 1e3) + " s" : sig3(v) + " ms";
  if (unit == "x") return printf_string("%.2fx", v);
  if (unit == "%") return printf_string("%.1f%%", v);
  if (unit == "items/s") {
    if (v >= 1e6) return sig3(v / 1e6) + " M/s";
    if (v >= 1e3) return sig3(v / 1e3) + " k/s";
    return sig3(v) + " /s";
  }
  if (unit == "ms CPU/s") return printf_string("%.2f ms/s", v);
  return sig3(v) + " " + unit;
}

void print_table(const Report& r, std::FILE* out) {
  std::fprintf(out,
               "\nstreamrt bench%s — %s, %d hardware threads, %s\n"
               "median of the repetitions (n); spread = half the interquartile range, relative, "
               "from 3 repetitions on; ratio = peer / streamrt\n",
               r.options.quick ? " --quick" : "", r.machine.cpu_model.c_str(),
               r.machine.hardware_threads, r.machine.date.c_str());
  for (const auto& c : r.cases) {
    std::fprintf(out, "\n%s  [%s, %s is better%s%s]\n", c.spec.title.c_str(), c.spec.unit.c_str(),
                 better_text(c.spec.better), c.spec.target.empty() ? "" : "; target ",
                 c.spec.target.c_str());
    const Result* base = c.streamrt();
    for (const auto& res : c.results) {
      const auto& peer = r.peers[res.peer_index];
      if (res.status != "ok") {
        std::fprintf(out, "  %-17s %s: %s\n", peer.name.c_str(), res.status.c_str(),
                     res.reason.c_str());
        continue;
      }
      std::string ratio = "";
      if (base != nullptr && base->stats.median != 0) {
        ratio = printf_string("%.2f", res.stats.median / base->stats.median);
      }
      const std::string why = caveat(r, c.spec, res);
      std::fprintf(out, "  %-17s %14s %8s %8s  n=%zu%s%s%s%s\n", peer.name.c_str(),
                   format_value(res.stats.median, c.spec.unit).c_str(), spread_text(res).c_str(),
                   ratio.c_str(), res.samples.size(), res.note.empty() ? "" : "  — ",
                   res.note.c_str(), why.empty() ? "" : "  — ", why.c_str());
    }
  }
  std::fprintf(out, "\n");
}

bool write_json(const Report& r, const std::string& path, std::string& error) {
  std::ostringstream o;
  const auto& m = r.machine;
  o << "{\n  \"tool\": \"streamrt bench\",\n  \"schema\": 1,\n";
  o << "  \"command\": " << q(r.command_line) << ",\n";
  o << "  \"options\": {\"quick\": " << (r.options.quick ? "true" : "false")
    << ", \"filter\": " << q(r.options.filter) << ", \"repetitions\": " << r.options.repetitions
    << ", \"out\": " << q(r.options.out) << "},\n";
  o << "  \"machine\": {\n    \"cpu_model\": " << q(m.cpu_model)
    << ",\n    \"hardware_threads\": " << m.hardware_threads
    << ",\n    \"streamrt_workers\": " << m.streamrt_workers << ",\n    \"kernel\": " << q(m.kernel)
    << ",\n    \"memory\": " << q(m.memory) << ",\n    \"date\": " << q(m.date)
    << ",\n    \"compiler\": " << q(m.compiler) << ",\n    \"load_average_before\": ["
    << num(m.load_before[0]) << ", " << num(m.load_before[1]) << ", " << num(m.load_before[2])
    << "],\n    \"load_average_after\": [" << num(m.load_after[0]) << ", " << num(m.load_after[1])
    << ", " << num(m.load_after[2])
    << "],\n    \"spin_work_iters_per_us\": " << num(m.calibration_iters_per_us)
    << ",\n    \"libraries\": {";
  for (std::size_t i = 0; i < m.libraries.size(); ++i) {
    o << (i ? ", " : "") << q(m.libraries[i].first) << ": " << q(m.libraries[i].second);
  }
  o << "},\n    \"environment\": {";
  for (std::size_t i = 0; i < m.environment.size(); ++i) {
    o << (i ? ", " : "") << q(m.environment[i].first) << ": " << q(m.environment[i].second);
  }
  o << "}\n  },\n  \"wall_seconds\": " << num(r.wall_seconds) << ",\n  \"peers\": [\n";
  for (std::size_t i = 0; i < r.peers.size(); ++i) {
    const auto& p = r.peers[i];
    o << "    {\"id\": " << q(p.id) << ", \"name\": " << q(p.name)
      << ", \"built\": " << (p.built ? "true" : "false") << ", \"version\": " << q(p.version)
      << ", \"workers\": " << p.workers << ", \"reason\": " << q(p.reason) << "}"
      << (i + 1 < r.peers.size() ? ",\n" : "\n");
  }
  o << "  ],\n  \"cases\": [\n";
  for (std::size_t ci = 0; ci < r.cases.size(); ++ci) {
    const auto& c = r.cases[ci];
    o << "    {\"id\": " << q(c.spec.id) << ", \"group\": " << q(c.spec.group)
      << ", \"title\": " << q(c.spec.title) << ", \"unit\": " << q(c.spec.unit)
      << ", \"better\": " << q(better_text(c.spec.better)) << ", \"target\": " << q(c.spec.target)
      << ", \"params\": {";
    for (std::size_t i = 0; i < c.spec.params.size(); ++i) {
      o << (i ? ", " : "") << q(c.spec.params[i].first) << ": " << num(c.spec.params[i].second);
    }
    o << "},\n     \"results\": [\n";
    const Result* base = c.streamrt();
    for (std::size_t i = 0; i < c.results.size(); ++i) {
      const auto& res = c.results[i];
      o << "       {\"peer\": " << q(r.peers[res.peer_index].id)
        << ", \"status\": " << q(res.status) << ", \"reason\": " << q(res.reason)
        << ", \"note\": " << q(res.note) << ", \"caveat\": " << q(caveat(r, c.spec, res))
        << ", \"samples\": [";
      for (std::size_t k = 0; k < res.samples.size(); ++k) {
        o << (k ? ", " : "") << num(res.samples[k]);
      }
      o << "]";
      if (res.status == "ok") {
        o << ", \"median\": " << num(res.stats.median) << ", \"p25\": " << num(res.stats.p25)
          << ", \"p75\": " << num(res.stats.p75) << ", \"min\": " << num(res.stats.min)
          << ", \"max\": " << num(res.stats.max);
        if (base != nullptr && base->stats.median != 0) {
          o << ", \"ratio_to_streamrt\": " << num(res.stats.median / base->stats.median);
        }
      }
      o << "}" << (i + 1 < c.results.size() ? ",\n" : "\n");
    }
    o << "     ]}" << (ci + 1 < r.cases.size() ? ",\n" : "\n");
  }
  o << "  ]\n}\n";
  return write_text(path, o.str(), error);
}

bool write_markdown(const Report& r, const std::string& path, std::string& error) {
  // Peers that appear in any result, in peer order.
  std::vector<bool> used(r.peers.size(), false);
  for (const auto& c : r.cases) {
    for (const auto& res : c.results) used[res.peer_index] = true;
  }
  std::ostringstream o;
  o << "| case | unit | target |";
  for (std::size_t i = 0; i < r.peers.size(); ++i) {
    if (used[i]) o << " " << r.peers[i].name << " |";
  }
  o << "\n|---|---|---|";
  for (std::size_t i = 0; i < r.peers.size(); ++i) {
    if (used[i]) o << "---|";
  }
  o << "\n";
  for (const auto& c : r.cases) {
    o << "| " << c.spec.title << " | " << c.spec.unit << " | " << c.spec.target << " |";
    const Result* base = c.streamrt();
    for (std::size_t i = 0; i < r.peers.size(); ++i) {
      if (!used[i]) continue;
      const Result* res = nullptr;
      for (const auto& x : c.results) {
        if (x.peer_index == i) res = &x;
      }
      if (res == nullptr) {
        o << " — |";
      } else if (res->status != "ok") {
        o << " " << res->status << " |";
      } else {
        o << " " << format_value(res->stats.median, c.spec.unit) << " " << spread_text(*res);
        if (!caveat(r, c.spec, *res).empty()) o << " (!)";
        if (base != nullptr && res != base && base->stats.median != 0) {
          o << " (" << printf_string("%.2f", res->stats.median / base->stats.median) << "×)";
        }
        o << " |";
      }
    }
    o << "\n";
  }
  o << "\nMedians; ± is half the interquartile range (from 3 repetitions on); (n×) is the peer's "
       "median / streamrt's. (!): a figure the work cannot produce (an efficiency above 100 %, a "
       "speedup above the core count): other processes slowed the baseline; bench.json's "
       "`caveat` says so. `skipped`/`failed`: see bench.json for the reason; — : the peer has no "
       "such concept.\n";
  return write_text(path, o.str(), error);
}

}  // namespace streamrt_tool::bench
