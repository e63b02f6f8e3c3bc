#pragma once
// Stream capture at the device-agnostic layer: while a stream captures, the Stream and Event
// handles (and the ops tracker) append nodes to a Recording here instead of reaching the
// backend. The backend never sees a captured position (EventImpl::captured()). What a recording
// is (a Graph) is the graph layer's (src/graph/); this is the mechanism on the streams: which
// stream captures into what, joins, captured positions, and the calls a capture refuses. Rules:
// docs/graphs.md.
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "streamrt/detail/work.hpp"
#include "streamrt/error.hpp"
#include "streamrt/impl/backend.hpp"
#include "streamrt/stream.hpp"

namespace streamrt::capture {

// Where positions recorded during a capture find what they stand for once it is over: the
// completion of the latest replay of a graph made from the recording (null before any replay:
// nothing of it was queued). Holds no node, so a tensor's tracking state never keeps the graph
// (and its callables, which hold the tensor's storage) alive: no cycle.
struct ReplayTracker {
  std::mutex mutex;
  std::shared_ptr<impl::EventImpl> last;  // guarded by mutex
};

// What a capture records into (the graph layer's graph): nodes in capture order, each after the
// earlier nodes it depends on. Calls come from one capture at a time.
class Recording {
 public:
  virtual ~Recording() = default;
  // Claims the recording for a capture. Throws Error (naming begin_capture) when another
  // capture fills it or it holds nodes. Called under the capture mutex.
  virtual void start() = 0;
  // Appends a node that runs `work` after `deps` (earlier nodes, sorted, distinct) and returns
  // its index. Called under the capture mutex.
  virtual std::uint32_t add(detail::Work work, const char* label, std::uint64_t stream_id,
                            std::vector<std::uint32_t> deps) = 0;
  // Marks (1) the nodes of `from` and every node they depend on, directly or not, in a vector
  // indexed by node. Called under the capture mutex.
  virtual std::vector<char> ancestors(const std::vector<std::uint32_t>& from) const = 0;
  // Ends the capture; the nodes are dropped unless `keep`. Called without the capture mutex:
  // dropped callables may run code that calls back into streamrt.
  virtual void finish(bool keep) noexcept = 0;
  // The tracker of replays of graphs made from this recording, as it is now.
  virtual std::shared_ptr<ReplayTracker> replays() const = 0;
};

// Number of streams capturing now (origins and joined ones), over all captures.
extern std::atomic<int> g_capturing;

// True while any stream captures: the handles take the slow path only then. Relaxed: a hint;
// a stream's own capture state is read under the capture mutex, and a capture begun by another
// thread is ordered with this thread's calls on that stream only by the user's own
// synchronization (as in CUDA, where racing a launch with begin-capture is undefined).
inline bool active() noexcept {
  return g_capturing.load(std::memory_order_relaxed) != 0;
}

// Starts capturing `s` into `recording` (Stream::begin_capture). Throws Error when `s` already
// captures or joined a capture, or when the recording refuses (Recording::start).
void begin(const std::shared_ptr<impl::StreamImpl>& s, std::shared_ptr<Recording> recording,
           CaptureMode mode);
// Ends the capture begun on `s` and returns its recording (Stream::end_capture). Throws Error
// when `s` did not begin one, when a joined stream was not joined back, or when the capture was
// invalidated: the capture is over, and its recording emptied, in those cases too.
std::shared_ptr<Recording> end(impl::StreamImpl& s);
bool is_capturing(const impl::StreamImpl& s);

// Appends a node for `work` when `s` captures (then `work` is moved from) and returns true;
// returns false when `s` does not capture. Throws Error when the capture was invalidated.
bool launch(impl::StreamImpl& s, detail::Work& work, const char* label);
// A captured position at the current end of `s` when it captures, else null.
std::shared_ptr<impl::EventImpl> record(impl::StreamImpl& s, EventOptions options);
// A record at the current end of `s`: the captured position while `s` captures, else the
// backend's (what every record of the handles and ops goes through).
inline std::shared_ptr<impl::EventImpl> record_position(impl::StreamImpl& s, EventOptions options) {
  if (active()) {
    if (auto p = record(s, options)) return p;
  }
  return s.backend().record(s, options);
}
// Work submitted to `s` later waits for `position` (captured or not, `s` capturing or not):
// joins `s` to a capture, adds graph edges, or forwards to the backend.
void block_slow(const std::shared_ptr<impl::EventImpl>& position,
                const std::shared_ptr<impl::StreamImpl>& s);
inline void block(impl::Backend& b, const std::shared_ptr<impl::EventImpl>& position,
                  const std::shared_ptr<impl::StreamImpl>& s) {
  if (position->captured() || active()) {
    block_slow(position, s);
  } else {
    b.block(position, *s);
  }
}

// Makes the text naming a refused call ("Event::query on an event recorded during the
// capture"), only when it is refused: the helpers below are on hot paths, where no message may be
// built before it is needed.
using RefusedCall = ErrorText (*)();

// The backend position a captured one stands for now: null while its capture runs (after
// invalidating the capture and throwing Error naming `what()`, when `throw_if_active`), the
// latest replay's completion after it (null before any replay: nothing of it was queued).
// Positions that are not captured come back unchanged. `what` may be null when not
// `throw_if_active`.
std::shared_ptr<impl::EventImpl> resolve(const std::shared_ptr<impl::EventImpl>& position,
                                         RefusedCall what, bool throw_if_active = true);
// query_event that accepts captured positions (false while their capture runs). Never throws.
bool query(impl::Backend& b, const std::shared_ptr<impl::EventImpl>& position);

// Stream calls that cannot be captured: invalidate the capture of `s` and throw Error naming
// Stream::`member` (a literal). Inline: every Stream::query and synchronize asks, and only a
// capture anywhere makes it more than a load.
void refuse_if_capturing_slow(const impl::StreamImpl& s, const char* member);
inline void refuse_if_capturing(const impl::StreamImpl& s, const char* member) {
  if (active()) refuse_if_capturing_slow(s, member);
}
// synchronize(device) and other device-wide waits (streamrt::`function`, a literal, taking a
// device): refused as the captures' modes say.
void refuse_device_wide(const char* function);

// The stream id the ops tracker files accesses under: the stream's own id, or while it captures
// an id no real stream has (so that eager work after the capture never counts a graph's access as
// its own stream's, whichever stream the graph is replayed on).
std::uint64_t tracking_id(const impl::StreamImpl& s);

}  // namespace streamrt::capture
