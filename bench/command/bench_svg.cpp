// `streamrt bench`: plots as self-contained SVG files (no plotting library needed).
//   latency.svg     bars of latency per case and peer, log scale, interquartile whiskers
//   efficiency.svg  efficiency vs item size per peer, one panel per stream count
//   streams.svg     throughput vs number of streams per peer
//   overlap_idle.svg  overlap speedup and idle CPU per peer
//   matmul.svg      matmul times per case and peer (when matmul cases ran)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench.hpp"
#include "support/escape.hpp"

namespace streamrt_tool::bench {
namespace {

using streamrt::detail::xml_escape;

const char* color_of(const std::string& peer_id) {
  static const std::map<std::string, const char*> colors = {
      {"streamrt", "#c0392b"},   {"async", "#7f7f7f"},        {"thread_queue", "#8c564b"},
      {"tbb_strand", "#2ca02c"}, {"tbb_group", "#98c379"},    {"asio_strand", "#9467bd"},
      {"opencl", "#ff7f0e"},     {"bare_threads", "#bbbbbb"}, {"openblas", "#17becf"}};
  auto it = colors.find(peer_id);
  return it == colors.end() ? "#333333" : it->second;
}

std::string f1(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

class Svg {
 public:
  Svg(int w, int h) : w_(w), h_(h) {
    o_ << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << w << "\" height=\"" << h
       << "\" viewBox=\"0 0 " << w << " " << h
       << "\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n"
       << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  }
  void rect(double x, double y, double w, double h, const std::string& fill,
            const std::string& title = "") {
    o_ << "<rect x=\"" << f1(x) << "\" y=\"" << f1(y) << "\" width=\"" << f1(std::max(w, 0.0))
       << "\" height=\"" << f1(std::max(h, 0.0)) << "\" fill=\"" << fill << "\">";
    if (!title.empty()) o_ << "<title>" << xml_escape(title) << "</title>";
    o_ << "</rect>\n";
  }
  void line(double x1, double y1, double x2, double y2, const std::string& stroke, double width = 1,
            const std::string& dash = "") {
    o_ << "<line x1=\"" << f1(x1) << "\" y1=\"" << f1(y1) << "\" x2=\"" << f1(x2) << "\" y2=\""
       << f1(y2) << "\" stroke=\"" << stroke << "\" stroke-width=\"" << width << "\"";
    if (!dash.empty()) o_ << " stroke-dasharray=\"" << dash << "\"";
    o_ << "/>\n";
  }
  void text(double x, double y, const std::string& s, const char* anchor = "middle", int size = 12,
            double rotate = 0, const std::string& fill = "#222", const char* weight = "normal") {
    o_ << "<text x=\"" << f1(x) << "\" y=\"" << f1(y) << "\" font-size=\"" << size
       << "\" text-anchor=\"" << anchor << "\" fill=\"" << fill << "\" font-weight=\"" << weight
       << "\"";
    if (rotate != 0)
      o_ << " transform=\"rotate(" << rotate << " " << f1(x) << " " << f1(y) << ")\"";
    o_ << ">" << xml_escape(s) << "</text>\n";
  }
  void polyline(const std::vector<std::pair<double, double>>& pts, const std::string& stroke) {
    o_ << "<polyline fill=\"none\" stroke=\"" << stroke << "\" stroke-width=\"2\" points=\"";
    for (const auto& [x, y] : pts) o_ << f1(x) << "," << f1(y) << " ";
    o_ << "\"/>\n";
  }
  void circle(double x, double y, double r, const std::string& fill, const std::string& title) {
    o_ << "<circle cx=\"" << f1(x) << "\" cy=\"" << f1(y) << "\" r=\"" << r << "\" fill=\"" << fill
       << "\"><title>" << xml_escape(title) << "</title></circle>\n";
  }
  // Writes the file; throws std::runtime_error when it cannot. Returns true.
  bool save(const std::string& path) {
    std::ofstream f(path);
    f << o_.str() << "</svg>\n";
    f.close();
    if (!f) throw std::runtime_error("cannot write " + path);
    return true;
  }
  int width() const { return w_; }
  int height() const { return h_; }

 private:
  int w_, h_;
  std::ostringstream o_;
};

// Peers that have an ok result in any of `cases`, in peer order.
std::vector<std::size_t> peers_in(const Report& r, const std::vector<const CaseResult*>& cases) {
  std::vector<bool> used(r.peers.size(), false);
  for (const auto* c : cases) {
    for (const auto& res : c->results) {
      if (res.status == "ok") used[res.peer_index] = true;
    }
  }
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < used.size(); ++i) {
    if (used[i]) out.push_back(i);
  }
  return out;
}

const Result* result_of(const CaseResult& c, std::size_t peer) {
  for (const auto& res : c.results) {
    if (res.peer_index == peer && res.status == "ok") return &res;
  }
  return nullptr;
}

// Legend entries left to right from (x, y), wrapping before `max_x`. Returns the y of the last row.
double legend(Svg& svg, const Report& r, const std::vector<std::size_t>& peers, double x, double y,
              double max_x) {
  const double x0 = x;
  for (std::size_t i : peers) {
    const double w = 24 + 7.0 * static_cast<double>(r.peers[i].name.size());
    if (x + w > max_x && x > x0) {
      x = x0;
      y += 18;
    }
    svg.rect(x, y - 10, 12, 12, color_of(r.peers[i].id));
    svg.text(x + 16, y, r.peers[i].name, "start", 12);
    x += w;
  }
  return y;
}

// A "nice" tick step (1, 2 or 5 times a power of ten) giving about `n` ticks up to `max`.
double nice_step(double max, int n) {
  const double raw = max / n;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * mag >= raw) return m * mag;
  }
  return 10 * mag;
}

