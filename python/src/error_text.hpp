#pragma once
//! \file error_text.hpp
//! streamrt's error messages in Python spelling. The C++ library keeps the API names a message
//! mentions apart from its text (streamrt::ErrorText); this file spells each name as the Python
//! API has it: Stream::synchronize -> Stream.synchronize, DType::Float64 -> streamrt.float64,
//! EventOptions{.enable_timing = true} -> Event(enable_timing=True), Device::parse("cpu") ->
//! "cpu", Stream::end_capture -> Graph.capture_end. Never blocks; thread-safe; needs no GIL.

#include <exception>
#include <string>

#include "streamrt/error.hpp"

namespace streamrt::python {

//! How the Python API names `name`.
std::string python_name(const ApiName& name);

//! `text` with every API name in Python spelling.
std::string python_text(const ErrorText& text);

//! `text` in Python spelling for the Python call `caller` that made the C++ call `callee` on its
//! user's behalf (streamrt.from_numpy calls from_blob): `callee` is spelled `caller`, and a text
//! that does not name `callee` is prefixed with "`caller`: ", so that the message names the call
//! the user made. May throw std::bad_alloc.
std::string python_text_for(const ErrorText& text, const ApiName& callee,
                            const std::string& caller);

//! The message of `e` for a Python exception: python_text of a streamrt::Error's text, what()
//! of any other exception.
std::string python_message(const std::exception& e);

}  // namespace streamrt::python
