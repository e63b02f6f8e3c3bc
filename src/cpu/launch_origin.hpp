#pragma once
// The CPU backend's side of impl/launch_site.hpp: work items that carry their launch origin, the
// "where" a failure of work is raised with, and the wait of launch-blocking mode. See
// docs/reliability.md, "Failures that say where they came from".
#include <exception>
#include <memory>
#include <string>

namespace streamrt::cpu {

class CpuStream;

// `label` of a launch made under this thread's launch origin (impl::LaunchOriginScope): a
// "sited" label, the interned text "label\0origin", which reads as `label` (null: "launch")
// wherever labels are read as text (traces, profiler, graphs), so a queue node carries its origin
// in the label's pointer at no extra room; `label` itself when there is no origin. A per-thread
// cache answers repeated launches from one line; a new pair takes a short lock. Never throws (out
// of memory: `label`).
const char* label_with_origin(const char* label) noexcept;

// The origin of a sited label (label_with_origin), or null for a plain one. Takes a short lock:
// for failures only. Never throws.
const char* origin_of(const char* label) noexcept;

// `error` of the work labelled `label` (may be null), launched from `origin` (may be null), that
// failed on `where` ("cpu:0 stream 3"), with a text naming them: a streamrt::Error of a known
// type is re-made with the text appended (same type), other types go to the binding's annotator
// (impl::set_failure_annotator). A cancellation, or an error nothing can annotate, is returned
// as it is. Never throws; call it with no stream lock held (an annotator may take the GIL).
std::exception_ptr locate_failure(std::exception_ptr error, const char* label, const char* origin,
                                  const std::string& where) noexcept;

// "'aten::mm' (queued at model.py:12) on cpu:0 stream 3": the failed work in messages.
std::string failure_site(const char* label, const char* origin, const std::string& where);

// Launch-blocking mode: after a host launch of `s`, waits for it as Stream::synchronize() does,
// raising its failure, or, while the defer hook says so (the GIL is held), remembers `s` for
// impl::finish_deferred_launches(). Throws what synchronize() throws.
void after_blocking_launch(CpuStream& s);

}  // namespace streamrt::cpu