std::string ns_label(double ns) {
  if (ns >= 1e9) return f1(ns / 1e9) + " s";
  if (ns >= 1e6) return std::to_string(static_cast<long>(std::lround(ns / 1e6))) + " ms";
  if (ns >= 1e3) return std::to_string(static_cast<long>(std::lround(ns / 1e3))) + " µs";
  return std::to_string(static_cast<long>(std::lround(ns))) + " ns";
}

// Grouped bars on a log axis. Every case's value is in ns (`unit` ns or ns/item) or ms.
bool latency_plot(const Report& r, const std::string& path) {
  std::vector<const CaseResult*> cases;
  for (const auto& c : r.cases) {
    if ((c.spec.unit == "ns" || c.spec.unit == "ns/item" || c.spec.unit == "CPU ns/item") &&
        c.streamrt() != nullptr) {
      cases.push_back(&c);
    }
  }
  if (cases.empty()) return false;
  const auto peers = peers_in(r, cases);
  double lo = 1e300, hi = 0;
  for (const auto* c : cases) {
    for (std::size_t p : peers) {
      if (const auto* res = result_of(*c, p)) {
        lo = std::min(lo, std::max(res->stats.min, 1.0));
        hi = std::max(hi, res->stats.max);
      }
    }
    if (c->spec.target_value > 0) lo = std::min(lo, c->spec.target_value);
  }
  const double dlo = std::floor(std::log10(lo)), dhi = std::ceil(std::log10(hi));
  const double ml = 70, mr = 20, mt = 110, mb = 130;
  const double group_w = std::max(90.0, 16.0 * static_cast<double>(peers.size()) + 20);
  const int W =
      std::max(760, static_cast<int>(ml + mr + group_w * static_cast<double>(cases.size())));
  const int H = 560;
  Svg svg(W, H);
  const double ph = H - mt - mb;
  auto y_of = [&](double v) {
    const double t = (std::log10(std::max(v, std::pow(10.0, dlo))) - dlo) / (dhi - dlo);
    return mt + ph * (1 - t);
  };
  svg.text(W / 2.0, 22, "Latency and per-item cost per case (median; whiskers: p25–p75; log scale)",
           "middle", 15, 0, "#222", "bold");
  svg.text(W / 2.0, 40,
           r.machine.cpu_model + ", " + std::to_string(r.machine.hardware_threads) +
               " hardware threads, " + r.machine.date + "; lower is better",
           "middle", 11, 0, "#555");
  legend(svg, r, peers, ml, 60, W - mr);
  for (double d = dlo; d <= dhi; d += 1) {
    const double y = y_of(std::pow(10.0, d));
    svg.line(ml, y, W - mr, y, "#ddd");
    svg.text(ml - 6, y + 4, ns_label(std::pow(10.0, d)), "end", 11);
  }
  const double bw = (group_w - 20) / static_cast<double>(peers.size());
  for (std::size_t ci = 0; ci < cases.size(); ++ci) {
    const auto& c = *cases[ci];
    const double gx = ml + group_w * static_cast<double>(ci) + 10;
    for (std::size_t k = 0; k < peers.size(); ++k) {
      const auto* res = result_of(c, peers[k]);
      if (res == nullptr) continue;
      const double x = gx + bw * static_cast<double>(k);
      const double y = y_of(res->stats.median);
      svg.rect(x + 1, y, bw - 2, mt + ph - y, color_of(r.peers[peers[k]].id),
               r.peers[peers[k]].name + ": " + format_value(res->stats.median, c.spec.unit));
      const double cx = x + bw / 2;
      svg.line(cx, y_of(res->stats.p25), cx, y_of(res->stats.p75), "#000", 1);
      svg.text(cx + 3, std::min(y, y_of(res->stats.p75)) - 3, format_value(res->stats.median, "ns"),
               "start", 8, -90, "#333");
    }
    if (c.spec.target_value > 0) {
      const double y = y_of(c.spec.target_value);
      svg.line(gx - 4, y, gx + group_w - 16, y, "#c0392b", 1.5, "5,3");
    }
    // Case label, rotated, under the group.
    const double lx = gx + (group_w - 20) / 2;
    std::string label = c.spec.id;
    svg.text(lx, mt + ph + 14, label, "end", 11, -35);
  }
  svg.line(ml, mt + ph, W - mr, mt + ph, "#444");
  svg.text(ml, H - 8, "dashed red: streamrt's target", "start", 11, 0, "#c0392b");
  return svg.save(path);
}

