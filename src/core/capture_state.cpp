// Stream capture: the capture state of streams, captured positions, joins and the refusals.
// One mutex guards all of it: capture is a one-time setup path, never the hot path (replays are).
#include "capture_state.hpp"

#include <algorithm>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "streamrt/error.hpp"
#include "streamrt/stream.hpp"

namespace streamrt {

std::string_view to_string(CaptureMode mode) noexcept {
  switch (mode) {
    case CaptureMode::Global:
      return "global";
    case CaptureMode::ThreadLocal:
      return "thread_local";
    case CaptureMode::Relaxed:
      return "relaxed";
  }
  return "unknown";
}

}  // namespace streamrt

namespace streamrt::capture {

std::atomic<int> g_capturing{0};

namespace {

struct Session {
  std::shared_ptr<Recording> graph;  // released when the capture ends (no cycle)
  std::shared_ptr<ReplayTracker> replays;
  std::shared_ptr<impl::StreamImpl> origin;
  CaptureMode mode = CaptureMode::Global;
  std::thread::id thread;
  bool active = true;
  ErrorText invalid;  // why the capture was invalidated; empty = valid
  std::vector<std::shared_ptr<impl::StreamImpl>> members;  // origin first
};

// A place in a graph: the nodes that work waiting on it must follow.
class CapturedPosition final : public impl::EventImpl {
 public:
  CapturedPosition(impl::Backend& b, Device d, EventOptions o, std::shared_ptr<Session> s,
                   std::vector<std::uint32_t> frontier)
      : impl::EventImpl(b, d, o, true), session(std::move(s)), frontier(std::move(frontier)) {}
  const std::shared_ptr<Session> session;
  const std::vector<std::uint32_t> frontier;
};

struct StreamState {
  std::shared_ptr<Session> session;
  std::vector<std::uint32_t> frontier;  // nodes the next captured work depends on
  std::uint64_t tracking_id = 0;
};

std::mutex g_mutex;
std::unordered_map<const impl::StreamImpl*, StreamState> g_streams;  // guarded by g_mutex
std::vector<std::shared_ptr<Session>> g_sessions;                    // guarded by g_mutex
std::uint64_t g_next_tracking_id = 1;                                // guarded by g_mutex

// Tracking ids of capturing streams have the top bit set; real stream ids never do.
constexpr std::uint64_t kCaptureIdBit = std::uint64_t{1} << 63;

// As Stream::str() (no handle needed).
std::string name(const impl::StreamImpl& s) {
  return s.device().str() + " stream " + std::to_string(s.id()) + " (priority " +
         std::to_string(s.priority()) + ")";
}

StreamState* find(const impl::StreamImpl& s) {
  auto it = g_streams.find(&s);
  return it == g_streams.end() ? nullptr : &it->second;
}

// Marks the capture invalid (the first reason is kept) and builds the error to throw.
Error invalidate(Session& session, const ErrorText& what) {
  const ErrorText reason = what + " cannot be captured";
  if (session.invalid.empty()) session.invalid = reason;
  return Error(reason + ": the capture begun on " + name(*session.origin) +
               " is invalidated; end it (" + api::member("Stream", "end_capture") +
               " throws) and move the call out of the captured region");
}

void check_valid(const Session& session) {
  if (!session.invalid.empty()) {
    throw Error("this stream's capture was invalidated earlier (" + session.invalid +
                "); end the capture (" + api::member("Stream", "end_capture") +
                " throws) and capture again");
  }
}

void merge(std::vector<std::uint32_t>& into, const std::vector<std::uint32_t>& from) {
  for (auto n : from) {
    if (std::find(into.begin(), into.end(), n) == into.end()) into.push_back(n);
  }
}

void add_member(const std::shared_ptr<Session>& session, const std::shared_ptr<impl::StreamImpl>& s,
                std::vector<std::uint32_t> frontier) {
  StreamState st;
  st.session = session;
  st.frontier = std::move(frontier);
  st.tracking_id = kCaptureIdBit | g_next_tracking_id++;
  g_streams.emplace(s.get(), std::move(st));
  session->members.push_back(s);
  // Relaxed: see active().
  g_capturing.fetch_add(1, std::memory_order_relaxed);
}

std::shared_ptr<impl::EventImpl> last_replay(const Session& session) {
  std::lock_guard lock(session.replays->mutex);
  return session.replays->last;
}

}  // namespace

void begin(const std::shared_ptr<impl::StreamImpl>& s, std::shared_ptr<Recording> recording,
           CaptureMode mode) {
  auto session = std::make_shared<Session>();
  session->replays = recording->replays();
  session->graph = std::move(recording);
  session->origin = s;
  session->mode = mode;
  session->thread = std::this_thread::get_id();
  std::lock_guard lock(g_mutex);
  if (StreamState* st = find(*s)) {
    if (st->session->origin == s) {
      throw Error(api::member("Stream", "begin_capture") + ": " + name(*s) +
                  " is already capturing (nested capture on one stream is refused); call " +
                  api::member("Stream", "end_capture") + " first, or capture on another stream");
    }
    throw Error(api::member("Stream", "begin_capture") + ": " + name(*s) +
                " joined the capture begun on " + name(*st->session->origin) +
                "; it cannot begin its own until that one ends");
  }
  g_sessions.reserve(g_sessions.size() + 1);
  session->members.reserve(1);
  session->graph->start();  // last check; nothing below throws but the member's entry
  try {
    add_member(session, s, {});
  } catch (...) {
    session->graph->finish(true);  // empty: nothing is destroyed under the mutex
    throw;
  }
  g_sessions.push_back(session);
}

namespace {

// The members of `session` (origin excluded) with captured work that the origin's end does not
// depend on, as "name, name"; empty when every one was joined back. Capture mutex held.
std::string unjoined_members(const Session& session, const StreamState& origin) {
  const std::vector<char> joined = session.graph->ancestors(origin.frontier);
  std::string unjoined;
  for (std::size_t m = 1; m < session.members.size(); ++m) {
    const StreamState& ms = g_streams.at(session.members[m].get());
    for (auto n : ms.frontier) {
      if (!joined[n]) {
        unjoined += (unjoined.empty() ? "" : ", ") + name(*session.members[m]);
        break;
      }
    }
  }
  return unjoined;
}

// Ends `session`: its streams leave the capture. Capture mutex held.
void close(const std::shared_ptr<Session>& session) {
  for (const auto& m : session->members) g_streams.erase(m.get());
  // Relaxed: see active().
  g_capturing.fetch_sub(static_cast<int>(session->members.size()), std::memory_order_relaxed);
  session->active = false;
  std::erase(g_sessions, session);
}

}  // namespace

std::shared_ptr<Recording> end(impl::StreamImpl& s) {
  std::shared_ptr<Session> session;
  ErrorText invalid;
  std::string unjoined;
  std::shared_ptr<Recording> graph;
  {
    std::lock_guard lock(g_mutex);
    StreamState* st = find(s);
    if (st == nullptr) {
      throw Error(api::member("Stream", "end_capture") + ": " + name(s) +
                  " is not capturing; call " + api::member("Stream", "begin_capture") +
                  " on it first");
    }
    session = st->session;
    if (session->origin.get() != &s) {
      throw Error(api::member("Stream", "end_capture") + ": " + name(s) +
                  " joined the capture begun on " + name(*session->origin) + "; call " +
                  api::member("Stream", "end_capture") + " on that stream");
    }
    invalid = session->invalid;
    // Joined back = everything a joined stream captured is an ancestor of the origin's end.
    if (invalid.empty()) unjoined = unjoined_members(*session, *st);
    graph = std::move(session->graph);
    close(session);
  }
  // After the mutex: user callables and stream handles may run code that calls back into
  // streamrt (a Python callable takes the GIL).
  session->members.clear();
  graph->finish(invalid.empty() && unjoined.empty());
  if (!invalid.empty()) {
    throw Error(api::member("Stream", "end_capture") + ": the capture was invalidated (" + invalid +
                "); the graph is left empty: capture again without that call");
  }
  if (!unjoined.empty()) {
    throw Error(api::member("Stream", "end_capture") + ": " + unjoined +
                " joined the capture (by waiting on an event recorded during it) and was not "
                "joined back: record an event on it after its last captured work and make " +
                name(s) + " wait on that event before " + api::member("Stream", "end_capture") +
                "; the graph is left empty");
  }
  return graph;
}

bool is_capturing(const impl::StreamImpl& s) {
  if (!active()) return false;
  std::lock_guard lock(g_mutex);
  return find(s) != nullptr;
}

bool launch(impl::StreamImpl& s, detail::Work& work, const char* label) {
  std::lock_guard lock(g_mutex);
  StreamState* st = find(s);
  if (st == nullptr) return false;
  check_valid(*st->session);
  std::vector<std::uint32_t> deps = st->frontier;
  std::sort(deps.begin(), deps.end());
  const std::uint32_t index =
      st->session->graph->add(std::move(work), label, s.id(), std::move(deps));
  st->frontier.assign(1, index);
  return true;
}

std::shared_ptr<impl::EventImpl> record(impl::StreamImpl& s, EventOptions options) {
  std::lock_guard lock(g_mutex);
  StreamState* st = find(s);
  if (st == nullptr) return nullptr;
  check_valid(*st->session);
  return std::make_shared<CapturedPosition>(s.backend(), s.device(), options, st->session,
                                            st->frontier);
}

void block_slow(const std::shared_ptr<impl::EventImpl>& position,
                const std::shared_ptr<impl::StreamImpl>& s) {
  if (!position->captured()) {
    {
      std::lock_guard lock(g_mutex);
      StreamState* st = find(*s);
      if (st == nullptr) {
        s->backend().block(position, *s);
        return;
      }
      check_valid(*st->session);
    }
    // Work that has completed needs no edge: a replay runs after it in any case.
    if (s->backend().query_event(*position)) return;
    std::lock_guard lock(g_mutex);
    if (StreamState* st = find(*s)) {
      throw invalidate(*st->session,
                       "a wait on work queued outside the capture and still pending (a graph "
                       "cannot depend on work outside it; synchronize before capturing)");
    }
    s->backend().block(position, *s);
    return;
  }
  const auto& cp = static_cast<const CapturedPosition&>(*position);
  std::shared_ptr<impl::EventImpl> real;
  {
    std::lock_guard lock(g_mutex);
    if (cp.session->active) {
      check_valid(*cp.session);
      if (StreamState* st = find(*s)) {
        if (st->session != cp.session) {
          throw invalidate(*st->session, "a wait on an event recorded in another capture");
        }
        merge(st->frontier, cp.frontier);
        return;
      }
      add_member(cp.session, s, cp.frontier);  // the fork: `s` joins the capture
      return;
    }
    real = last_replay(*cp.session);
  }
  if (real) block_slow(real, s);
}

std::shared_ptr<impl::EventImpl> resolve(const std::shared_ptr<impl::EventImpl>& position,
                                         RefusedCall what, bool throw_if_active) {
  if (!position->captured()) return position;
  const auto& cp = static_cast<const CapturedPosition&>(*position);
  std::lock_guard lock(g_mutex);
  if (cp.session->active) {
    if (throw_if_active) throw invalidate(*cp.session, what());
    return nullptr;
  }
  return last_replay(*cp.session);
}

bool query(impl::Backend& b, const std::shared_ptr<impl::EventImpl>& position) {
  if (!position->captured()) return b.query_event(*position);
  auto real = resolve(position, nullptr, false);
  if (!real) {
    std::lock_guard lock(g_mutex);
    return !static_cast<const CapturedPosition&>(*position).session->active;
  }
  return b.query_event(*real);
}

void refuse_if_capturing_slow(const impl::StreamImpl& s, const char* member) {
  std::lock_guard lock(g_mutex);
  if (StreamState* st = find(s)) {
    throw invalidate(*st->session,
                     api::member("Stream", member) + " on a capturing stream (" + name(s) + ")");
  }
}

void refuse_device_wide(const char* function) {
  if (!active()) return;
  std::lock_guard lock(g_mutex);
  const auto me = std::this_thread::get_id();
  for (const auto& session : g_sessions) {
    if (session->mode == CaptureMode::Global ||
        (session->mode == CaptureMode::ThreadLocal && session->thread == me)) {
      throw invalidate(*session, api::function(function) + "(device) during a capture in " +
                                     std::string(to_string(session->mode)) + " mode (use " +
                                     api::enumerator("CaptureMode", "Relaxed") + " to allow it)");
    }
  }
}

std::uint64_t tracking_id(const impl::StreamImpl& s) {
  if (!active()) return s.id();
  std::lock_guard lock(g_mutex);
  StreamState* st = find(s);
  return st == nullptr ? s.id() : st->tracking_id;
}

}  // namespace streamrt::capture
