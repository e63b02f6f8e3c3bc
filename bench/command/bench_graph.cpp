// `streamrt bench` graph cases (docs/graphs.md, "Replay"): replaying a captured graph against
// the same items launched directly on streamrt streams and against oneTBB's flow::graph built by
// hand with the same shape. Figures are wall nanoseconds per node: a repetition replays (or runs)
// the graph `batch` times and synchronizes once.
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench.hpp"
#include "peers.hpp"
#include "streamrt/streamrt.hpp"

#ifdef STREAMRT_BENCH_HAVE_TBB
#include <tbb/flow_graph.h>
#endif

namespace streamrt_tool::bench {
namespace sb = streamrt_bench;

namespace {

using RepFn = std::function<double()>;

constexpr int kChain = 1000;  // nodes in the chain
constexpr int kWidth = 64;    // parallel nodes of the fork-join (plus its source and sink)

int nodes_of(bool chain) {
  return chain ? kChain : kWidth + 2;
}

// Builds the shape on `s` (and `side` for the fork-join) with empty items; used both to capture
// the graph and, without a capture, to launch the items directly.
void launch_shape(bool chain, streamrt::Stream& s, std::vector<streamrt::Stream>& side) {
  if (chain) {
    for (int i = 0; i < kChain; ++i) s.launch([] {});
    return;
  }
  s.launch([] {});
  const streamrt::Event fork = s.record_event();
  for (auto& b : side) {
    b.wait_event(fork);
    b.launch([] {});
    s.wait_event(b.record_event());
  }
  s.launch([] {});
}

struct StreamrtState {
  streamrt::Stream s;
  std::vector<streamrt::Stream> side{kWidth};
  std::optional<streamrt::GraphExec> exec;
};

RepFn streamrt_rep(bool chain, bool replay, int batch) {
  auto st = std::make_shared<StreamrtState>();
  if (replay) {
    st->s.begin_capture();
    launch_shape(chain, st->s, st->side);
    st->exec.emplace(st->s.end_capture().instantiate());
  }
  return [st, chain, replay, batch] {
    const auto t0 = sb::now_ns();
    for (int b = 0; b < batch; ++b) {
      if (replay) {
        st->exec->launch(st->s);
      } else {
        launch_shape(chain, st->s, st->side);
      }
    }
    st->s.synchronize();
    return static_cast<double>(sb::now_ns() - t0) / (double(batch) * nodes_of(chain));
  };
}

#ifdef STREAMRT_BENCH_HAVE_TBB
using tbb::flow::continue_msg;
using FlowNode = tbb::flow::continue_node<continue_msg>;

struct FlowState {
  tbb::flow::graph g;
  std::vector<std::unique_ptr<FlowNode>> nodes;  // chain: in order; fork-join: source, sink, mid
};

RepFn tbb_flow_rep(bool chain, int batch) {
  auto st = std::make_shared<FlowState>();
  auto body = [](const continue_msg&) { return continue_msg(); };
  if (chain) {
    for (int i = 0; i < kChain; ++i) {
      st->nodes.push_back(std::make_unique<FlowNode>(st->g, body));
      if (i > 0) tbb::flow::make_edge(*st->nodes[i - 1], *st->nodes[i]);
    }
  } else {
    st->nodes.push_back(std::make_unique<FlowNode>(st->g, body));
    st->nodes.push_back(std::make_unique<FlowNode>(st->g, body));
    for (int i = 0; i < kWidth; ++i) {
      st->nodes.push_back(std::make_unique<FlowNode>(st->g, body));
      tbb::flow::make_edge(*st->nodes[0], *st->nodes.back());
      tbb::flow::make_edge(*st->nodes.back(), *st->nodes[1]);
    }
  }
  return [st, chain, batch] {
    const auto t0 = sb::now_ns();
    for (int b = 0; b < batch; ++b) {
      st->nodes.front()->try_put(continue_msg());
      st->g.wait_for_all();  // a flow graph run cannot be queued behind the previous one
    }
    return static_cast<double>(sb::now_ns() - t0) / (double(batch) * nodes_of(chain));
  };
}
#endif

}  // namespace

void add_graph_jobs(Suite& suite, std::size_t streamrt_pi, bool quick,
                    std::vector<std::function<void(PeerInfo&)>>& describe) {
  const int batch = quick ? 10 : 100;
  auto add_peer = [&](const char* id, const char* name, const char* version, int workers) {
    PeerInfo info;
    info.id = id;
    info.name = name;
    suite.peers.push_back(std::move(info));
    describe.push_back([version, workers](PeerInfo& p) {
      p.version = version;
      p.workers = workers;
    });
    return suite.peers.size() - 1;
  };
  const std::size_t direct_pi = add_peer("streamrt_direct", "streamrt direct",
                                         "the same items launched directly on streamrt streams",
                                         streamrt::cpu::num_threads());
#ifdef STREAMRT_BENCH_HAVE_TBB
  const std::size_t flow_pi =
      add_peer("tbb_flow", "tbb flow::graph", "oneTBB flow::graph of continue_nodes",
               sb::hardware_threads());
#else
  PeerInfo missing;
  missing.id = "tbb_flow";
  missing.name = "tbb flow::graph";
  missing.built = false;
  missing.reason = missing_peer_reason("oneTBB");
  suite.peers.push_back(std::move(missing));
  describe.emplace_back();
  const std::size_t flow_pi = suite.peers.size() - 1;
#endif
  for (std::size_t ci = 0; ci < suite.cases.size(); ++ci) {
    if (suite.cases[ci].group != "graph") continue;
    const bool chain = suite.cases[ci].id == "graph/chain=1000";
    Job replay;
    replay.case_index = ci;
    replay.peer_index = streamrt_pi;
    replay.note = "replay of the captured graph, " + std::to_string(batch) + " per synchronize";
    replay.setup = [chain, batch] { return streamrt_rep(chain, true, batch); };
    suite.jobs.push_back(std::move(replay));
    Job direct;
    direct.case_index = ci;
    direct.peer_index = direct_pi;
    direct.setup = [chain, batch] { return streamrt_rep(chain, false, batch); };
    suite.jobs.push_back(std::move(direct));
    Job flow;
    flow.case_index = ci;
    flow.peer_index = flow_pi;
#ifdef STREAMRT_BENCH_HAVE_TBB
    flow.setup = [chain, batch] { return tbb_flow_rep(chain, batch); };
#else
    flow.skip = suite.peers[flow_pi].reason;
#endif
    suite.jobs.push_back(std::move(flow));
  }
}

}  // namespace streamrt_tool::bench
