// Launch origins, failure sites and launch-blocking waits (launch_origin.hpp,
// include/streamrt/impl/launch_site.hpp).
#include "launch_origin.hpp"

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <typeinfo>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cpu_stream.hpp"
#include "streamrt/error.hpp"
#include "streamrt/impl/launch_site.hpp"

namespace streamrt::cpu {
namespace {

thread_local const char* tls_launch_origin = nullptr;

// Sited labels ("label\0origin"), interned for ever: a program has as many as it has (op,
// launching line) pairs. By text, for interning; by address, for origin_of. Guarded by
// g_sited_mutex; the strings never move (each its own allocation).
std::mutex g_sited_mutex;
std::unordered_map<std::string, std::unique_ptr<std::string>>& sited() {
  static auto* map = new std::unordered_map<std::string, std::unique_ptr<std::string>>();  // leaked
  return *map;
}
std::unordered_map<const char*, const char*>& labels_with_origins() {
  static auto* map = new std::unordered_map<const char*, const char*>();  // leaked: used at exit
  return *map;
}
struct SitedCache {
  const char* label = nullptr;
  const char* origin = nullptr;
  const char* sited = nullptr;
};
thread_local std::array<SitedCache, 64> tls_sited;
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

const char* label_with_origin(const char* label) noexcept {
  const char* origin = tls_launch_origin;
  if (origin == nullptr) return label;
  // Direct-mapped by the pair's addresses; both have static storage, so a hit is exact.
  const auto h = (reinterpret_cast<std::uintptr_t>(label) >> 3) ^
                 (reinterpret_cast<std::uintptr_t>(origin) >> 3) * 0x9E3779B97F4A7C15ull;
  SitedCache& c = tls_sited[(h >> 58) % tls_sited.size()];
  if (c.label == label && c.origin == origin && c.sited != nullptr) return c.sited;
  try {
    const std::string_view shown = label != nullptr ? label : "launch";
    std::string text(shown);
    text += '\0';
    text += origin;
    std::lock_guard lock(g_sited_mutex);
    auto& slot = sited()[text];
    if (slot == nullptr) slot = std::make_unique<std::string>(std::move(text));
    const char* result = slot->c_str();
    labels_with_origins()[result] = result + shown.size() + 1;
    c = SitedCache{label, origin, result};
    return result;
  } catch (...) {
    return label;  // out of memory: the failure will name no line
  }
}

const char* origin_of(const char* label) noexcept {
  if (label == nullptr) return nullptr;
  std::lock_guard lock(g_sited_mutex);
  const auto& all = labels_with_origins();
  const auto it = all.find(label);
  return it != all.end() ? it->second : nullptr;
}

std::string failure_site(const char* label, const char* origin, const std::string& where) {
  // Appended piece by piece: g++ 12 at -O3 warns (-Werror=restrict, a known false positive) on
  // `"'" + std::string(label)`.
  std::string site;
  if (label != nullptr) {
    site.append("'").append(label).append("'");
  } else {
    site.append("launched work");
  }
  if (origin != nullptr) site.append(", queued at ").append(origin);
  site.append(", on ").append(where);
  return site;
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

const char* current_launch_origin() noexcept {
  return cpu::tls_launch_origin;
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
