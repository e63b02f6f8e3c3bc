// `streamrt bench`: the cases and which peer runs which. The measuring code itself is shared with
// the Google Benchmark suite (bench/cases.hpp, bench/peers.hpp).
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <regex>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench.hpp"
#include "cases.hpp"
#include "peers.hpp"

#ifdef STREAMRT_BENCH_HAVE_OPENBLAS
#include <cblas.h>
#endif
#include "streamrt/ops.hpp"

namespace streamrt_tool::bench {
namespace sb = streamrt_bench;

namespace {

// Makes a peer on its first job, once; remembers why it could not start.
template <class P>
class Lazy {
 public:
  P& get() {
    if (!tried_) {
      tried_ = true;
      try {
        peer_ = std::make_unique<P>();
      } catch (const std::exception& e) {
        error_ = e.what();
      }
    }
    if (!peer_) throw PeerUnavailable(error_);
    return *peer_;
  }
  void describe(PeerInfo& info) const {
    if (peer_) {
      info.version = peer_->version();
      info.workers = peer_->workers();
    } else if (tried_) {
      info.reason = error_;
    }
  }

 private:
  std::unique_ptr<P> peer_;
  std::string error_;
  bool tried_ = false;
};

// Most items a thread-per-item peer (std::async) may have outstanding in one case.
constexpr int kMaxThreadsPerCase = 4096;

struct Config {
  bool quick = false;
  sb::Calibration cal;
  std::string self_exe;
};

double param(const CaseSpec& c, const char* name) {
  for (const auto& [k, v] : c.params) {
    if (k == name) return v;
  }
  throw std::logic_error(std::string("case ") + c.id + " has no parameter " + name);
}

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// Items of the enqueue-throughput case.
int enqueue_items(bool quick) {
  return quick ? 20'000 : 100'000;
}
// Total work of a granularity run, in microseconds.
double granularity_total_us(bool quick) {
  return quick ? 10'000 : 100'000;
}
// Many-streams case: this many 10 us items whatever the stream count.
constexpr int kManyItems = 4096;
constexpr double kManyItemUs = 10;

CaseSpec spec(std::string id, std::string group, std::string title, std::string unit, Better better,
              int reps, int quick_reps = 3) {
  CaseSpec c;
  c.id = std::move(id);
  c.group = std::move(group);
  c.title = std::move(title);
  c.unit = std::move(unit);
  c.better = better;
  c.reps = reps;
  c.quick_reps = quick_reps;
  return c;
}

CaseSpec with_target(CaseSpec c, std::string text, double value) {
  c.target = std::move(text);
  c.target_value = value;
  return c;
}

std::string streams_text(int s) {
  return std::to_string(s) + (s == 1 ? " stream" : " streams");
}

// The matrix-product cases (jobs and peers in add_matmul_jobs).
void append_matmul_specs(std::vector<CaseSpec>& v) {
  struct Mm {
    const char* id;
    const char* title;
    int n, count, streams;
  };
  for (const Mm& m :
       {Mm{"matmul/2048", "matmul: one 2048^2 float32 product", 2048, 1, 1},
        Mm{"matmul/256x64/streams=1", "matmul: 2 x 64 products of 256^2, one stream", 256, 64, 1},
        Mm{"matmul/256x64/streams=2", "matmul: 2 x 64 products of 256^2, a stream each", 256, 64,
           2},
        Mm{"matmul/1000x1/streams=1", "matmul: two 1000^2 products, one stream", 1000, 1, 1},
        Mm{"matmul/1000x1/streams=2", "matmul: two 1000^2 products, a stream each", 1000, 1, 2}}) {
    auto c = spec(m.id, "matmul", m.title, "ms", Better::kLower, 7, 1);
    c.params = {{"n", m.n}, {"count", m.count}, {"streams", m.streams}};
    if (m.n == 2048) c.target = ">= 95% of direct OpenBLAS";
    v.push_back(std::move(c));
  }
}

// The graph replay cases (jobs and peers in bench_graph.cpp).
void append_graph_specs(std::vector<CaseSpec>& v) {
  v.push_back(
      with_target(spec("graph/chain=1000", "graph", "graph: chain of 1,000 empty nodes (per node)",
                       "ns/node", Better::kLower, 11),
                  "<= 20 ns/node", 20));
  v.push_back(with_target(
      spec("graph/forkjoin=64", "graph", "graph: fork-join 1 -> 64 -> 1 empty nodes (per node)",
           "ns/node", Better::kLower, 11),
      "<= 50 ns/node", 50));
}

std::vector<CaseSpec> case_specs(bool quick) {
  std::vector<CaseSpec> v;
  v.push_back(
      with_target(spec("round_trip", "round_trip", "round trip: launch empty item + host wait",
                       "ns", Better::kLower, 15),
                  "<= 1 us", 1000));
  for (int s : {1, 4}) {
    auto c = spec("enqueue/streams=" + std::to_string(s), "enqueue",
                  "enqueue " + std::to_string(enqueue_items(quick)) + " empty items on " +
                      streams_text(s) + ", one sync",
                  "ns/item", Better::kLower, 11);
    c.params = {{"streams", s}};
    v.push_back(with_target(std::move(c), "<= 100 ns/item", 100));
  }
  for (int s : {1, 4}) {
    auto c =
        spec("enqueue_cpu/streams=" + std::to_string(s), "enqueue_cpu",
             "enqueue as above, process CPU time per item (host + workers), " + streams_text(s),
             "CPU ns/item", Better::kLower, 11);
    c.params = {{"streams", s}};
    v.push_back(std::move(c));
  }
  v.push_back(with_target(
      spec("record_poll", "event", "event record + poll (idle stream)", "ns", Better::kLower, 15),
      "<= 100 ns", 100));
  v.push_back(spec("record_wait", "event", "event record + host wait (idle stream)", "ns",
                   Better::kLower, 15));
  v.push_back(with_target(
      spec("handoff", "handoff", "cross-stream hand-off: A's item ends -> B's next item starts",
           "ns", Better::kLower, 11),
      "<= 1 us", 1000));
  v.push_back(spec("callback", "callback", "completion callback: item ends -> callback starts",
                   "ns", Better::kLower, 11));
  v.push_back(with_target(
      spec("overlap", "overlap", "overlap: 2 x 20 ms items, two streams vs one (speedup)", "x",
           Better::kHigher, 11, 2),
      ">= 1.95x", 1.95));
  for (int item : {1, 10, 100, 1000}) {
    for (int s : {1, 2, 4, 16}) {
      auto c = spec("granularity/item=" + std::to_string(item) + "us/streams=" + std::to_string(s),
                    "granularity",
                    "granularity: " + std::to_string(item) + " us items on " + streams_text(s) +
                        " (efficiency vs bare threads)",
                    "%", Better::kHigher, 5, 3);
      c.params = {{"item_us", item}, {"streams", s}};
      if (item == 10 && s == 2) c = with_target(std::move(c), ">= 90%", 90);
      v.push_back(std::move(c));
    }
  }
  // --quick stops at 1024 streams: 4096 threads for the thread-per-stream peers take seconds.
  for (int s : {1, 16, 256, quick ? 1024 : 4096}) {
    auto c = spec(
        "many_streams/streams=" + std::to_string(s), "many_streams",
        std::to_string(kManyItems) + " items of 10 us over " + streams_text(s) + " (throughput)",
        "items/s", Better::kHigher, 5, 1);
    c.params = {{"streams", s}};
    c.warmup = 0;  // streams are made before timing; one bulk run has no cold start to hide
    v.push_back(std::move(c));
  }
  {
    auto c = spec("idle", "idle", "idle CPU: 4 streams, no work (CPU ms per second, own process)",
                  "ms CPU/s", Better::kLower, 3, 1);
    c.warmup = 0;
    v.push_back(with_target(std::move(c), "<= 1 ms/s", 1));
  }
  append_matmul_specs(v);
  append_graph_specs(v);
  return v;
}

using RepFn = std::function<double()>;

// Runs the idle probe of `peer_id` in a fresh process, so that no other peer's threads count.
double idle_in_child(const std::string& self_exe, const std::string& peer_id, double seconds) {
  // OPENBLAS_NUM_THREADS=1: OpenBLAS (linked into this tool) otherwise starts a thread at load
  // time that spins for a while, which would be counted against every peer.
  const std::string cmd = "OPENBLAS_NUM_THREADS=1 '" + self_exe + "' bench --idle-probe " +
                          peer_id + " --idle-seconds " + fmt(seconds);
  std::FILE* f = ::popen(cmd.c_str(), "r");
  if (f == nullptr) throw std::runtime_error("cannot run " + cmd);
  char buf[256] = {0};
  std::string out;
  while (std::fgets(buf, sizeof buf, f) != nullptr) out += buf;
  const int rc = ::pclose(f);
  if (rc != 0) throw std::runtime_error("idle probe failed (" + cmd + "): " + out);
  char* end = nullptr;
  const double v = std::strtod(out.c_str(), &end);
  if (end == out.c_str()) throw std::runtime_error("idle probe printed no number: " + out);
  return v;
}

template <class P>
std::vector<typename P::Stream> make_streams(P& p, int n) {
  std::vector<typename P::Stream> v;
  v.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) v.push_back(p.make_stream());
  return v;
}

// Sets `job` for peer P in a round-trip or enqueue case; false for the other groups.
template <class P>
bool set_submit_job(Job& job, const CaseSpec& c, const std::shared_ptr<Lazy<P>>& lazy,
                    const Config& cfg) {
  const int ops = cfg.quick ? 200 : 2000;
  if (c.group == "round_trip") {
    job.setup = [lazy, ops]() -> RepFn {
      auto& p = lazy->get();
      auto s = std::make_shared<typename P::Stream>(p.make_stream());
      return [&p, s, ops] { return sb::round_trip(p, *s, P::kThreadPerItem ? ops / 10 : ops); };
    };
    return true;
  }
  if (c.group != "enqueue" && c.group != "enqueue_cpu") return false;
  const bool cpu = c.group == "enqueue_cpu";
  const int streams = static_cast<int>(param(c, "streams"));
  int items = enqueue_items(cfg.quick);
  if (P::kThreadPerItem) {
    items = 2000;
    job.note = "2,000 items, not " + std::to_string(enqueue_items(cfg.quick)) +
               ": one thread per item (100,000 outstanding fail with EAGAIN)";
  }
  job.setup = [lazy, streams, items, cpu]() -> RepFn {
    auto& p = lazy->get();
    auto v = std::make_shared<std::vector<typename P::Stream>>(make_streams(p, streams));
    return [&p, v, items, cpu] {
      return cpu ? sb::enqueue_cpu(p, *v, items) : sb::enqueue_throughput(p, *v, items);
    };
  };
  return true;
}

// Sets `job` for peer P in an event, hand-off or callback case; false for the other groups and
// when P has no such concept (the case does not list P).
template <class P>
bool set_latency_job(Job& job, const CaseSpec& c, const std::shared_ptr<Lazy<P>>& lazy,
                     const Config& cfg) {
  const int ops = cfg.quick ? 200 : 2000;
  const int latency_ops = cfg.quick ? 40 : 200;
  if (c.group == "event") {
    if constexpr (!P::kHasEvents) {
      return false;
    } else {
      const bool poll = c.id == "record_poll";
      job.setup = [lazy, ops, poll]() -> RepFn {
        auto& p = lazy->get();
        auto s = std::make_shared<typename P::Stream>(p.make_stream());
        return [&p, s, ops, poll] {
          return poll ? sb::record_poll(p, *s, ops) : sb::record_wait(p, *s, ops);
        };
      };
      return true;
    }
  } else if (c.group == "handoff") {
    if constexpr (!P::kHasEvents) {
      return false;
    } else {
      job.setup = [lazy, latency_ops]() -> RepFn {
        auto& p = lazy->get();
        auto a = std::make_shared<typename P::Stream>(p.make_stream());
        auto b = std::make_shared<typename P::Stream>(p.make_stream());
        return [&p, a, b, latency_ops] {
          std::vector<double> v;
          for (int i = 0; i < latency_ops; ++i) v.push_back(sb::handoff_once(p, *a, *b));
          return sb::median_of(std::move(v));
        };
      };
      job.note = "median of " + std::to_string(latency_ops) + " hand-offs per repetition";
      return true;
    }
  } else if (c.group == "callback") {
    if constexpr (!P::kHasCallbacks) {
      return false;
    } else {
      job.setup = [lazy, latency_ops]() -> RepFn {
        auto& p = lazy->get();
        auto s = std::make_shared<typename P::Stream>(p.make_stream());
        return [&p, s, latency_ops] {
          std::vector<double> v;
          for (int i = 0; i < latency_ops; ++i) v.push_back(sb::callback_once(p, *s));
          return sb::median_of(std::move(v));
        };
      };
      return true;
    }
  }
  return false;
}

// Sets `job` for peer P in an overlap, granularity, many-streams or idle case; false for the
// other groups.
template <class P>
bool set_load_job(Job& job, const CaseSpec& c, const std::shared_ptr<Lazy<P>>& lazy,
                  const Config& cfg) {
  if (c.group == "overlap") {
    const auto iters = cfg.cal.iters(20'000);
    job.setup = [lazy, iters]() -> RepFn {
      auto& p = lazy->get();
      return [&p, iters] { return sb::overlap_speedup(p, iters); };
    };
  } else if (c.group == "granularity") {
    const double item_us = param(c, "item_us");
    const int streams = static_cast<int>(param(c, "streams"));
    const int items = static_cast<int>(granularity_total_us(cfg.quick) / item_us);
    if (P::kThreadPerItem && items > kMaxThreadsPerCase) {
      job.skip = "one thread per item: " + std::to_string(items) +
                 " items would need that many threads (this suite allows " +
                 std::to_string(kMaxThreadsPerCase) + ")";
    }
    const auto cal = cfg.cal;
    job.setup = [lazy, streams, items, item_us, cal]() -> RepFn {
      auto& p = lazy->get();
      auto v = std::make_shared<std::vector<typename P::Stream>>(make_streams(p, streams));
      return [&p, v, items, item_us, cal] {
        return 100.0 * sb::efficiency(p, *v, items, item_us, cal);
      };
    };
  } else if (c.group == "many_streams") {
    const int streams = static_cast<int>(param(c, "streams"));
    const auto iters = cfg.cal.iters(kManyItemUs);
    job.setup = [lazy, streams, iters]() -> RepFn {
      auto& p = lazy->get();
      auto v = std::make_shared<std::vector<typename P::Stream>>(make_streams(p, streams));
      return
          [&p, v, iters] { return kManyItems / (sb::run_items(p, *v, kManyItems, iters) / 1e9); };
    };
  } else if (c.group == "idle") {
    const double seconds = cfg.quick ? 0.25 : 1.0;
    const std::string exe = cfg.self_exe;
    job.setup = [exe, seconds]() -> RepFn {
      return [exe, seconds] { return idle_in_child(exe, P::kId, seconds); };
    };
  } else {
    return false;
  }
  return true;
}

// Adds the jobs of peer P (index `pi`) for every case it has the concept for. Matmul and graph
// cases have their own peers (add_matmul_jobs, add_graph_jobs).
template <class P>
void add_peer_jobs(Suite& suite, std::size_t pi, const std::shared_ptr<Lazy<P>>& lazy,
                   const Config& cfg) {
  for (std::size_t ci = 0; ci < suite.cases.size(); ++ci) {
    const CaseSpec& c = suite.cases[ci];
    Job job;
    job.case_index = ci;
    job.peer_index = pi;
    if (set_submit_job(job, c, lazy, cfg) || set_latency_job(job, c, lazy, cfg) ||
        set_load_job(job, c, lazy, cfg)) {
      suite.jobs.push_back(std::move(job));
    }
  }
}

#ifdef STREAMRT_BENCH_HAVE_OPENBLAS
// Direct OpenBLAS: the same products as cblas_sgemm calls on the host thread (OpenBLAS uses its
// own threads). The "two streams" variants are the same calls, serial: there is nothing else a
// direct caller could do without a runtime.
struct Matrices {
  int n = 0;
  std::vector<float> a, b, c;
  explicit Matrices(int size) : n(size), a(std::size_t(size) * size), b(a.size()), c(a.size()) {
    for (std::size_t i = 0; i < a.size(); ++i) {
      a[i] = static_cast<float>((i * 7919) % 1000) / 1000.0f - 0.5f;
      b[i] = static_cast<float>((i * 104729) % 1000) / 1000.0f - 0.5f;
    }
  }
  void sgemm() {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n,
                0.0f, c.data(), n);
  }
};
#endif

void add_matmul_jobs(Suite& suite, std::size_t streamrt_pi, std::size_t openblas_pi) {
  for (std::size_t ci = 0; ci < suite.cases.size(); ++ci) {
    const CaseSpec& c = suite.cases[ci];
    if (c.group != "matmul") continue;
    const int n = static_cast<int>(param(c, "n"));
    const int count = static_cast<int>(param(c, "count"));
    const int streams = static_cast<int>(param(c, "streams"));
    const int total = c.id == "matmul/2048" ? 1 : 2 * count;  // products per repetition
    // streamrt: streamrt::matmul on streams (the ops layer).
    Job sj;
    sj.case_index = ci;
    sj.peer_index = streamrt_pi;
    sj.setup = [n, total, streams]() -> RepFn {
      struct State {
        std::vector<streamrt::Stream> s;
        streamrt::Tensor a, b;
      };
      auto st = std::make_shared<State>();
      for (int i = 0; i < streams; ++i) st->s.emplace_back();
      st->a = streamrt::randn({n, n}, 1);
      st->b = streamrt::randn({n, n}, 2);
      streamrt::synchronize();
      return [st, total] {
        const auto t0 = sb::now_ns();
        std::vector<streamrt::Tensor> keep;
        for (int i = 0; i < total; ++i) {
          streamrt::StreamContext ctx(st->s[static_cast<std::size_t>(i) % st->s.size()]);
          keep.push_back(streamrt::matmul(st->a, st->b));
        }
        for (auto& s : st->s) s.synchronize();
        return static_cast<double>(sb::now_ns() - t0) / 1e6;
      };
    };
    suite.jobs.push_back(std::move(sj));
    if (c.id.find("streams=2") != std::string::npos) continue;  // direct calls have no streams
    Job oj;
    oj.case_index = ci;
    oj.peer_index = openblas_pi;
#ifdef STREAMRT_BENCH_HAVE_OPENBLAS
    oj.setup = [n, total]() -> RepFn {
      auto m = std::make_shared<Matrices>(n);
      return [m, total] {
        // A direct caller uses all cores. streamrt's ops set OpenBLAS to one thread per call
        // (they split the product over the pool themselves): undo that here, and restore it.
        const int before = openblas_get_num_threads();
        openblas_set_num_threads(sb::hardware_threads());
        const auto t0 = sb::now_ns();
        for (int i = 0; i < total; ++i) m->sgemm();
        const auto t1 = sb::now_ns();
        openblas_set_num_threads(before);
        return static_cast<double>(t1 - t0) / 1e6;
      };
    };
#else
    oj.skip = "OpenBLAS not found at configure time (libopenblas-dev)";
#endif
    suite.jobs.push_back(std::move(oj));
  }
}

template <class P>
std::size_t add_peer(Suite& suite, std::vector<std::function<void(PeerInfo&)>>& describe,
                     const Config& cfg) {
  const std::size_t pi = suite.peers.size();
  PeerInfo info;
  info.id = P::kId;
  info.name = P::kName;
  suite.peers.push_back(std::move(info));
  auto lazy = std::make_shared<Lazy<P>>();
  describe.push_back([lazy](PeerInfo& info) { lazy->describe(info); });
  add_peer_jobs<P>(suite, pi, lazy, cfg);
  return pi;
}

void add_missing_peer(Suite& suite, const char* id, const char* name, const std::string& why) {
  PeerInfo info;
  info.id = id;
  info.name = name;
  info.built = false;
  info.reason = why;
  suite.peers.push_back(std::move(info));
}

// Peer state descriptions, filled after the run (versions, worker counts, start failures).
std::vector<std::function<void(PeerInfo&)>> g_describe;

}  // namespace

