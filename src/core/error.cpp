// Error messages as data (error.hpp): text and API names, spelled in C++ for what().
#include "streamrt/error.hpp"

#include <utility>

namespace streamrt {

std::string ApiName::cpp() const {
  switch (kind) {
    case Kind::Member:
    case Kind::Enumerator:
      return std::string(scope) + "::" + name;
    case Kind::Function:
      return std::string("streamrt::") + name;
    case Kind::Option:
      return std::string(scope) + "Options{." + name + " = " + value + "}";
    case Kind::Device:
      return std::string("Device::parse(\"") + name + "\")";
  }
  return name;
}

ErrorText::ErrorText(std::string text) {
  if (!text.empty()) parts_.emplace_back(std::move(text));
}

ErrorText::ErrorText(const char* text) : ErrorText(std::string(text)) {}

ErrorText::ErrorText(const ApiName& name) {
  parts_.emplace_back(name);
}

void ErrorText::append(Part part) {
  if (auto* text = std::get_if<std::string>(&part)) {
    if (text->empty()) return;
    // Adjacent texts merge, so that a binding sees text and names alternate.
    if (!parts_.empty()) {
      if (auto* last = std::get_if<std::string>(&parts_.back())) {
        *last += *text;
        return;
      }
    }
  }
  parts_.push_back(std::move(part));
}

ErrorText& ErrorText::operator+=(const ErrorText& more) {
  if (this == &more) {
    const ErrorText copy = more;
    return *this += copy;
  }
  for (const Part& p : more.parts_) append(p);
  return *this;
}

std::string ErrorText::str(const std::function<std::string(const ApiName&)>& spell) const {
  std::string out;
  for (const Part& p : parts_) {
    if (const auto* text = std::get_if<std::string>(&p)) {
      out += *text;
    } else {
      out += spell(std::get<ApiName>(p));
    }
  }
  return out;
}

std::string ErrorText::str() const {
  return str([](const ApiName& n) { return n.cpp(); });
}

ErrorText operator+(ErrorText a, const ErrorText& b) {
  a += b;
  return a;
}

ErrorText operator+(ErrorText a, const std::string& b) {
  a += ErrorText(b);
  return a;
}

ErrorText operator+(ErrorText a, const char* b) {
  a += ErrorText(b);
  return a;
}

ErrorText operator+(const std::string& a, const ErrorText& b) {
  ErrorText out(a);
  out += b;
  return out;
}

ErrorText operator+(const char* a, const ErrorText& b) {
  ErrorText out(a);
  out += b;
  return out;
}

Error::Error(const ErrorText& text)
    : std::runtime_error(text.str()), text_(std::make_shared<const ErrorText>(text)) {}

ErrorText Error::text() const {
  if (text_) return *text_;
  return ErrorText(what());
}

}  // namespace streamrt