// The cases of `group`, in report order.
std::vector<const CaseResult*> cases_of(const Report& r, const std::string& group) {
  std::vector<const CaseResult*> cases;
  for (const auto& c : r.cases) {
    if (c.spec.group == group) cases.push_back(&c);
  }
  return cases;
}

// Efficiency vs item size, one panel per stream count.
bool efficiency_plot(const Report& r, const std::string& path) {
  const std::vector<const CaseResult*> cases = cases_of(r, "granularity");
  if (cases.empty()) return false;
  auto param = [](const CaseResult& c, const char* name) {
    for (const auto& [k, v] : c.spec.params) {
      if (k == name) return v;
    }
    return 0.0;
  };
  std::vector<double> streams, items;
  for (const auto* c : cases) {
    const double s = param(*c, "streams"), it = param(*c, "item_us");
    if (std::find(streams.begin(), streams.end(), s) == streams.end()) streams.push_back(s);
    if (std::find(items.begin(), items.end(), it) == items.end()) items.push_back(it);
  }
  std::sort(streams.begin(), streams.end());
  std::sort(items.begin(), items.end());
  const auto peers = peers_in(r, cases);
  double ymax = 110;
  for (const auto* c : cases) {
    for (const auto& res : c->results) {
      if (res.status == "ok") ymax = std::max(ymax, res.stats.median * 1.05);
    }
  }
  const double pw = 240, ph = 260, ml = 60, mt = 100, gap = 30;
  const int W = static_cast<int>(ml + (pw + gap) * static_cast<double>(streams.size()));
  const int H = static_cast<int>(mt + ph + 70);
  Svg svg(W, H);
  svg.text(W / 2.0, 22, "Efficiency vs item size (ideal time / measured time, fixed total work)",
           "middle", 15, 0, "#222", "bold");
  svg.text(W / 2.0, 40,
           "ideal = the same items on min(streams, " + std::to_string(r.machine.hardware_threads) +
               ") plain threads, measured just before; higher is better; dashed: 90% target",
           "middle", 11, 0, "#555");
  legend(svg, r, peers, ml, 62, W - 10);
  for (std::size_t si = 0; si < streams.size(); ++si) {
    const double x0 = ml + (pw + gap) * static_cast<double>(si);
    auto xp = [&](std::size_t i) {
      return x0 + 20 +
             (pw - 40) * static_cast<double>(i) /
                 std::max<double>(1, static_cast<double>(items.size() - 1));
    };
    auto yp = [&](double v) { return mt + ph * (1 - v / ymax); };
    svg.rect(x0, mt, pw, ph, "#fafafa");
    for (double g = 0; g <= ymax; g += 20) {
      svg.line(x0, yp(g), x0 + pw, yp(g), "#e3e3e3");
      if (si == 0)
        svg.text(x0 - 6, yp(g) + 4, std::to_string(static_cast<int>(g)) + "%", "end", 11);
    }
    svg.line(x0, yp(90), x0 + pw, yp(90), "#c0392b", 1, "5,3");
    svg.line(x0, yp(100), x0 + pw, yp(100), "#888", 1);
    const int s = static_cast<int>(streams[si]);
    svg.text(x0 + pw / 2, mt - 6, std::to_string(s) + (s == 1 ? " stream" : " streams"), "middle",
             13, 0, "#222", "bold");
    for (std::size_t i = 0; i < items.size(); ++i) {
      svg.text(xp(i), mt + ph + 16, std::to_string(static_cast<int>(items[i])) + " µs", "middle",
               11);
    }
    svg.text(x0 + pw / 2, mt + ph + 34, "item size", "middle", 11, 0, "#555");
    for (std::size_t p : peers) {
      std::vector<std::pair<double, double>> pts;
      for (std::size_t i = 0; i < items.size(); ++i) {
        for (const auto* c : cases) {
          if (param(*c, "streams") != streams[si] || param(*c, "item_us") != items[i]) continue;
          if (const auto* res = result_of(*c, p)) {
            pts.emplace_back(xp(i), yp(res->stats.median));
          }
        }
      }
      if (pts.size() > 1) svg.polyline(pts, color_of(r.peers[p].id));
      for (const auto& [x, y] : pts)
        svg.circle(x, y, 3.5, color_of(r.peers[p].id), r.peers[p].name);
    }
  }
  return svg.save(path);
}

