// The model-checked random programs (stress_model.hpp): the programs, the log and the model.
#include "stress_model.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "streamrt/streamrt.hpp"

namespace streamrt_tool {
namespace {

using namespace std::chrono_literals;

constexpr int kStreams = kStressStreams;
constexpr int kEvents = kStressEvents;
constexpr int kHostThreads = kStressHostThreads;

// ---- outcomes ---------------------------------------------------------------------------------
// A failure, cancellation or success as seen by a wait: kClean, kCancelled, or item id + 1.
constexpr long kClean = 0;
constexpr long kTimedOut = -1;
constexpr long kCancelled = -2;
constexpr long kUnexpected = -3;

struct ItemFailure {  // not derived from std::exception
  long item;
};
struct StdItemFailure : std::runtime_error {
  explicit StdItemFailure(long i) : std::runtime_error("item failed"), item(i) {}
  long item;
};

long classify(const std::exception_ptr& p) {
  if (!p) return kClean;
  try {
    std::rethrow_exception(p);
  } catch (const ItemFailure& f) {
    return f.item + 1;
  } catch (const StdItemFailure& f) {
    return f.item + 1;
  } catch (const streamrt::Cancelled&) {
    return kCancelled;
  } catch (long id) {
    return id + 1;
  } catch (...) {
    return kUnexpected;
  }
}

std::string outcome_str(long o) {
  if (o == kClean) return "clean";
  if (o == kTimedOut) return "timed-out/pending";
  if (o == kCancelled) return "Cancelled";
  if (o == kUnexpected) return "unexpected exception";
  return "failure of item " + std::to_string(o - 1);
}

// ---- what the runtime did (written by work, callbacks and host threads) ------------------------

enum Fate : int { kNone = 0, kRan = 1, kSkipped = 2, kDropped = 3 };

struct ItemRec {
  int stream = -1;
  bool fails = false;
  std::atomic<int> runs{0};
  std::atomic<int> fate{kNone};
  std::atomic<int> fate_sets{0};
  std::atomic<long> dropped_by{-1};
  std::atomic<std::uint64_t> start{0}, end{0};
  std::atomic<bool> wrong_current_stream{false};
  std::atomic<bool> on_host{false};  // ran on a host thread that was synchronizing (host-run)
};

// Set on the test's host threads: an item that sees it ran as a host-run item.
thread_local bool tls_host_thread = false;

struct CallbackRec {
  std::atomic<int> calls{0};
  std::atomic<long> outcome{kTimedOut};
};

enum class OpKind { kLaunch, kRecord, kWait, kWaitStream, kCancel, kSync, kEventWait, kCallback };

struct Op {
  std::uint64_t gseq = 0;
  OpKind kind = OpKind::kLaunch;
  int stream = -1;
  int other = -1;     // kWaitStream: the stream waited on
  long item = -1;     // kLaunch
  long version = -1;  // kRecord, kWait, kEventWait, kCallback
  long cancel = -1;   // kCancel: id; count in `count`
  std::uint64_t count = 0;
  long outcome = kTimedOut;  // kSync, kEventWait: what the host saw
  long callback = -1;
};

thread_local long tls_cancel_id = -1;  // set around Stream::cancel(): dropped work dies inside it

struct Round {
  explicit Round(long max_items)
      : items(static_cast<std::size_t>(max_items)),
        callbacks(static_cast<std::size_t>(max_items)) {}
  std::vector<ItemRec> items;
  std::atomic<long> next_item{0};
  std::vector<CallbackRec> callbacks;
  std::atomic<long> next_callback{0};
  std::atomic<long> next_version{0};
  std::atomic<long> next_cancel{0};
  std::atomic<std::uint64_t> gseq{0};
  std::atomic<std::uint64_t> tick{0};

