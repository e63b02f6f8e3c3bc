#pragma once
// Memory that glibc keeps free inside its main heap after torch ops on streams, given back.

namespace streamrt::python::torch_runner {

//! Called by a worker after it ran a torch op: now and then (at most every quarter of a second,
//! and only once the heap's break has grown well past where it was at the last look), gives the
//! free memory inside glibc's main heap back to the system (malloc_trim). Blocks only while it
//! trims (milliseconds, under glibc's arena lock); a clock read otherwise. Thread-safe; never
//! throws.
void give_back_heap_memory() noexcept;

}  // namespace streamrt::python::torch_runner