// Throughput vs number of streams.
bool streams_plot(const Report& r, const std::string& path) {
  const std::vector<const CaseResult*> cases = cases_of(r, "many_streams");
  if (cases.empty()) return false;
  const auto peers = peers_in(r, cases);
  double ymax = 0;
  for (const auto* c : cases) {
    for (const auto& res : c->results) {
      if (res.status == "ok") ymax = std::max(ymax, res.stats.p75);
    }
  }
  // Ideal: every hardware thread busy with 10 us items.
  const double ideal = r.machine.hardware_threads * 1e5;
  ymax = std::max(ymax, ideal) * 1.1;
  const double ml = 80, mr = 30, mt = 100, ph = 300, pw = 560;
  const int W = static_cast<int>(ml + pw + mr), H = static_cast<int>(mt + ph + 60);
  Svg svg(W, H);
  svg.text(W / 2.0, 22, "Throughput vs number of streams (4096 items of 10 µs)", "middle", 15, 0,
           "#222", "bold");
  svg.text(W / 2.0, 40,
           "same total work spread over more streams; higher is better; dashed: "
           "all hardware threads busy",
           "middle", 11, 0, "#555");
  legend(svg, r, peers, 20, 62, W - 10);
  auto xp = [&](std::size_t i) {
    return ml + 30 +
           (pw - 60) * static_cast<double>(i) /
               std::max<double>(1, static_cast<double>(cases.size() - 1));
  };
  auto yp = [&](double v) { return mt + ph * (1 - v / ymax); };
  svg.rect(ml, mt, pw, ph, "#fafafa");
  const double tick = nice_step(ymax, 5);
  for (double g = 0; g <= ymax; g += tick) {
    svg.line(ml, yp(g), ml + pw, yp(g), "#e3e3e3");
    svg.text(ml - 6, yp(g) + 4, format_value(g, "items/s"), "end", 11);
  }
  svg.line(ml, yp(ideal), ml + pw, yp(ideal), "#888", 1, "5,3");
  for (std::size_t i = 0; i < cases.size(); ++i) {
    double s = 0;
    for (const auto& [k, v] : cases[i]->spec.params) {
      if (k == "streams") s = v;
    }
    svg.text(xp(i), mt + ph + 16, std::to_string(static_cast<int>(s)), "middle", 11);
  }
  svg.text(ml + pw / 2, mt + ph + 36, "streams", "middle", 12, 0, "#555");
  for (std::size_t p : peers) {
    std::vector<std::pair<double, double>> pts;
    for (std::size_t i = 0; i < cases.size(); ++i) {
      if (const auto* res = result_of(*cases[i], p)) pts.emplace_back(xp(i), yp(res->stats.median));
    }
    if (pts.size() > 1) svg.polyline(pts, color_of(r.peers[p].id));
    for (const auto& [x, y] : pts) svg.circle(x, y, 3.5, color_of(r.peers[p].id), r.peers[p].name);
  }
  return svg.save(path);
}