  std::vector<streamrt::Stream> streams;
  std::array<std::mutex, kStreams> stream_locks;
  std::vector<streamrt::Event> events;
  std::array<std::mutex, kEvents> event_locks;
  std::array<long, kEvents> event_version{};  // guarded by event_locks; -1 = not recorded
  std::array<int, kEvents> event_stream{};    // guarded by event_locks: the stream recorded on
  std::vector<std::vector<Op>> logs;          // one per host thread
  std::vector<int> version_stream;            // filled from the log afterwards
};

// Owned by the work item: its destruction tells how the item ended (ran, skipped or dropped).
class Token {
 public:
  Token(Round* r, long item) : round_(r), item_(item) {}
  Token(Token&& o) noexcept : round_(std::exchange(o.round_, nullptr)), item_(o.item_) {}
  Token& operator=(Token&&) = delete;
  ~Token() {
    if (round_ == nullptr) return;
    ItemRec& rec = round_->items[static_cast<std::size_t>(item_)];
    int fate = kSkipped;
    if (rec.runs.load() > 0) {
      fate = kRan;
    } else if (tls_cancel_id >= 0) {
      fate = kDropped;
      rec.dropped_by.store(tls_cancel_id);
    }
    rec.fate.store(fate);
    rec.fate_sets.fetch_add(1);
  }
  Round* round() const { return round_; }
  long item() const { return item_; }

 private:
  Round* round_;
  long item_;
};

// ---- the programs -----------------------------------------------------------------------------

// The random draws of one host thread's program.
class Picker {
 public:
  explicit Picker(std::uint64_t seed) : rng_(seed) {}
  // A number in [0, n).
  int operator()(int n) { return static_cast<int>(rng_() % static_cast<std::uint64_t>(n)); }

