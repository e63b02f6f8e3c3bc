#pragma once
//! \file launch_origin.hpp
//! The user's source line behind a launch from Python ("model.py:12"), captured cheaply at every
//! launch (a few reads of the thread's frames and a per-thread cache; no traceback, no text made)
//! and named when the work fails (impl/launch_site.hpp); and the waits of launch-blocking mode at
//! the end of the bindings that launch work. See docs/reliability.md, "Failures that say where
//! they came from".

#include <pybind11/pybind11.h>

#include <string>

namespace streamrt::python {

namespace py = pybind11;

//! "path/model.py:12" for the innermost Python frame of this thread outside the skipped packages
//! (streamrt's and torch's: add_origin_skip), interned (static storage); null when this thread
//! runs no Python or the frames cannot be read. With or without the GIL on CPython 3.11 (it reads
//! only this thread's suspended frames); with the GIL only on other versions. Never blocks
//! (a short lock when a line is seen for the first time); never throws.
const char* launch_origin_here() noexcept;

//! Turns the reading of origins on (the default) or off, for benchmarks that compare its cost;
//! returns the previous setting. Thread-safe; never blocks.
bool set_launch_origins(bool on) noexcept;

//! Frames of files under `prefix` (a directory, ending in '/') are skipped by launch_origin_here.
//! Thread-safe; may throw std::bad_alloc.
void add_origin_skip(const std::string& prefix);

//! Launch-blocking mode: waits (GIL released) for the launches this thread made with their wait
//! deferred (impl::finish_deferred_launches), raising their failure. Cheap when there are none.
//! Requires the GIL.
void finish_blocking_launches();

//! Makes the runtime name a launch's origin in the Python exceptions of failed work (a note) and
//! defer blocking waits on Python threads to finish_blocking_launches. Once, at import.
void install_launch_site_hooks();

}  // namespace streamrt::python
