// The SVG timeline the tools draw from a profiler's records (timeline_svg.hpp): well-formed, a
// row per stream, given names, a colour per label. Checked with a real XML parser.
#include "timeline_svg.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "streamrt/streamrt.hpp"
#include "test_util.hpp"

namespace streamrt {
namespace {

using streamrt_test::temp_path;
using streamrt_test::write_script;
using streamrt_timeline::export_timeline_svg;
using streamrt_timeline::timeline_svg;

TEST(TimelineSvg, NamedStreamsShowTheirName) {
  Stream s;
  Profiler prof;
  prof.name_stream(s, "loader <1>");
  prof.start();
  s.launch("step", [] {});
  s.synchronize();
  prof.stop();
  EXPECT_NE(timeline_svg(prof).find(">loader &lt;1&gt;</text>"), std::string::npos);
}

// Many kinds of work on a stream with a long name: every label gets a colour of its own (no
// palette wrap-around), and the name column is wide enough for the name.
TEST(TimelineSvg, TellsLabelsApartAndHasRoomForLongStreamNames) {
  static const char* const kLabels[] = {
      "l00", "l01", "l02", "l03", "l04", "l05", "l06", "l07", "l08", "l09", "l10", "l11", "l12",
      "l13", "l14", "l15", "l16", "l17", "l18", "l19", "l20", "l21", "l22", "l23", "l24"};
  Stream s;
  Profiler prof;
  const std::string name = "a data loader stream with a rather long descriptive name";
  prof.name_stream(s, name);
  prof.start();
  for (const char* label : kLabels) s.launch(label, [] {});
  s.synchronize();
  prof.stop();
  const std::string path = temp_path("labels.svg");
  export_timeline_svg(prof, path);
  const std::string script = write_script("svg_labels.py", R"PY(
import sys, xml.etree.ElementTree as ET
r = ET.parse(sys.argv[1]).getroot()
ns = "{http://www.w3.org/2000/svg}"
swatches = [e.get("fill") for e in r.iter(ns + "rect") if e.get("width") == "14"]
assert len(swatches) == 25, swatches
assert len(set(swatches)) == 25, sorted(swatches)
name = [t for t in r.iter(ns + "text") if t.text == sys.argv[2]]
assert len(name) == 1, [t.text for t in r.iter(ns + "text")]
# Right-aligned at x: it starts at x minus its width (DejaVu Sans 12 px: under 7 px a character).
assert float(name[0].get("x")) - 7 * len(sys.argv[2]) >= 0, name[0].get("x")
)PY");
  const std::string check = "/usr/bin/python3 " + script + " " + path + " '" + name + "'";
  EXPECT_EQ(std::system(check.c_str()), 0) << check;
  std::filesystem::remove(path);
  std::filesystem::remove(script);
}

TEST(TimelineSvg, IsWellFormedWithARowPerStream) {
  Stream s1, s2;
  Profiler prof;
  prof.start();
  {
    StreamContext ctx(s1);
    matmul(ones({100, 100}), ones({100, 100})).wait();
  }
  s2.launch("labelled <work>", [] {});
  s2.synchronize();
  prof.stop();
  const std::string path = temp_path("timeline.svg");
  export_timeline_svg(prof, path, "test & timeline");
  const std::string script = write_script("svg_check.py", R"PY(
import sys, xml.etree.ElementTree as ET
r = ET.parse(sys.argv[1]).getroot()
ns = "{http://www.w3.org/2000/svg}"
texts = [t.text for t in r.iter(ns + "text")]
titles = [t.text for t in r.iter(ns + "title")]
assert "test & timeline" in texts, texts
assert any(t.endswith("stream " + sys.argv[2]) for t in texts), texts
assert any(t.endswith("stream " + sys.argv[3]) for t in texts), texts
assert len(titles) == 4, titles
assert any(t.startswith("labelled <work> on") for t in titles), titles
assert "time since first item (ms)" in texts
)PY");
  const std::string check = "/usr/bin/python3 " + script + " " + path + " " +
                            std::to_string(s1.id()) + " " + std::to_string(s2.id());
  EXPECT_EQ(std::system(check.c_str()), 0) << check;
  std::filesystem::remove(path);
  std::filesystem::remove(script);
}

TEST(TimelineSvg, AnUnwritablePathIsAnError) {
  Profiler prof;
  EXPECT_THROW(export_timeline_svg(prof, "/nonexistent-dir/x.svg"), Error);
}

}  // namespace
}  // namespace streamrt
