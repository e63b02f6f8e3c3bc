#pragma once
//! \file error.hpp
//! The exception types streamrt throws, and their messages as data: text with the names of the
//! API it mentions kept apart, so that each language binding spells those names as its own API
//! does (C++ `Stream::synchronize()`, Python `Stream.synchronize()`).

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include "streamrt/export.hpp"

namespace streamrt {

//! A name of streamrt's API inside an error message. Its parts are string literals (static
//! storage), so an ApiName is free to make and to pass to a helper that names its caller only
//! when it fails. Thread-safe to copy; never blocks.
struct STREAMRT_API ApiName {
  //! What is named; it decides the spelling.
  enum class Kind : std::uint8_t {
    Member,      //!< member `name` of class `scope`: C++ `Stream::synchronize`
    Function,    //!< function or namespace `name` of streamrt: C++ `streamrt::synchronize`
    Enumerator,  //!< value `name` of enum `scope`: C++ `DType::Float64`
    Option,      //!< option `name` of class `scope` set to `value`: C++
                 //!< `EventOptions{.enable_timing = true}`
    Device,      //!< the device written `name`: C++ `Device::parse("cpu")`
  };

  Kind kind = Kind::Function;
  const char* scope = "";  //!< the class or enum (Member, Enumerator, Option)
  const char* name = "";   //!< the member, function, enumerator, option or device text
  const char* value = "";  //!< the option's value as C++ writes it (Option)

  //! The C++ spelling (see Kind). May throw std::bad_alloc.
  std::string cpp() const;
};

//! The ApiNames, by kind.
namespace api {
//! Member function `name` of class `cls`: Stream::synchronize.
constexpr ApiName member(const char* cls, const char* name) {
  return {ApiName::Kind::Member, cls, name, ""};
}
//! Function (or nested namespace) `name` of streamrt: streamrt::synchronize.
constexpr ApiName function(const char* name) {
  return {ApiName::Kind::Function, "", name, ""};
}
//! Value `name` of enum `enum_name`: DType::Float64.
constexpr ApiName enumerator(const char* enum_name, const char* name) {
  return {ApiName::Kind::Enumerator, enum_name, name, ""};
}
//! Boolean option `name` of class `cls` set to `value`: EventOptions{.enable_timing = true}.
constexpr ApiName option(const char* cls, const char* name, bool value) {
  return {ApiName::Kind::Option, cls, name, value ? "true" : "false"};
}
//! The device written `text`: Device::parse("cpu").
constexpr ApiName device(const char* text) {
  return {ApiName::Kind::Device, "", text, ""};
}
}  // namespace api

//! An error message as data: text and API names, in order. Made with + from strings, string
//! literals and ApiNames (`api::member("Stream", "synchronize") + "() called from ..."`). Not
//! thread-safe to modify; copies are independent.
class STREAMRT_API ErrorText {
 public:
  //! One piece: text as it is, or a name to spell.
  using Part = std::variant<std::string, ApiName>;

  //! Empty.
  ErrorText() = default;
  //! Plain text.
  ErrorText(std::string text);
  //! Plain text.
  ErrorText(const char* text);
  //! One name.
  ErrorText(const ApiName& name);

  //! The pieces, in order (adjacent texts merged).
  const std::vector<Part>& parts() const noexcept { return parts_; }
  //! True when there is no text and no name.
  bool empty() const noexcept { return parts_.empty(); }
  //! The text with each name spelled by `spell`. May throw what `spell` throws.
  std::string str(const std::function<std::string(const ApiName&)>& spell) const;
  //! The text with the names spelled in C++ (ApiName::cpp): what Error::what() says.
  std::string str() const;

  //! Appends `more`.
  ErrorText& operator+=(const ErrorText& more);

 private:
  void append(Part part);

  std::vector<Part> parts_;
};

//! Concatenations that keep the names apart (exact overloads: `"a" + "b"` stays an error, and
//! string + string stays a std::string).
STREAMRT_API ErrorText operator+(ErrorText a, const ErrorText& b);
//! \copydoc operator+(ErrorText, const ErrorText&)
STREAMRT_API ErrorText operator+(ErrorText a, const std::string& b);
//! \copydoc operator+(ErrorText, const ErrorText&)
STREAMRT_API ErrorText operator+(ErrorText a, const char* b);
//! \copydoc operator+(ErrorText, const ErrorText&)
STREAMRT_API ErrorText operator+(const std::string& a, const ErrorText& b);
//! \copydoc operator+(ErrorText, const ErrorText&)
STREAMRT_API ErrorText operator+(const char* a, const ErrorText& b);

//! Thrown for misuse and runtime failures that streamrt itself detects (bad arguments, waits on
//! events that were never recorded, self-deadlocks). what() is the message in C++ spelling;
//! text() keeps the API names it mentions apart, for bindings that spell them their way.
//! Thread-safe to throw and copy; never blocks.
class STREAMRT_API Error : public std::runtime_error {
 public:
  //! A message of plain text.
  explicit Error(const std::string& what) : std::runtime_error(what) {}
  //! A message of plain text.
  explicit Error(const char* what) : std::runtime_error(what) {}
  //! A message with API names: what() spells them in C++.
  explicit Error(const ErrorText& text);

  //! The message as data (one text part for an Error made from a string). May throw
  //! std::bad_alloc.
  ErrorText text() const;

 private:
  std::shared_ptr<const ErrorText> text_;  // null for plain text; shared by copies
};

//! Thrown by waits on work that was dropped by Stream::cancel(); a kind of Error.
class STREAMRT_API Cancelled : public Error {
 public:
  using Error::Error;
};

//! Thrown when the OS refuses something the runtime needs to run work, rather than for a bad
//! argument: a worker thread (the process's thread or memory limits), memory (OutOfMemory). A
//! kind of Error. Thread-safe to throw and copy; never blocks.
class STREAMRT_API ResourceUnavailable : public Error {
 public:
  using Error::Error;
};

//! Thrown when memory for a tensor cannot be had (the OS refused it and the cache had nothing
//! left to release); a kind of ResourceUnavailable. Python raises it as
//! streamrt.OutOfMemoryError, a MemoryError. Thread-safe to throw and copy; never blocks.
class STREAMRT_API OutOfMemory : public ResourceUnavailable {
 public:
  using ResourceUnavailable::ResourceUnavailable;
};

}  // namespace streamrt
