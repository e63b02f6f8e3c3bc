// streamrt's error messages in Python spelling (error_text.hpp).
#include "error_text.hpp"

#include <cctype>
#include <cstring>
#include <variant>

namespace streamrt::python {
namespace {

// C++ API names that Python spells differently from the rule of their kind: the Python call
// that does what the C++ one does.
struct Rename {
  const char* scope;
  const char* name;
  const char* python;
};

constexpr Rename kMembers[] = {
    {"Stream", "begin_capture", "Graph.capture_begin"},
    {"Stream", "end_capture", "Graph.capture_end"},
    {"Stream", "synchronize_for", "Stream.synchronize"},  // synchronize(timeout=...)
    {"Event", "on_complete", "Event.add_done_callback"},
    {"Graph", "clear", "Graph.reset"},
    {"Graph", "instantiate", "Graph.capture_end"},  // which instantiates the capture
    {"GraphExec", "launch", "Graph.replay"},
};

constexpr Rename kFunctions[] = {
    {"", "synchronize_for", "streamrt.synchronize"},
    {"", "wait_all_for", "streamrt.wait_all"},  // wait_all(timeout=...)
    {"", "mpi", "streamrt.distributed"},
    {"", "mpi::Communicator", "streamrt.distributed"},
    {"", "mpi::init", "streamrt.distributed.init_process_group"},
    {"", "mpi::finalize", "MPI_Finalize"},  // at exit, by streamrt.distributed or mpi4py
    // Reached from Python only by a DLPack import of a torch tensor that streamrt.torch tracks.
    {"", "share_tracking", "streamrt.from_dlpack"},
};

template <std::size_t N>
const char* renamed(const Rename (&table)[N], const ApiName& n) {
  for (const auto& r : table) {
    if (std::strcmp(r.scope, n.scope) == 0 && std::strcmp(r.name, n.name) == 0) return r.python;
  }
  return nullptr;
}

std::string lower(const char* s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string upper(const char* s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

// ThreadLocal -> thread_local.
std::string snake(const char* s) {
  std::string out;
  for (const char* p = s; *p != '\0'; ++p) {
    const auto c = static_cast<unsigned char>(*p);
    if (std::isupper(c) != 0 && p != s) out += '_';
    out += static_cast<char>(std::tolower(c));
  }
  return out;
}

std::string enumerator(const ApiName& n) {
  if (std::strcmp(n.scope, "DType") == 0) return "streamrt." + lower(n.name);
  // The capture's mode is the capture_error_mode argument of Graph.capture_begin and graph().
  if (std::strcmp(n.scope, "CaptureMode") == 0)
    return "capture_error_mode=\"" + snake(n.name) + "\"";
  if (std::strcmp(n.scope, "ReduceOp") == 0) return "ReduceOp." + upper(n.name);
  return std::string(n.scope) + "." + n.name;
}

std::string function(const ApiName& n) {
  if (const char* python = renamed(kFunctions, n)) return python;
  std::string out = "streamrt.";
  for (const char* p = n.name; *p != '\0'; ++p) {
    if (p[0] == ':' && p[1] == ':') {
      out += '.';
      ++p;
    } else {
      out += *p;
    }
  }
  return out;
}

}  // namespace

std::string python_name(const ApiName& n) {
  switch (n.kind) {
    case ApiName::Kind::Member:
      if (const char* python = renamed(kMembers, n)) return python;
      // Python's Graph is C++'s Graph and GraphExec in one class.
      if (std::strcmp(n.scope, "GraphExec") == 0) return std::string("Graph.") + n.name;
      return std::string(n.scope) + "." + n.name;
    case ApiName::Kind::Function:
      return function(n);
    case ApiName::Kind::Enumerator:
      return enumerator(n);
    case ApiName::Kind::Option: {
      // The C++ options struct is the Python class's keyword argument: Event(enable_timing=True).
      const std::string value = std::strcmp(n.value, "true") == 0    ? "True"
                                : std::strcmp(n.value, "false") == 0 ? "False"
                                                                     : n.value;
      return std::string(n.scope) + "(" + n.name + "=" + value + ")";
    }
    case ApiName::Kind::Device:
      return std::string("\"") + n.name + "\"";
  }
  return n.cpp();
}

std::string python_text(const ErrorText& text) {
  return text.str(&python_name);
}

std::string python_text_for(const ErrorText& text, const ApiName& callee,
                            const std::string& caller) {
  const auto is_callee = [&](const ApiName& n) {
    return n.kind == callee.kind && std::strcmp(n.scope, callee.scope) == 0 &&
           std::strcmp(n.name, callee.name) == 0 && std::strcmp(n.value, callee.value) == 0;
  };
  bool named = false;
  for (const auto& part : text.parts()) {
    if (const auto* n = std::get_if<ApiName>(&part)) named = named || is_callee(*n);
  }
  std::string message = named ? std::string() : caller + ": ";
  message += text.str([&](const ApiName& n) { return is_callee(n) ? caller : python_name(n); });
  return message;
}

std::string python_message(const std::exception& e) {
  if (const auto* error = dynamic_cast<const Error*>(&e)) return python_text(error->text());
  return e.what();
}

}  // namespace streamrt::python
