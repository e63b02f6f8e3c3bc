#pragma once
//! \file stream_context.hpp
//! StreamContext: RAII guard that makes a stream current for this thread.

#include <optional>

#include "streamrt/export.hpp"
#include "streamrt/stream.hpp"

namespace streamrt {

//! Makes a stream this thread's current stream for its device, and restores the previous one on
//! destruction (also when an exception leaves the scope). Nests. Never blocks. Not copyable or
//! movable; use it on one thread only.
class STREAMRT_API StreamContext {
 public:
  //! Makes `s` current for s.device().
  explicit StreamContext(const Stream& s);
  //! Makes `*s` current; nullopt does nothing (as torch's StreamContext(None)).
  explicit StreamContext(std::optional<Stream> s);
  //! Restores the stream that was current before. noexcept.
  ~StreamContext();

  StreamContext(const StreamContext&) = delete;
  StreamContext& operator=(const StreamContext&) = delete;
  StreamContext(StreamContext&&) = delete;
  StreamContext& operator=(StreamContext&&) = delete;

 private:
  std::optional<Stream> previous_;
};

}  // namespace streamrt
