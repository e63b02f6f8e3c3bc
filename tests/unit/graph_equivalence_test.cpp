// Equivalence of eager execution and capture + replay: random programs over several streams
// (launches, event records, event and stream waits, tensor ops through the tracker) run eagerly
// once, then are captured and replayed many times. Every run must honour the program's order
// (each item starts after every item it depends on through stream order and waits has ended,
// checked with a global sequence) and run each item exactly once, and the tensors must end equal
// to the eager ones bit for bit. Seeds: STREAMRT_GRAPH_SEED replays a failing run's programs.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "test_util.hpp"

namespace streamrt {
namespace {

using streamrt_test::WorkersTest;

constexpr int kStreams = 4;
constexpr int kEvents = 4;
constexpr int kRegisters = 4;
constexpr int kOps = 48;
constexpr int kPrograms = 12;
constexpr int kReplays = 8;
constexpr std::int64_t kElems = 64;

std::uint64_t base_seed() {
  const char* v = std::getenv("STREAMRT_GRAPH_SEED");
  if (v != nullptr && *v != '\0') return std::strtoull(v, nullptr, 10);
  return std::random_device{}();
}

enum class Kind { Launch, Record, WaitEvent, WaitStream, Add, Scale, Sub };

struct Op {
  Kind kind;
  int stream;
  int a = 0, b = 0, d = 0;  // event / other stream / registers
};

// A program and its model: for each launched item, the items that must have ended before it
// starts (stream order and waits, transitively).
struct Program {
  std::vector<Op> ops;
  int items = 0;
  std::vector<std::vector<int>> must_follow;  // per item
};

Program make_program(std::mt19937_64& rng) {
  Program p;
  // Per stream and event: the items that precede (as a bitset over items).
  std::vector<std::vector<char>> stream_before(kStreams), event_before(kEvents);
  std::vector<bool> recorded(kEvents, false);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<std::uint64_t>(n)); };
  auto grow = [&](int items) {
    for (auto* v : {&stream_before, &event_before}) {
      for (auto& bits : *v) bits.resize(static_cast<std::size_t>(items), 0);
    }
  };
  for (int i = 0; i < kOps; ++i) {
    Op op{static_cast<Kind>(pick(7)), pick(kStreams)};
    switch (op.kind) {
      case Kind::Launch: {
        const int item = p.items++;
        grow(p.items);
        std::vector<int> deps;
        for (int j = 0; j < item; ++j) {
          if (stream_before[op.stream][j]) deps.push_back(j);
        }
        p.must_follow.push_back(std::move(deps));
        stream_before[op.stream][item] = 1;
        op.a = item;
        break;
      }
      case Kind::Record:
        op.a = pick(kEvents);
        event_before[op.a] = stream_before[op.stream];
        recorded[op.a] = true;
        break;
      case Kind::WaitEvent:
        op.a = pick(kEvents);
        if (!recorded[op.a]) continue;  // only events recorded by this program
        for (std::size_t j = 0; j < event_before[op.a].size(); ++j) {
          stream_before[op.stream][j] |= event_before[op.a][j];
        }
        break;
      case Kind::WaitStream:
        op.b = pick(kStreams);
        for (std::size_t j = 0; j < stream_before[op.b].size(); ++j) {
          stream_before[op.stream][j] |= stream_before[op.b][j];
        }
        break;
      default:
        op.a = pick(kRegisters);
        op.b = pick(kRegisters);
        op.d = pick(kRegisters);
        break;
    }
    p.ops.push_back(op);
  }
  return p;
}

// What one run of a program saw: per item, the sequence numbers of its start and end.
struct Trace {
  std::atomic<std::uint64_t> clock{0};
  std::vector<std::atomic<std::uint64_t>> start, end;
  std::vector<std::atomic<int>> runs;
  explicit Trace(int items) : start(items), end(items), runs(items) {}
  void reset() {
    clock = 0;
    for (auto& r : runs) r = 0;
  }
};

struct Machine {
  std::vector<Stream> streams = std::vector<Stream>(kStreams);
  std::vector<Event> events = std::vector<Event>(kEvents);
  std::vector<Tensor> regs;