// Bars of one case per panel, linear scale, with an optional target line.
bool panels_plot(const Report& r, const std::vector<const CaseResult*>& cases,
                 const std::string& title, const std::string& path) {
  if (cases.empty()) return false;
  const auto peers = peers_in(r, cases);
  const double pw = std::max(260.0, 34.0 * static_cast<double>(peers.size()) + 40), ph = 260,
               ml = 70, mt = 100, gap = 80;
  const int W = static_cast<int>(ml + (pw + gap) * static_cast<double>(cases.size()));
  const int H = static_cast<int>(mt + ph + 40);
  Svg svg(W, H);
  svg.text(W / 2.0, 22, title, "middle", 15, 0, "#222", "bold");
  legend(svg, r, peers, 20, 50, W - 10);
  for (std::size_t ci = 0; ci < cases.size(); ++ci) {
    const auto& c = *cases[ci];
    const double x0 = ml + (pw + gap) * static_cast<double>(ci);
    double ymax = c.spec.target_value * 1.2;
    for (const auto& res : c.results) {
      if (res.status == "ok") ymax = std::max(ymax, res.stats.p75 * 1.15);
    }
    if (ymax <= 0) ymax = 1;
    auto yp = [&](double v) { return mt + ph * (1 - v / ymax); };
    svg.rect(x0, mt, pw, ph, "#fafafa");
    const double tick = nice_step(ymax, 4);
    for (double v = 0; v <= ymax; v += tick) {
      svg.line(x0, yp(v), x0 + pw, yp(v), "#e3e3e3");
      svg.text(x0 - 6, yp(v) + 4, format_value(v, c.spec.unit), "end", 10);
    }
    svg.text(x0 + pw / 2, mt - 22, c.spec.id, "middle", 12, 0, "#222", "bold");
    svg.text(x0 + pw / 2, mt - 8,
             c.spec.unit +
                 (c.spec.better == Better::kLower ? ", lower is better" : ", higher is better"),
             "middle", 10, 0, "#555");
    const double bw = (pw - 20) / static_cast<double>(peers.size());
    for (std::size_t k = 0; k < peers.size(); ++k) {
      const auto* res = result_of(c, peers[k]);
      if (res == nullptr) continue;
      const double x = x0 + 10 + bw * static_cast<double>(k);
      const double y = yp(res->stats.median);
      svg.rect(x + 2, y, bw - 4, mt + ph - y, color_of(r.peers[peers[k]].id),
               r.peers[peers[k]].name + ": " + format_value(res->stats.median, c.spec.unit));
      svg.line(x + bw / 2, yp(res->stats.p25), x + bw / 2, yp(res->stats.p75), "#000");
      svg.text(x + bw / 2, y - 4, format_value(res->stats.median, c.spec.unit), "middle", 9);
    }
    if (c.spec.target_value > 0) {
      svg.line(x0, yp(c.spec.target_value), x0 + pw, yp(c.spec.target_value), "#c0392b", 1.5,
               "5,3");
    }
  }
  return svg.save(path);
}

}  // namespace

std::vector<std::string> write_plots(const Report& r, const std::string& dir, std::string& error) {
  std::vector<const CaseResult*> oi, mm;
  for (const auto& c : r.cases) {
    if (c.group_is("overlap") || c.group_is("idle")) oi.push_back(&c);
    if (c.group_is("matmul")) mm.push_back(&c);
  }
  // Each plot returns false when there is nothing to draw (its cases were filtered out).
  struct Plot {
    const char* name;
    std::function<bool(const std::string&)> draw;
  };
  const std::vector<Plot> plots = {
      {"latency.svg", [&](const std::string& p) { return latency_plot(r, p); }},
      {"efficiency.svg", [&](const std::string& p) { return efficiency_plot(r, p); }},
      {"streams.svg", [&](const std::string& p) { return streams_plot(r, p); }},
      {"overlap_idle.svg",
       [&](const std::string& p) {
         return panels_plot(r, oi, "Overlap speedup and idle CPU (dashed red: target)", p);
       }},
      {"matmul.svg",
       [&](const std::string& p) { return panels_plot(r, mm, "Matrix products (float32)", p); }},
  };
  std::vector<std::string> written;
  error.clear();
  for (const auto& plot : plots) {
    const std::string path = dir + "/" + plot.name;
    bool ok = false;
    try {
      ok = plot.draw(path);
    } catch (const std::exception& e) {
      error = std::string("plot ") + plot.name + ": " + e.what();
      return written;
    }
    if (ok) written.push_back(plot.name);
  }
  return written;
}

}  // namespace streamrt_tool::bench
