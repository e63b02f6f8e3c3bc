// The escaping helpers shared by the library's exports and the tools' reports
// (src/support/escape.hpp): the output must parse back to the input.
#include "support/escape.hpp"

#include <gtest/gtest.h>

#include <string>

namespace {

using streamrt::detail::json_escape;
using streamrt::detail::xml_escape;

TEST(Escape, JsonEscapesQuotesBackslashesAndControlCharacters) {
  EXPECT_EQ(json_escape("plain text"), "plain text");
  EXPECT_EQ(json_escape("a\"b\\c"), "a\\\"b\\\\c");
  EXPECT_EQ(json_escape("l1\nl2\r\t"), "l1\\nl2\\r\\t");
  EXPECT_EQ(json_escape(std::string("\x01\x1f", 2)), "\\u0001\\u001f");
  EXPECT_EQ(json_escape(std::string("nul\0end", 7)), "nul\\u0000end");
  EXPECT_EQ(json_escape("caf\xc3\xa9"), "caf\xc3\xa9");  // UTF-8 passes through
}

TEST(Escape, XmlEscapesMarkupCharacters) {
  EXPECT_EQ(xml_escape("loader <1> & \"two\""), "loader &lt;1&gt; &amp; &quot;two&quot;");
  EXPECT_EQ(xml_escape("it's fine"), "it's fine");
}

}  // namespace
