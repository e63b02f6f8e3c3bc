// The read checker's fault handler (read_check_table.hpp): judges an access to protected memory.
// A thread running stream work gets its access back; so does any thread once the memory's last
// queued write has run (the protection was stale); a host thread that touches memory whose write
// is still queued is reported, and the process aborts. Faults that are not the checker's go to
// the handler that was installed before it. Everything here runs in a signal handler: no
// allocation, no mutex, only atomics, per-entry spin locks, mprotect and write.
#include <signal.h>
#include <ucontext.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "core/work_thread.hpp"
#include "read_check_table.hpp"

namespace streamrt::ops::read_check {
namespace {

enum class Verdict { kNotOurs, kRetry, kReport };

// What a report needs, copied out of the entry under its lock.
struct Finding {
  std::uintptr_t begin = 0;
  std::uintptr_t end = 0;
  const char* label = nullptr;
  const char* origin = nullptr;
  char stream[sizeof(Entry::stream)] = {};
  char tensor[sizeof(Entry::tensor)] = {};
};

// The handler that was installed before the checker's (guarded by g_install_mutex; the handler
// reads it after the checker's was installed, which happened after it was written).
struct sigaction g_previous = {};
std::mutex g_install_mutex;

// Whether the last queued write of `e` has not run yet. Under e.lock.
bool write_pending(const Entry& e) noexcept {
  return e.writer != nullptr && !e.writer->backend().query_event(*e.writer);
}

// Judges one entry that covers the fault: gives the access back (stale protection, or a thread
// running stream work) or fills `found`. Under nothing; takes e.lock.
Verdict judge_entry(Entry& e, std::uintptr_t addr, Finding& found) noexcept {
  std::lock_guard lock(e.lock);
  const std::uintptr_t begin = e.begin.load(std::memory_order_relaxed);
  const std::uintptr_t end = e.end.load(std::memory_order_relaxed);
  if (addr < begin || addr >= end) return Verdict::kNotOurs;  // released meanwhile
  if (!write_pending(e) || core::on_work_thread()) {
    return set_access(begin, end, true) ? Verdict::kRetry : Verdict::kNotOurs;
  }
  found.begin = begin;
  found.end = end;
  found.label = e.label;
  found.origin = e.origin;
  std::memcpy(found.stream, e.stream, sizeof found.stream);
  std::memcpy(found.tensor, e.tensor, sizeof found.tensor);
  return Verdict::kReport;
}

bool recently_released(const Table& table, std::uintptr_t addr) noexcept {
  for (std::size_t i = 0; i < kRecent; ++i) {
    const std::uintptr_t begin = table.recent_begin[i].load();
    if (addr >= begin && addr < table.recent_end[i].load()) return true;
  }
  return false;
}

Verdict judge(std::uintptr_t addr, Finding& found) noexcept {
  if (!table_made()) return Verdict::kNotOurs;
  Table& table = the_table();
  const std::size_t used = table.used.load(std::memory_order_acquire);
  Verdict verdict = Verdict::kNotOurs;
  for (std::size_t i = 0; i < used; ++i) {
    Entry& e = table.entries[i];
    // Acquire: pairs with the release that published the slot's range.
    const std::uintptr_t begin = e.begin.load(std::memory_order_acquire);
    if (addr < begin || addr >= e.end.load(std::memory_order_acquire)) continue;
    const Verdict v = judge_entry(e, addr, found);
    if (v == Verdict::kRetry) return v;
    if (v == Verdict::kReport) verdict = v;
  }
  if (verdict == Verdict::kNotOurs && recently_released(table, addr)) return Verdict::kRetry;
  return verdict;
}

void report(const Finding& f, std::uintptr_t addr, bool write) noexcept {
  static char text[1536];
  const int n = std::snprintf(
      text, sizeof text,
      "\nstreamrt read check: a host thread %s memory that queued stream work has not written "
      "yet (address %#lx).\n"
      "  memory: [%#lx, %#lx), pages of a %s\n"
      "  written by: '%s' queued%s%s on %s, not run yet\n"
      "  fix: wait for the tensor before touching its memory through another alias (a numpy "
      "array, a DLPack capsule, ctypes): synchronize its stream or an event recorded after the "
      "write, or read it through streamrt or torch, which wait. See docs/reliability.md, \"The "
      "read checker\". The access itself is in the traceback below when Python's faulthandler "
      "is on (python -X faulthandler).\n",
      write ? "wrote" : "read", static_cast<unsigned long>(addr),
      static_cast<unsigned long>(f.begin), static_cast<unsigned long>(f.end), f.tensor,
      f.label != nullptr ? f.label : "launch", f.origin != nullptr ? " at " : "",
      f.origin != nullptr ? f.origin : "", f.stream);
  if (n > 0) {
    const auto len =
        static_cast<std::size_t>(n) < sizeof text ? static_cast<std::size_t>(n) : sizeof text - 1;
    [[maybe_unused]] const auto written = ::write(2, text, len);
  }
}

bool is_write(void* context) noexcept {
#if defined(__x86_64__)
  // Bit 1 of the page-fault error code: the access was a write.
  return (static_cast<ucontext_t*>(context)->uc_mcontext.gregs[REG_ERR] & 2) != 0;
#else
  (void)context;
  return false;
#endif
}

void chain(int sig, siginfo_t* info, void* context) noexcept {
  const struct sigaction& prev = g_previous;
  if ((prev.sa_flags & SA_SIGINFO) != 0 && prev.sa_sigaction != nullptr) {
    prev.sa_sigaction(sig, info, context);
    return;
  }
  if (prev.sa_handler != SIG_DFL && prev.sa_handler != SIG_IGN && prev.sa_handler != nullptr) {
    prev.sa_handler(sig);
    return;
  }
  // The default action: returning re-runs the access, which faults again without a handler.
  ::signal(sig, SIG_DFL);
}

void on_fault(int sig, siginfo_t* info, void* context) {
  if (info->si_code == SEGV_ACCERR) {
    const auto addr = reinterpret_cast<std::uintptr_t>(info->si_addr);
    Finding found;
    switch (judge(addr, found)) {
      case Verdict::kRetry:
        return;
      case Verdict::kReport:
        report(found, addr, is_write(context));
        std::abort();
      case Verdict::kNotOurs:
        break;
    }
  }
  chain(sig, info, context);
}

}  // namespace

void install_fault_handler() noexcept {
  std::lock_guard lock(g_install_mutex);
  struct sigaction current = {};
  if (::sigaction(SIGSEGV, nullptr, &current) != 0) return;
  if ((current.sa_flags & SA_SIGINFO) != 0 && current.sa_sigaction == &on_fault) return;
  struct sigaction mine = {};
  mine.sa_sigaction = &on_fault;
  mine.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
  sigemptyset(&mine.sa_mask);
  // The handler chains to `current`, which must be in place before the handler can run.
  g_previous = current;
  ::sigaction(SIGSEGV, &mine, nullptr);
}

}  // namespace streamrt::ops::read_check