void describe_peers(std::vector<PeerInfo>& peers) {
  for (std::size_t i = 0; i < peers.size() && i < g_describe.size(); ++i) {
    if (g_describe[i]) g_describe[i](peers[i]);
  }
}

std::string missing_peer_reason(const char* library) {
#ifdef STREAMRT_BENCH_ALL_PEERS
  return std::string(library) + " not found at configure time";
#else
  return std::string(
             "not in the installed streamrt tool, which loads no library streamrt does "
             "not need (") +
         library + "): run bench/streamrt_compare bench from a build tree";
#endif
}

namespace {

// A peer this build has not got (`library` was not found, or is not in this tool): listed with
// the reason, and with nothing to describe after the run.
[[maybe_unused]] void add_unbuilt_peer(Suite& suite,
                                       std::vector<std::function<void(PeerInfo&)>>& describe,
                                       const char* id, const char* name, const char* library) {
  add_missing_peer(suite, id, name, missing_peer_reason(library));
  describe.resize(suite.peers.size());
}

}  // namespace

Suite make_suite(const Options& opts, double iters_per_us, const std::string& self_exe) {
  Config cfg{opts.quick, sb::Calibration{iters_per_us}, self_exe};
  Suite suite;
  suite.cases = case_specs(opts.quick);
  auto& d = g_describe;
  d.clear();
  const std::size_t streamrt_pi = add_peer<sb::StreamrtPeer>(suite, d, cfg);
  add_peer<sb::AsyncPeer>(suite, d, cfg);
  add_peer<sb::ThreadQueuePeer>(suite, d, cfg);
#ifdef STREAMRT_BENCH_HAVE_TBB
  add_peer<sb::TbbStrandPeer>(suite, d, cfg);
  add_peer<sb::TbbGroupPeer>(suite, d, cfg);
#else
  add_unbuilt_peer(suite, d, "tbb_strand", "tbb strand", "oneTBB");
  add_unbuilt_peer(suite, d, "tbb_group", "tbb::task_group", "oneTBB");
#endif
#ifdef STREAMRT_BENCH_HAVE_ASIO
  add_peer<sb::AsioStrandPeer>(suite, d, cfg);
#else
  add_unbuilt_peer(suite, d, "asio_strand", "asio strand", "Boost.Asio");
#endif
#ifdef STREAMRT_BENCH_HAVE_OPENCL
  add_peer<sb::OpenClPeer>(suite, d, cfg);
#else
  add_unbuilt_peer(suite, d, "opencl", "OpenCL (PoCL)", "OpenCL");
#endif
  // Reference without any runtime: two plain std::threads for the overlap case, so the table
  // shows what the machine allowed during the run (other processes take cores too).
  {
    add_missing_peer(suite, "bare_threads", "bare threads", "");
    suite.peers.back().built = true;
    d.push_back([](PeerInfo& info) {
      info.version = "std::thread, no runtime (reference)";
      info.workers = sb::hardware_threads();
    });
    const std::size_t bare_pi = suite.peers.size() - 1;
    for (std::size_t ci = 0; ci < suite.cases.size(); ++ci) {
      if (suite.cases[ci].group != "overlap") continue;
      Job j;
      j.case_index = ci;
      j.peer_index = bare_pi;
      const auto iters = cfg.cal.iters(20'000);
      j.setup = [iters]() -> RepFn { return [iters] { return sb::overlap_bare(iters); }; };
      suite.jobs.push_back(std::move(j));
    }
  }
  const std::size_t openblas_pi = suite.peers.size();
#ifdef STREAMRT_BENCH_HAVE_OPENBLAS
  add_missing_peer(suite, "openblas", "OpenBLAS direct", "");
  suite.peers.back().built = true;
  d.push_back([](PeerInfo& info) {
    info.version = openblas_get_config();
    info.workers = sb::hardware_threads();  // what the direct calls use (see above)
  });
#else
  add_unbuilt_peer(suite, d, "openblas", "OpenBLAS direct", "OpenBLAS");
#endif
  add_matmul_jobs(suite, streamrt_pi, openblas_pi);
  add_graph_jobs(suite, streamrt_pi, opts.quick, d);

  // Missing peers: one skipped job per case they would have run, so the table says so.
  for (std::size_t pi = 0; pi < suite.peers.size(); ++pi) {
    if (suite.peers[pi].built) continue;
    for (std::size_t ci = 0; ci < suite.cases.size(); ++ci) {
      if (suite.cases[ci].group == "graph") continue;  // its peers are its own (bench_graph.cpp)
      const bool matmul = suite.cases[ci].group == "matmul";
      if (matmul != (suite.peers[pi].id == "openblas")) continue;
      Job j;
      j.case_index = ci;
      j.peer_index = pi;
      j.skip = suite.peers[pi].reason;
      suite.jobs.push_back(std::move(j));
    }
  }

  // Filter, then order by case, then by peer (streamrt first).
  if (!opts.filter.empty()) {
    const std::regex re(opts.filter, std::regex::ECMAScript);
    std::erase_if(suite.jobs, [&](const Job& j) {
      const std::string key = suite.cases[j.case_index].id + "/" + suite.peers[j.peer_index].id;
      return !std::regex_search(key, re);
    });
  }
  std::stable_sort(suite.jobs.begin(), suite.jobs.end(), [](const Job& a, const Job& b) {
    return a.case_index != b.case_index ? a.case_index < b.case_index : a.peer_index < b.peer_index;
  });
  return suite;
}

int run_idle_probe(const std::string& peer_id, double seconds) {
  double v = -1;
  auto probe = [&](auto& p) { v = sb::idle_cpu_ms_per_s(p, 4, seconds); };
  try {
    if (peer_id == sb::StreamrtPeer::kId) {
      sb::StreamrtPeer p;
      probe(p);
    } else if (peer_id == sb::AsyncPeer::kId) {
      sb::AsyncPeer p;
      probe(p);
    } else if (peer_id == sb::ThreadQueuePeer::kId) {
      sb::ThreadQueuePeer p;
      probe(p);
#ifdef STREAMRT_BENCH_HAVE_TBB
    } else if (peer_id == sb::TbbStrandPeer::kId) {
      sb::TbbStrandPeer p;
      probe(p);
    } else if (peer_id == sb::TbbGroupPeer::kId) {
      sb::TbbGroupPeer p;
      probe(p);
#endif
#ifdef STREAMRT_BENCH_HAVE_ASIO
    } else if (peer_id == sb::AsioStrandPeer::kId) {
      sb::AsioStrandPeer p;
      probe(p);
#endif
#ifdef STREAMRT_BENCH_HAVE_OPENCL
    } else if (peer_id == sb::OpenClPeer::kId) {
      sb::OpenClPeer p;
      probe(p);
#endif
    } else {
      std::fprintf(stderr, "streamrt bench: --idle-probe: unknown peer '%s'\n", peer_id.c_str());
      return 2;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "streamrt bench: idle probe of %s failed: %s\n", peer_id.c_str(),
                 e.what());
    return 1;
  }
  std::printf("%.6f\n", v);
  return 0;
}

std::vector<std::pair<std::string, std::string>> library_versions() {
  std::vector<std::pair<std::string, std::string>> v;
#ifdef STREAMRT_TOOL_VERSION
  v.emplace_back("streamrt", STREAMRT_TOOL_VERSION);
#endif
  v.emplace_back("libstdc++", std::to_string(__GLIBCXX__));
#ifdef STREAMRT_BENCH_HAVE_TBB
  v.emplace_back("oneTBB", std::string(TBB_VERSION_STRING) + " (runtime " + TBB_runtime_version() +
                               ", interface " + std::to_string(TBB_runtime_interface_version()) +
                               ")");
#else
  v.emplace_back("oneTBB", "not found");
#endif
#ifdef STREAMRT_BENCH_HAVE_OPENBLAS
  v.emplace_back("OpenBLAS", openblas_get_config());
#else
  v.emplace_back("OpenBLAS", "not found");
#endif
#ifdef STREAMRT_BENCH_HAVE_ASIO
  v.emplace_back("Boost", BOOST_LIB_VERSION);
#else
  v.emplace_back("Boost", "not found");
#endif
#ifdef STREAMRT_BENCH_HAVE_OPENCL
  {
    std::string text = "no platform";
    cl_uint n = 0;
    cl_platform_id p = nullptr;
    if (clGetPlatformIDs(1, &p, &n) == CL_SUCCESS && n > 0) {
      char buf[512] = {0};
      if (clGetPlatformInfo(p, CL_PLATFORM_VERSION, sizeof buf - 1, buf, nullptr) == CL_SUCCESS) {
        text = buf;
      }
    }
    v.emplace_back("OpenCL platform", text);
  }
#else
  v.emplace_back("OpenCL platform", "not found");
#endif
  return v;
}

}  // namespace streamrt_tool::bench
