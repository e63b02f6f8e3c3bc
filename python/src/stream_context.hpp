#pragma once
//! \file stream_context.hpp
//! `with stream:` and `with StreamContext(stream):` (bind_stream_context.cpp): entering makes the
//! stream current on this thread, exiting restores the stream that was current before. Each
//! thread keeps its own stack of entered contexts. Require the GIL.

#include <optional>

#include "streamrt/stream.hpp"

namespace streamrt::python {

//! Makes `s` current on this thread, remembering the stream it replaces; nullopt (a
//! StreamContext(None)) changes nothing but is remembered too, so that exits pair with entries.
void enter_stream(const std::optional<Stream>& s);

//! Restores the stream the matching enter_stream replaced. streamrt.Error naming `what`
//! ("Stream", "StreamContext") when this thread entered no context.
void exit_stream(const char* what);

}  // namespace streamrt::python