 private:
  std::mt19937_64 rng_;
};

// What one pick of a program did: a logged operation, an unlogged one (an inspection or a
// reset), or nothing (it found nothing to do; not counted).
enum class Step { kLogged, kUnlogged, kNothing };

streamrt::Stream& stream_of(Round& r, int s) {
  return r.streams[static_cast<std::size_t>(s)];
}

// Launches an item on `op.stream` that records how and where it ran and fails one time in 100.
void launch_op(Round& r, Op& op, Picker& pick) {
  const int s = op.stream;
  std::lock_guard lock(r.stream_locks[static_cast<std::size_t>(s)]);
  const long id = r.next_item.fetch_add(1);
  ItemRec& rec = r.items[static_cast<std::size_t>(id)];
  rec.stream = s;
  rec.fails = pick(100) == 0;
  const int throw_kind = pick(3);
  const std::uint64_t want_stream = stream_of(r, s).id();
  op.kind = OpKind::kLaunch;
  op.item = id;
  op.gseq = r.gseq.fetch_add(1);
  stream_of(r, s).launch([t = Token(&r, id), want_stream, throw_kind] {
    Round& rr = *t.round();
    ItemRec& me = rr.items[static_cast<std::size_t>(t.item())];
    me.start.store(rr.tick.fetch_add(1) + 1);
    if (streamrt::current_stream().id() != want_stream) me.wrong_current_stream = true;
    if (tls_host_thread) me.on_host = true;
    me.runs.fetch_add(1);
    me.end.store(rr.tick.fetch_add(1) + 1);
    if (me.fails) {
      if (throw_kind == 0) throw ItemFailure{t.item()};
      if (throw_kind == 1) throw StdItemFailure(t.item());
      throw t.item();  // a plain long
    }
  });
}

// Records (or re-records) a random event on `op.stream`.
void record_op(Round& r, Op& op, Picker& pick) {
  const int s = op.stream;
  const int e = pick(kEvents);
  std::lock_guard lock(r.stream_locks[static_cast<std::size_t>(s)]);
  std::lock_guard elock(r.event_locks[static_cast<std::size_t>(e)]);
  op.kind = OpKind::kRecord;
  op.version = r.next_version.fetch_add(1);
  op.gseq = r.gseq.fetch_add(1);
  r.events[static_cast<std::size_t>(e)].record(stream_of(r, s));
  r.event_version[static_cast<std::size_t>(e)] = op.version;
  r.event_stream[static_cast<std::size_t>(e)] = s;
}

// `op.stream` waits on a random event; nothing when the event is not recorded.
Step wait_event_op(Round& r, Op& op, Picker& pick) {
  const int s = op.stream;
  const int e = pick(kEvents);
  std::lock_guard lock(r.stream_locks[static_cast<std::size_t>(s)]);
  std::lock_guard elock(r.event_locks[static_cast<std::size_t>(e)]);
  const long v = r.event_version[static_cast<std::size_t>(e)];
  if (v < 0) return Step::kNothing;
  op.kind = OpKind::kWait;
  op.version = v;
  op.gseq = r.gseq.fetch_add(1);
  stream_of(r, s).wait_event(r.events[static_cast<std::size_t>(e)]);
  return Step::kLogged;
}

// `op.stream` waits on a random stream (itself included).
void wait_stream_op(Round& r, Op& op, Picker& pick) {
  const int s = op.stream;
  const int o = pick(kStreams);
  std::unique_lock l1(r.stream_locks[static_cast<std::size_t>(std::min(s, o))]);
  std::unique_lock<std::mutex> l2;
  if (o != s) l2 = std::unique_lock(r.stream_locks[static_cast<std::size_t>(std::max(s, o))]);
  op.kind = OpKind::kWaitStream;
  op.other = o;
  op.gseq = r.gseq.fetch_add(1);
  stream_of(r, s).wait_stream(stream_of(r, o));
}

// Cancels `op.stream`'s pending work; the items it drops record this cancel's id.
void cancel_op(Round& r, Op& op) {
  const int s = op.stream;
  std::lock_guard lock(r.stream_locks[static_cast<std::size_t>(s)]);
  op.kind = OpKind::kCancel;
  op.cancel = r.next_cancel.fetch_add(1);
  op.gseq = r.gseq.fetch_add(1);
  tls_cancel_id = op.cancel;
  op.count = stream_of(r, s).cancel();
  tls_cancel_id = -1;
}

// The host synchronizes `op.stream`, sometimes with a time-out.
void sync_op(Round& r, Op& op, Picker& pick) {
  const int s = op.stream;
  std::lock_guard lock(r.stream_locks[static_cast<std::size_t>(s)]);
  op.kind = OpKind::kSync;
  op.gseq = r.gseq.fetch_add(1);
  const int how = pick(4);
  try {
    bool done = true;
    if (how == 0) {
      done = stream_of(r, s).synchronize_for(0ns);
    } else if (how == 1) {
      done = stream_of(r, s).synchronize_for(50us);
    } else {
      stream_of(r, s).synchronize();
    }
    op.outcome = done ? kClean : kTimedOut;
  } catch (...) {
    op.outcome = classify(std::current_exception());
  }
}

// What the host sees of `ev` by the way `how` picks: a wait, a wait with a time-out, wait_all_for
// or a state query.
long host_event_outcome(const streamrt::Event& ev, int how) {
  try {
    if (how == 0) {
      ev.synchronize();
      return kClean;
    }
    if (how == 1) return ev.wait_for(20us) ? kClean : kTimedOut;
    if (how == 2) {
      std::array<streamrt::Event, 1> one{ev};
      return streamrt::wait_all_for(one, 200us) ? kClean : kTimedOut;
    }
    switch (ev.state()) {
      case streamrt::EventState::Complete:
        return kClean;
      case streamrt::EventState::Cancelled:
        return kCancelled;
      // Which failure: ask the (complete) event itself.
      case streamrt::EventState::Failed:
        ev.synchronize();
        return kUnexpected;
      default:
        return kTimedOut;
    }
  } catch (...) {
    return classify(std::current_exception());
  }
}

// The host waits on or queries a random event; nothing when it is not recorded.
Step event_wait_op(Round& r, Op& op, Picker& pick) {
  const int e = pick(kEvents);
  int es = -1;
  {
    std::lock_guard elock(r.event_locks[static_cast<std::size_t>(e)]);
    if (r.event_version[static_cast<std::size_t>(e)] < 0) return Step::kNothing;
    es = r.event_stream[static_cast<std::size_t>(e)];
  }
  // A wait that raises a failure clears it on the event's stream at that stream's current end
  // (rule 10): holding that stream's lock keeps launches from racing with the clear in the log.
  std::lock_guard slock(r.stream_locks[static_cast<std::size_t>(es)]);
  std::lock_guard elock(r.event_locks[static_cast<std::size_t>(e)]);
  const long v = r.event_version[static_cast<std::size_t>(e)];
  if (v < 0 || r.event_stream[static_cast<std::size_t>(e)] != es) return Step::kNothing;
  op.stream = es;
  op.kind = OpKind::kEventWait;
  op.version = v;
  op.gseq = r.gseq.fetch_add(1);
  const auto& ev = r.events[static_cast<std::size_t>(e)];
  op.outcome = host_event_outcome(ev, pick(4));
  return Step::kLogged;
}

// A completion callback on a random event; nothing when it is not recorded.
Step callback_op(Round& r, Op& op, Picker& pick) {
  const int e = pick(kEvents);
  std::lock_guard elock(r.event_locks[static_cast<std::size_t>(e)]);
  const long v = r.event_version[static_cast<std::size_t>(e)];
  if (v < 0) return Step::kNothing;
  op.kind = OpKind::kCallback;
  op.version = v;
  op.callback = r.next_callback.fetch_add(1);
  op.gseq = r.gseq.fetch_add(1);
  CallbackRec* cb = &r.callbacks[static_cast<std::size_t>(op.callback)];
  r.events[static_cast<std::size_t>(e)].on_complete([cb](std::exception_ptr p) {
    cb->outcome.store(classify(p));
    cb->calls.fetch_add(1);
  });
  return Step::kLogged;
}

// Resets a random event (unlogged: the model forgets the event's version).
void reset_op(Round& r, Picker& pick) {
  const int e = pick(kEvents);
  std::lock_guard elock(r.event_locks[static_cast<std::size_t>(e)]);
  r.events[static_cast<std::size_t>(e)].reset();
  r.event_version[static_cast<std::size_t>(e)] = -1;
}

// One pick of a program: `roll` (0-999) chooses the operation, by the weights below.
Step host_op(Round& r, int roll, Op& op, Picker& pick) {
  if (roll < 450) {
    launch_op(r, op, pick);
  } else if (roll < 580) {
    record_op(r, op, pick);
  } else if (roll < 700) {
    return wait_event_op(r, op, pick);
  } else if (roll < 740) {
    wait_stream_op(r, op, pick);
  } else if (roll < 770) {
    cancel_op(r, op);
  } else if (roll < 840) {
    sync_op(r, op, pick);
  } else if (roll < 930) {
    return event_wait_op(r, op, pick);
  } else if (roll < 970) {
    return callback_op(r, op, pick);
  } else if (roll < 980) {
    reset_op(r, pick);
    return Step::kUnlogged;
  } else {  // lock-free inspection; not modelled (racy by nature), must just not break things
    (void)stream_of(r, op.stream).query();
    (void)stream_of(r, op.stream).pending();
    return Step::kUnlogged;
  }
  return Step::kLogged;
}

// Performs `ops` operations (picks that find nothing to do, e.g. a wait on an unrecorded event,
// are not counted); returns how many of them were unlogged inspections and resets.
long host_thread(Round& r, int thread, long ops, std::uint64_t seed) {
  Picker pick(seed);
  auto& log = r.logs[static_cast<std::size_t>(thread)];
  log.reserve(static_cast<std::size_t>(ops) + 16);
  long unlogged = 0;
  for (long done = 0; done < ops;) {
    const int roll = pick(1000);
    Op op;
    op.stream = pick(kStreams);
    const Step step = host_op(r, roll, op, pick);
    if (step == Step::kNothing) continue;
    if (step == Step::kLogged) {
      log.push_back(op);
    } else {
      ++unlogged;
    }
    ++done;
  }
  return unlogged;
}

// ---- the model --------------------------------------------------------------------------------

struct Checker {
  std::vector<std::string> errors;
  void fail(const std::string& what) {
    if (errors.size() < 20) errors.push_back(what);
  }
};

struct StreamModel {
  long active = kClean;  // unreported failure: kClean, kCancelled (inherited) or item + 1
  long cancel_open = -1;
  std::vector<long> clock = std::vector<long>(kStreams, 0);
  std::vector<long> items;  // in submission order; index k is item number k + 1
};

using Totals = StressTotals;

// The model's state while it replays the log: per record (version) what a wait on it must see,
// per stream its unreported failure and vector clock, per item what it depends on.
struct Model {
  explicit Model(const Round& r)
      : vstate(static_cast<std::size_t>(r.next_version.load()), kTimedOut),
        vstream(static_cast<std::size_t>(r.next_version.load()), -1),
        vclock(static_cast<std::size_t>(r.next_version.load())),
        item_deps(static_cast<std::size_t>(r.next_item.load())),
        item_index(static_cast<std::size_t>(r.next_item.load()), 0),
        dropped_by(static_cast<std::size_t>(r.next_cancel.load())),
        m(kStreams) {}
  std::vector<long> vstate;
  std::vector<int> vstream;
  std::vector<std::vector<long>> vclock;
  std::vector<std::vector<long>> item_deps;
  std::vector<long> item_index;
  std::vector<std::vector<long>> dropped_by;
  std::vector<StreamModel> m;
};

long state_of(const StreamModel& sm) {
  if (sm.active != kClean) return sm.active;
  return sm.cancel_open >= 0 ? kCancelled : kClean;
}

// A wait of stream `sm` on work whose state is `state` and clock `clock`.
void inherit(StreamModel& sm, long state, const std::vector<long>& clock) {
  if (sm.active == kClean && state != kClean) {
    sm.active = state;
    sm.cancel_open = -1;  // a failure closes an open cancelled range
  }
  for (int k = 0; k < kStreams; ++k)
    sm.clock[static_cast<std::size_t>(k)] =
        std::max(sm.clock[static_cast<std::size_t>(k)], clock[static_cast<std::size_t>(k)]);
}

// A launch: the item must have run, been skipped or dropped as the stream's state says.
void model_launch(Round& r, Model& md, const Op& op, Checker& c, Totals& t) {
  StreamModel* sm = &md.m[static_cast<std::size_t>(op.stream)];
  ItemRec& rec = r.items[static_cast<std::size_t>(op.item)];
  md.item_deps[static_cast<std::size_t>(op.item)] = sm->clock;
  sm->clock[static_cast<std::size_t>(op.stream)] += 1;
  md.item_index[static_cast<std::size_t>(op.item)] = sm->clock[static_cast<std::size_t>(op.stream)];
  sm->items.push_back(op.item);
  ++t.items;
  if (rec.fails) ++t.failing;
  const int fate = rec.fate.load();
  if (fate == kDropped) {
    ++t.dropped;
    const long cid = rec.dropped_by.load();
    if (cid < 0 || cid >= static_cast<long>(md.dropped_by.size())) {
      c.fail("item " + std::to_string(op.item) + " dropped by an unknown cancel");
      return;
    }
    md.dropped_by[static_cast<std::size_t>(cid)].push_back(op.item);
    if (sm->active == kClean && sm->cancel_open < 0) sm->cancel_open = cid;
    return;
  }
  const int expected = sm->active != kClean ? kSkipped : kRan;
  if (fate != expected) {
    c.fail("item " + std::to_string(op.item) + " on stream " + std::to_string(op.stream) +
           ": fate " + std::to_string(fate) + ", model expects " + std::to_string(expected) +
           " (active " + outcome_str(sm->active) + ")");
  }
  if (fate == kRan) {
    ++t.ran;
    if (rec.on_host.load()) ++t.host_run;
    if (rec.fails) {
      sm->active = op.item + 1;
    }
  } else if (fate == kSkipped) {
    ++t.skipped;
  }
}

// A cancel: it dropped exactly the items launched on its stream from its first victim on.
void model_cancel(Round& r, Model& md, const Op& op, Checker& c, Totals& t) {
  StreamModel* sm = &md.m[static_cast<std::size_t>(op.stream)];
  ++t.cancels;
  const auto& d = md.dropped_by[static_cast<std::size_t>(op.cancel)];
  if (d.size() != op.count) {
    c.fail("cancel " + std::to_string(op.cancel) + " returned " + std::to_string(op.count) +
           " but dropped " + std::to_string(d.size()) + " items");
  }
  if (d.empty()) return;
  const long first = md.item_index[static_cast<std::size_t>(d.front())];
  const long last = sm->clock[static_cast<std::size_t>(op.stream)];
  if (last - first + 1 != static_cast<long>(d.size())) {
    c.fail("cancel " + std::to_string(op.cancel) + " dropped a non-contiguous set");
  }
  for (long id : d) {
    if (r.items[static_cast<std::size_t>(id)].stream != op.stream) {
      c.fail("cancel " + std::to_string(op.cancel) + " dropped work of another stream");
    }
  }
  if (sm->cancel_open == op.cancel) {
    sm->cancel_open = -1;  // the cancel's mark ends the cancelled range
  } else if (sm->cancel_open >= 0) {
    c.fail("cancelled ranges overlap on stream " + std::to_string(op.stream));
  }
}

// A host synchronize or event wait: what it saw must be what the model predicts.
void model_host_wait(const Model& md, StreamModel* sm, const Op& op, Checker& c, Totals& t) {
  if (op.kind == OpKind::kSync) {
    ++t.syncs;
    if (op.outcome == kTimedOut) {
      ++t.timeouts;
      return;  // changes nothing
    }
    if (op.outcome != sm->active) {
      c.fail("synchronize of stream " + std::to_string(op.stream) + " at op " +
             std::to_string(op.gseq) + " saw " + outcome_str(op.outcome) +
             ", model: " + outcome_str(sm->active));
    }
    sm->active = kClean;
    return;
  }
  ++t.event_waits;
  if (op.outcome == kTimedOut) {
    ++t.timeouts;
    return;
  }
  const long want = md.vstate[static_cast<std::size_t>(op.version)];
  if (op.outcome != want) {
    c.fail("event wait on version " + std::to_string(op.version) + " at op " +
           std::to_string(op.gseq) + " saw " + outcome_str(op.outcome) +
           ", model: " + outcome_str(want));
  }
  // Rule 10: a failure raised by a wait is reported; when it is the active failure of the
  // event's stream, work launched there from now on runs. A cancellation is not cleared.
  if (op.outcome > kClean && sm->active == op.outcome) sm->active = kClean;
}

// A completion callback: it ran once and saw what the model predicts for its record.
void model_callback(const Round& r, const Model& md, const Op& op, Checker& c, Totals& t) {
  ++t.callbacks;
  const CallbackRec& cb = r.callbacks[static_cast<std::size_t>(op.callback)];
  const long want = md.vstate[static_cast<std::size_t>(op.version)];
  if (cb.calls.load() != 1) {
    c.fail("callback " + std::to_string(op.callback) + " ran " + std::to_string(cb.calls.load()) +
           " times");
  } else if (cb.outcome.load() != want) {
    c.fail("callback on version " + std::to_string(op.version) + " saw " +
           outcome_str(cb.outcome.load()) + ", model: " + outcome_str(want));
  }
}

// Replays one logged operation on the model, checking what the runtime did against it.
void model_op(Round& r, Model& md, const Op& op, Checker& c, Totals& t) {
  StreamModel* sm = op.stream >= 0 ? &md.m[static_cast<std::size_t>(op.stream)] : nullptr;
  switch (op.kind) {
    case OpKind::kLaunch:
      model_launch(r, md, op, c, t);
      break;
    case OpKind::kRecord:
      md.vstate[static_cast<std::size_t>(op.version)] = state_of(*sm);
      md.vstream[static_cast<std::size_t>(op.version)] = op.stream;
      md.vclock[static_cast<std::size_t>(op.version)] = sm->clock;
      break;
    case OpKind::kWait: {
      ++t.waits;
      const auto v = static_cast<std::size_t>(op.version);
      if (md.vstream[v] == op.stream) break;  // same stream: in order already, nothing inherited
      inherit(*sm, md.vstate[v], md.vclock[v]);
      break;
    }
    case OpKind::kWaitStream: {
      ++t.waits;
      if (op.other == op.stream) break;
      const StreamModel& other = md.m[static_cast<std::size_t>(op.other)];
      inherit(*sm, state_of(other), other.clock);
      break;
    }
    case OpKind::kCancel:
      model_cancel(r, md, op, c, t);
      break;
    case OpKind::kSync:
    case OpKind::kEventWait:
      model_host_wait(md, sm, op, c, t);
      break;
    case OpKind::kCallback:
      model_callback(r, md, op, c, t);
      break;
  }
}

// Every item ended exactly once, ran at most once, in a consistent way.
void check_item_ends(const Round& r, Checker& c) {
  const long nitems = r.next_item.load();
  for (long id = 0; id < nitems; ++id) {
    const ItemRec& rec = r.items[static_cast<std::size_t>(id)];
    if (rec.fate_sets.load() != 1) {
      c.fail("item " + std::to_string(id) + " was destroyed " +
             std::to_string(rec.fate_sets.load()) + " times (lost or duplicated)");
    }
    if (rec.runs.load() != (rec.fate.load() == kRan ? 1 : 0)) {
      c.fail("item " + std::to_string(id) + " ran " + std::to_string(rec.runs.load()) + " times");
    }
    if (rec.wrong_current_stream.load()) {
      c.fail("item " + std::to_string(id) + " did not run with its stream current");
    }
  }
}

// Order and waits: each item that ran started after the last item that ran, among those it
// depends on, on every stream, had ended.
void check_order(const Round& r, const Model& md, Checker& c) {
  const auto& m = md.m;
  std::vector<std::vector<long>> last_ran(kStreams);  // [stream][k] = last ran item among 1..k
  for (int s = 0; s < kStreams; ++s) {
    auto& lr = last_ran[static_cast<std::size_t>(s)];
    lr.assign(m[static_cast<std::size_t>(s)].items.size() + 1, -1);
    for (std::size_t k = 1; k <= m[static_cast<std::size_t>(s)].items.size(); ++k) {
      const long id = m[static_cast<std::size_t>(s)].items[k - 1];
      lr[k] = r.items[static_cast<std::size_t>(id)].fate.load() == kRan ? id : lr[k - 1];
    }
  }
  const long nitems = r.next_item.load();
  for (long id = 0; id < nitems; ++id) {
    const ItemRec& rec = r.items[static_cast<std::size_t>(id)];
    if (rec.fate.load() != kRan) continue;
    const auto& deps = md.item_deps[static_cast<std::size_t>(id)];
    for (int s = 0; s < kStreams; ++s) {
      const long k = deps[static_cast<std::size_t>(s)];
      if (k <= 0) continue;
      const long dep = last_ran[static_cast<std::size_t>(s)][static_cast<std::size_t>(k)];
      if (dep < 0) continue;
      if (r.items[static_cast<std::size_t>(dep)].end.load() >= rec.start.load()) {
        c.fail("item " + std::to_string(id) + " (stream " + std::to_string(rec.stream) +
               ") started before item " + std::to_string(dep) + " (stream " + std::to_string(s) +
               ") it depends on had ended");
      }
    }
  }
}

// Replays the round's log, in global sequence order, on the model and checks the runtime's
// behaviour against it.
Totals check_round(Round& r, Checker& c) {
  Totals t;
  std::vector<Op> ops;
  for (auto& l : r.logs) ops.insert(ops.end(), l.begin(), l.end());
  std::sort(ops.begin(), ops.end(), [](const Op& a, const Op& b) { return a.gseq < b.gseq; });
  t.ops = static_cast<long>(ops.size());
  Model md(r);
  for (const Op& op : ops) model_op(r, md, op, c, t);
  check_item_ends(r, c);
  check_order(r, md, c);
  return t;
}

}  // namespace

StressReport run_stress_round(const StressRound& round) {
  const int workers = round.workers;
  const long ops = std::max<long>(round.ops, kHostThreads);
  const std::uint64_t seed = round.seed;
  const int saved_threads = streamrt::cpu::num_threads();
  streamrt::cpu::set_num_threads(workers);
  Round r(ops + 16);
  const auto [least, greatest] = streamrt::Stream::priority_range();
  std::mt19937_64 setup(seed);
  for (int s = 0; s < kStreams; ++s) {
    const int span = least - greatest + 1;
    r.streams.emplace_back(streamrt::Device{}, least - static_cast<int>(setup() % span));
  }
  for (int e = 0; e < kEvents; ++e) {
    r.events.emplace_back(
        streamrt::EventOptions{.enable_timing = e % 4 == 0, .blocking = e % 3 == 0});
  }
  r.event_version.fill(-1);
  r.logs.resize(kHostThreads);

  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> hosts;
  std::atomic<long> unlogged{0};
  for (int t = 0; t < kHostThreads; ++t) {
    hosts.emplace_back([&, t] {
      tls_host_thread = true;
      unlogged +=
          host_thread(r, t, ops / kHostThreads, seed * 1000003ULL + static_cast<std::uint64_t>(t));
    });
  }
  for (auto& h : hosts) h.join();
  // Final synchronize of every stream: consumes what is left, checked like any other.
  for (int s = 0; s < kStreams; ++s) {
    Op op;
    op.kind = OpKind::kSync;
    op.stream = s;
    op.gseq = r.gseq.fetch_add(1);
    try {
      r.streams[static_cast<std::size_t>(s)].synchronize();
      op.outcome = kClean;
    } catch (...) {
      op.outcome = classify(std::current_exception());
    }
    r.logs[0].push_back(op);
  }
  // Callbacks run after completion, as separate tasks: wait (bounded) until all have run.
  const long ncb = r.next_callback.load();
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  for (long i = 0; i < ncb; ++i) {
    while (r.callbacks[static_cast<std::size_t>(i)].calls.load() == 0 &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(100us);
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  Checker c;
  StressReport report;
  report.totals = check_round(r, c);
  report.ops_done = report.totals.ops + unlogged.load();
  report.seconds = secs;
  report.host_run = r.streams[0].host_run();
  report.violations = std::move(c.errors);
  streamrt::cpu::set_num_threads(saved_threads);
  return report;
}

}  // namespace streamrt_tool