  explicit Machine(std::uint64_t seed) {
    for (int r = 0; r < kRegisters; ++r) regs.push_back(randn({kElems}, seed + r));
    synchronize();
  }

  // Runs `p` with streams 1.. forked from stream 0 at the start and joined back at the end (as a
  // capture needs; the same in the eager run).
  void run(const Program& p, Trace& trace) {
    Stream& origin = streams[0];
    for (int k = 1; k < kStreams; ++k) streams[k].wait_stream(origin);
    for (const Op& op : p.ops) {
      Stream& s = streams[op.stream];
      StreamContext ctx(s);
      switch (op.kind) {
        case Kind::Launch:
          s.launch([&trace, item = op.a] {
            trace.start[item] = trace.clock.fetch_add(1) + 1;
            trace.runs[item].fetch_add(1);
            // Busy for a while, so that items a wrong plan put side by side do overlap (and a
            // replay's parallel levels are worth handing to other workers).
            const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(30);
            while (std::chrono::steady_clock::now() < until) {
            }
            trace.end[item] = trace.clock.fetch_add(1) + 1;
          });
          break;
        case Kind::Record:
          events[op.a].record(s);
          break;
        case Kind::WaitEvent:
          s.wait_event(events[op.a]);
          break;
        case Kind::WaitStream:
          s.wait_stream(streams[op.b]);
          break;
        case Kind::Add:
          regs[op.d].copy_(regs[op.a] + regs[op.b]);
          break;
        case Kind::Scale:
          regs[op.d].copy_(regs[op.a] * 0.5);
          break;
        case Kind::Sub:
          regs[op.d].copy_(regs[op.a] - regs[op.b]);
          break;
      }
    }
    for (int k = 1; k < kStreams; ++k) origin.wait_stream(streams[k]);
  }
};

void check_trace(const Program& p, const Trace& t, const std::string& what) {
  for (int i = 0; i < p.items; ++i) {
    ASSERT_EQ(t.runs[i].load(), 1) << what << ": item " << i << " ran " << t.runs[i] << " times";
    for (int d : p.must_follow[i]) {
      ASSERT_GT(t.start[i].load(), t.end[d].load())
          << what << ": item " << i << " started before item " << d << " (which it follows) ended";
    }
  }
}

std::vector<float> contents(const Tensor& t) {
  const float* p = t.data<float>();
  return std::vector<float>(p, p + t.numel());
}

class GraphEquivalence : public WorkersTest {};

TEST_P(GraphEquivalence, ReplaysMatchEagerRuns) {
  const std::uint64_t seed = base_seed();
  SCOPED_TRACE("STREAMRT_GRAPH_SEED=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (int prog = 0; prog < kPrograms; ++prog) {
    SCOPED_TRACE("program " + std::to_string(prog));
    const Program p = make_program(rng);
    const std::uint64_t data_seed = rng();

    Machine eager(data_seed);
    Trace eager_trace(p.items);
    eager.run(p, eager_trace);
    synchronize();
    check_trace(p, eager_trace, "eager");

    Machine replayed(data_seed);
    std::vector<Tensor> initial;
    for (auto& r : replayed.regs) initial.push_back(r.clone());
    synchronize();  // a capture cannot depend on pending work outside it (the clones read regs)
    Trace trace(p.items);
    Stream& origin = replayed.streams[0];
    origin.begin_capture();
    replayed.run(p, trace);
    Graph g = origin.end_capture();
    GraphExec exec = g.instantiate();
    for (int r = 0; r < kReplays; ++r) {
      SCOPED_TRACE("replay " + std::to_string(r));
      {
        StreamContext ctx(origin);
        for (int k = 0; k < kRegisters; ++k) replayed.regs[k].copy_(initial[k]);
      }
      trace.reset();
      exec.launch(origin);
      origin.synchronize();
      check_trace(p, trace, "replay");
      for (int k = 0; k < kRegisters; ++k) {
        ASSERT_EQ(contents(replayed.regs[k]), contents(eager.regs[k])) << "register " << k;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Workers, GraphEquivalence, ::testing::Values(1, 2, 4, 8));

}  // namespace
}  // namespace streamrt
