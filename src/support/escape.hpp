#pragma once
// Escaping text for JSON strings and XML (SVG) text and attributes, shared by the library (the
// profiler's Chrome trace, Graph::to_dot) and the tools (bench reports, SVG charts). Not installed.

#include <cstdio>
#include <string>
#include <string_view>

namespace streamrt::detail {

//! `s` as the inside of a JSON string literal: quote, backslash and control characters escaped
//! (UTF-8 passes through). Never blocks; thread-safe.
inline std::string json_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  for (const char c : s) {
    const auto ch = static_cast<unsigned char>(c);
    switch (ch) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (ch < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(ch));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out;
}

//! `s` as XML character data or a double-quoted attribute value: <, >, & and " escaped. Never
//! blocks; thread-safe.
inline std::string xml_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const char c : s) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

}  // namespace streamrt::detail
