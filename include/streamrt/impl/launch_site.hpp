#pragma once
//! \file launch_site.hpp
//! Where stream work comes from, for failure messages and launch-blocking mode: for language
//! bindings (the Python module), no stability promise. A binding names the user's source line of
//! the launches it makes (LaunchOriginScope); a failure of that work, raised later by a wait,
//! names it together with the op's label. In launch-blocking mode (cpu::set_launch_blocking) a
//! launch waits for its own completion; a binding that holds a lock the work may need (the GIL)
//! defers that wait to the end of its call (set_defer_blocking_hook, finish_deferred_launches).
//! See docs/reliability.md, "Failures that say where they came from".

#include <exception>
#include <string>

#include "streamrt/export.hpp"

namespace streamrt::impl {

//! Sets this thread's launch origin (static storage, or null for none) and returns the previous
//! one. Never blocks; affects only this thread.
STREAMRT_API const char* exchange_launch_origin(const char* origin) noexcept;

//! This thread's launch origin (null for none): for layers that describe a launch before it is
//! made (the read checker names it). Never blocks; affects nothing.
STREAMRT_API const char* current_launch_origin() noexcept;

//! The origin of the launches this thread makes while the scope lives: the work items carry it,
//! and a failure of one names it. `origin` must have static storage ("model.py:12", interned), and
//! so must the labels launched under it (each label-origin pair is interned by address).
class LaunchOriginScope {
 public:
  //! Sets `origin` (null: none) for this thread's launches. Never blocks.
  explicit LaunchOriginScope(const char* origin) noexcept
      : previous_(exchange_launch_origin(origin)) {}
  ~LaunchOriginScope() { exchange_launch_origin(previous_); }
  LaunchOriginScope(const LaunchOriginScope&) = delete;
  LaunchOriginScope& operator=(const LaunchOriginScope&) = delete;

 private:
  const char* previous_;
};

//! Adds `note` (which names the failed work and its origin) to the exception `e` of failed work,
//! keeping its type; returns the exception to record (`e` itself when it added nothing). Called
//! on the worker that ran the work, holding no runtime lock; must not throw.
using FailureAnnotator = std::exception_ptr (*)(const std::exception_ptr& e,
                                                const std::string& note) noexcept;
//! Sets the annotator for exception types the runtime cannot re-word itself (a binding's own
//! exception objects); null for none. Set once at start-up, before work can fail. Never blocks.
STREAMRT_API void set_failure_annotator(FailureAnnotator annotator) noexcept;

//! Whether this thread must defer the wait of a blocking launch to finish_deferred_launches()
//! (true while it holds a lock that the work may need, such as Python's GIL). Never blocks.
using DeferBlockingHook = bool (*)() noexcept;
//! Sets the hook (null: never defer). Set once at start-up. Never blocks.
STREAMRT_API void set_defer_blocking_hook(DeferBlockingHook hook) noexcept;

//! True when this thread made blocking launches whose wait was deferred. Never blocks.
STREAMRT_API bool has_deferred_launches() noexcept;

//! Waits for the streams of this thread's deferred blocking launches, as Stream::synchronize()
//! does, and raises the first failure found (the others stay with their streams). Call it with
//! no lock held that the work may need. Blocks; throws what synchronize() throws.
STREAMRT_API void finish_deferred_launches();

}  // namespace streamrt::impl
