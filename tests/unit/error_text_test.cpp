// Error messages as data: the API names an Error mentions are kept apart from its text (so that
// bindings spell them their way), what() spells them in C++, and the library's own errors carry
// them, through copies and re-raises.
#include <gtest/gtest.h>

#include <string>
#include <variant>
#include <vector>

#include "streamrt/streamrt.hpp"

namespace {

using streamrt::ApiName;
using streamrt::ErrorText;
namespace api = streamrt::api;

// The names in `text`, each as "kind scope name value".
std::vector<std::string> names_in(const ErrorText& text) {
  std::vector<std::string> out;
  for (const auto& part : text.parts()) {
    if (const auto* n = std::get_if<ApiName>(&part)) {
      out.push_back(std::to_string(static_cast<int>(n->kind)) + " " + n->scope + " " + n->name +
                    " " + n->value);
    }
  }
  return out;
}

bool mentions(const ErrorText& text, const ApiName& name) {
  for (const auto& part : text.parts()) {
    if (const auto* n = std::get_if<ApiName>(&part)) {
      if (n->kind == name.kind && std::string(n->scope) == name.scope &&
          std::string(n->name) == name.name && std::string(n->value) == name.value) {
        return true;
      }
    }
  }
  return false;
}

// Spells every name as <name>, to see where the names are.
std::string marked(const ErrorText& text) {
  // Appended piece by piece: g++ 12 at -O3 warns (-Wrestrict, a false positive) on the
  // temporary of `"<" + std::string(...)`.
  return text.str([](const ApiName& n) {
    std::string out = "<";
    out += n.name;
    out += '>';
    return out;
  });
}

TEST(ErrorText, EachKindHasItsCppSpelling) {
  EXPECT_EQ(api::member("Stream", "synchronize").cpp(), "Stream::synchronize");
  EXPECT_EQ(api::function("synchronize").cpp(), "streamrt::synchronize");
  EXPECT_EQ(api::enumerator("DType", "Float64").cpp(), "DType::Float64");
  EXPECT_EQ(api::option("Event", "enable_timing", true).cpp(),
            "EventOptions{.enable_timing = true}");
  EXPECT_EQ(api::device("cpu").cpp(), "Device::parse(\"cpu\")");
}

TEST(ErrorText, ConcatenationKeepsNamesApartAndMergesText) {
  const std::string where = "cpu:0 stream 1";
  const ErrorText t = "use " + api::enumerator("DType", "Float32") + " or " +
                      api::enumerator("DType", "Float64") + " on " + where + "; see " +
                      api::member("Stream", "synchronize") + "()";
  ASSERT_EQ(t.parts().size(), 7u);  // text, name, text, name, text (merged), name, text
  EXPECT_EQ(marked(t), "use <Float32> or <Float64> on cpu:0 stream 1; see <synchronize>()");
  EXPECT_EQ(t.str(),
            "use DType::Float32 or DType::Float64 on cpu:0 stream 1; see "
            "Stream::synchronize()");
  EXPECT_EQ(names_in(t).size(), 3u);
}

TEST(ErrorText, ErrorSaysTheCppSpellingAndKeepsTheParts) {
  const streamrt::Error e(api::member("Event", "elapsed_time") + ": needs " +
                          api::option("Event", "enable_timing", true));
  EXPECT_STREQ(e.what(), "Event::elapsed_time: needs EventOptions{.enable_timing = true}");
  const streamrt::Error copy = e;  // what a rethrow or an exception_ptr copies
  EXPECT_EQ(marked(copy.text()), "<elapsed_time>: needs <enable_timing>");
  const streamrt::Cancelled c(api::member("Stream", "cancel") + "() dropped it");
  EXPECT_STREQ(c.what(), "Stream::cancel() dropped it");
  EXPECT_TRUE(mentions(c.text(), api::member("Stream", "cancel")));
}

TEST(ErrorText, AnErrorMadeFromAStringIsOneTextPart) {
  const streamrt::Error e(std::string("plain text, Stream::synchronize as written"));
  const ErrorText t = e.text();
  ASSERT_EQ(t.parts().size(), 1u);
  EXPECT_EQ(std::get<std::string>(t.parts()[0]), e.what());
  EXPECT_TRUE(names_in(t).empty());  // text is never parsed for names
}

// The library's errors carry the names (one per kind the Python binding respells).
TEST(ErrorText, LibraryErrorsCarryTheirNames) {
  streamrt::Event a, b;
  a.record();
  b.record();
  try {
    (void)a.elapsed_time(b);
    ADD_FAILURE() << "no error";
  } catch (const streamrt::Error& e) {
    EXPECT_TRUE(mentions(e.text(), api::option("Event", "enable_timing", true))) << e.what();
    EXPECT_TRUE(mentions(e.text(), api::member("Event", "elapsed_time"))) << e.what();
  }
  try {
    (void)streamrt::mean(streamrt::arange(4));
    ADD_FAILURE() << "no error";
  } catch (const streamrt::Error& e) {
    EXPECT_TRUE(mentions(e.text(), api::enumerator("DType", "Float64"))) << e.what();
  }
  try {
    (void)streamrt::zeros({1}, streamrt::DType::Float32,
                          streamrt::Device{streamrt::DeviceType::CUDA, 0});
    ADD_FAILURE() << "no error";
  } catch (const streamrt::Error& e) {
    EXPECT_TRUE(mentions(e.text(), api::device("cpu"))) << e.what();
  }
  try {
    // Memory from the caching allocator cannot share another storage's tracking.
    streamrt::share_tracking(streamrt::zeros({1}), streamrt::zeros({1}));
    ADD_FAILURE() << "no error";
  } catch (const streamrt::Error& e) {
    EXPECT_TRUE(mentions(e.text(), api::function("share_tracking"))) << e.what();
  }
}

TEST(ErrorText, FromBlobRefusalsNameFromBlob) {
  std::vector<double> buf(12);
  const auto expect_named = [](const auto& call, const char* problem) {
    try {
      call();
      ADD_FAILURE() << "no error";
    } catch (const streamrt::Error& e) {
      EXPECT_TRUE(mentions(e.text(), api::function("from_blob"))) << e.what();
      const std::string what = e.what();
      EXPECT_EQ(what.rfind(std::string("streamrt::from_blob: ") + problem, 0), 0u) << what;
    }
  };
  // Windows whose rows overlap; a null pointer for elements.
  expect_named(
      [&] {
        streamrt::from_blob(buf.data(), {4, 3}, {2, 1}, streamrt::DType::Float64);
      },
      "distinct elements");
  expect_named([] { streamrt::from_blob(nullptr, {2}, streamrt::DType::Float64); }, "data is null");
}

TEST(ErrorText, AnErrorRaisedAgainKeepsItsNames) {
  streamrt::Stream s;
  s.launch([] { throw streamrt::Error("failing work (" + api::member("Stream", "launch") + ")"); });
  streamrt::Event e = s.record_event();
  EXPECT_THROW(e.synchronize(), streamrt::Error);
  try {
    e.synchronize();
    ADD_FAILURE() << "no failure the second time";
  } catch (const streamrt::Error& err) {
    const std::string what = err.what();
    EXPECT_NE(what.find("raised again"), std::string::npos) << what;
    EXPECT_TRUE(mentions(err.text(), api::member("Stream", "launch"))) << what;
  }
}

TEST(ErrorText, WorkThatSynchronizesItsOwnStreamNamesTheCall) {
  streamrt::Stream s;
  s.launch([s]() mutable { s.synchronize(); });
  try {
    s.synchronize();
    ADD_FAILURE() << "no error";
  } catch (const streamrt::Error& e) {
    EXPECT_TRUE(mentions(e.text(), api::member("Stream", "synchronize"))) << e.what();
    EXPECT_NE(std::string(e.what()).find("Stream::synchronize() called from work"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
