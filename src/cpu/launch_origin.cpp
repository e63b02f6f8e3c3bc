// Launch origins, failure sites and launch-blocking waits (launch_origin.hpp,
// include/streamrt/impl/launch_site.hpp).
#include "launch_origin.hpp"

#include <atomic>
#include <optional>
#include <typeinfo>
#include <utility>
#include <vector>

#include "cpu_stream.hpp"
#include "streamrt/error.hpp"
#include "streamrt/impl/launch_site.hpp"

namespace streamrt::cpu {
namespace {

thread_local const char* tls_launch_origin = nullptr;
thread_local const char* tls_failed_origin = nullptr;
// Streams with a blocking launch whose wait this thread deferred (usually one).
thread_local std::vector<std::shared_ptr<CpuStream>> tls_deferred;

// Set once at start-up by a binding; acquire/release so that a hook set before work ran is seen
// with everything its module set up before it.
std::atomic<impl::FailureAnnotator> g_annotator{nullptr};
std::atomic<impl::DeferBlockingHook> g_defer_hook{nullptr};

// `error` again with `suffix` appended to its text when it is a streamrt::Error of a type made
// here (a subclass of the user's would lose its type); `error` itself for a cancellation or
// another Error; null when it is no Error at all.
std::exception_ptr remake_error(const std::exception_ptr& error, const std::string& suffix) {
  try {
    std::rethrow_exception(error);
  } catch (const Cancelled&) {
    return error;  // no failure of the work: nothing to locate
  } catch (const Error& e) {
    const std::type_info& type = typeid(e);
    if (type == typeid(Error)) return std::make_exception_ptr(Error(e.text() + suffix));
    if (type == typeid(ResourceUnavailable)) {
      return std::make_exception_ptr(ResourceUnavailable(e.text() + suffix));
    }
    if (type == typeid(OutOfMemory)) return std::make_exception_ptr(OutOfMemory(e.text() + suffix));
    return error;
  } catch (...) {
    return nullptr;
  }
}

}  // namespace

const char* launch_origin() noexcept {
  return tls_launch_origin;
}

void LocatedWork::operator()() {
  try {
    work();
  } catch (...) {
    tls_failed_origin = origin;  // taken by the drainer that catches it next (run_work_locked)
    throw;
  }
}

const char* take_failed_origin() noexcept {
  return std::exchange(tls_failed_origin, nullptr);
}

std::string failure_site(const char* label, const char* origin, const std::string& where) {
  std::string site = label != nullptr ? "'" + std::string(label) + "'" : "launched work";
  if (origin != nullptr) site += std::string(", queued at ") + origin;
  return site + ", on " + where;
}

std::exception_ptr locate_failure(std::exception_ptr error, const char* label, const char* origin,
                                  const std::string& where) noexcept {
  if (label == nullptr && origin == nullptr) return error;  // nothing to add to "where"
  try {
    const std::string site = failure_site(label, origin, where);
    if (auto remade = remake_error(error, " [failed work: " + site + "]")) return remade;
    if (auto annotate = g_annotator.load(std::memory_order_acquire)) {
      return annotate(error, "streamrt: failed work: " + site);
    }
  } catch (...) {
    // Out of memory for the text: the failure is recorded as it was thrown.
  }
  return error;
}

void after_blocking_launch(CpuStream& s) {
  const auto defer = g_defer_hook.load(std::memory_order_acquire);
  if (defer != nullptr && defer()) {
    for (const auto& d : tls_deferred) {
      if (d.get() == &s) return;
    }
    tls_deferred.push_back(s.shared_from_this());
    return;
  }
  s.synchronize(std::nullopt);
}

}  // namespace streamrt::cpu

namespace streamrt::impl {

const char* exchange_launch_origin(const char* origin) noexcept {
  return std::exchange(cpu::tls_launch_origin, origin);
}

void set_failure_annotator(FailureAnnotator annotator) noexcept {
  cpu::g_annotator.store(annotator, std::memory_order_release);
}

void set_defer_blocking_hook(DeferBlockingHook hook) noexcept {
  cpu::g_defer_hook.store(hook, std::memory_order_release);
}

bool has_deferred_launches() noexcept {
  return !cpu::tls_deferred.empty();
}

void finish_deferred_launches() {
  // Taken first: a wait that throws leaves nothing behind for the next call.
  std::vector<std::shared_ptr<cpu::CpuStream>> streams = std::move(cpu::tls_deferred);
  cpu::tls_deferred.clear();
  for (const auto& s : streams) s->synchronize(std::nullopt);
}

}  // namespace streamrt::impl
