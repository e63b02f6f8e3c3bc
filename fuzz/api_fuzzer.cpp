// libFuzzer harness: each input is a program of streamrt API calls. Byte by
// byte it picks an operation and its arguments over a few streams and events: launches (plain,
// throwing any type, launching or recording from inside work, waiting inside work, cancelling its
// own stream), records, waits, cancels, synchronizes with and without time-outs, event waits,
// resets, elapsed times, callbacks, StreamContext, worker-count changes, Device::parse. Misuse
// must come back as streamrt::Error; nothing may crash, hang, leak or trip ASan/UBSan. At the end
// of each input every stream is synchronized and the harness checks that all work finished and
// every callback ran exactly once.
//
// Deadlock-freedom of the programs: work only waits (host-style) on events that were recorded
// before the work was launched ("frozen" events, never re-recorded), so the waits of a program
// form no cycle; streamrt must then finish it (directed help-while-waiting makes this true even
// with one worker).
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "streamrt/streamrt.hpp"

namespace {

using namespace std::chrono_literals;

struct NotStd {
  int code;
};

// Reads the input as a stream of small numbers; zeros after the end.
class Bytes {
 public:
  Bytes(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
  bool done() const { return pos_ >= size_; }
  unsigned next() { return pos_ < size_ ? data_[pos_++] : 0u; }
  unsigned pick(unsigned n) { return next() % n; }
  std::string_view text(std::size_t max) {
    const std::size_t n =
        std::min<std::size_t>(pick(static_cast<unsigned>(max) + 1), size_ - std::min(pos_, size_));
    std::string_view s(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return s;
  }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
};

// What runs in work items and callbacks, shared so it outlives the input if it must.
struct Shared {
  std::atomic<long> ran{0};
  std::atomic<long> callbacks_registered{0};
  std::atomic<long> callbacks_run{0};
};

[[noreturn]] void finding(const char* what) {
  std::fprintf(stderr, "streamrt fuzz finding: %s\n", what);
  std::abort();
}

void swallow(const std::function<void()>& f) {
  try {
    f();
  } catch (...) {
    // Failures and misuse errors are expected outcomes of random programs.
  }
}

void throw_some(unsigned kind) {
  switch (kind % 5) {
    case 0:
      throw 42;
    case 1:
      throw NotStd{7};
    case 2:
      throw std::runtime_error("fuzz failure");
    case 3:
      throw streamrt::Error("fuzz error");
    default:
      throw std::bad_alloc();
  }
}

int g_threads_set = 0;    // worker-count changes are slow (threads start and join): few per input
int g_exit_children = 0;  // exit children are slow (a process each): a few per thousand inputs

// Sizes near where element counts and byte counts overflow, and a few ordinary ones.
std::int64_t edge_size(unsigned arg) {
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  static constexpr std::int64_t kSizes[] = {0,
                                            1,
                                            7,
                                            -1,
                                            (std::int64_t{1} << 61) + 1,
                                            std::int64_t{1} << 62,
                                            kMax,
                                            kMax / 2 + 1,
                                            kMax / 4 + 1,
                                            kMax / 8,
                                            kMax / 8 + 1};
  return kSizes[arg % std::size(kSizes)];
}

// Time-outs near the clock's limits (and ordinary short ones).
std::chrono::nanoseconds edge_timeout(unsigned arg) {
  using std::chrono::nanoseconds;
  static constexpr nanoseconds kTimeouts[] = {
      nanoseconds::max(),     nanoseconds::max() - nanoseconds(1),
      nanoseconds::max() / 2, nanoseconds::min(),
      nanoseconds(-1),        nanoseconds(0),
      nanoseconds(1000)};
  return kTimeouts[arg % std::size(kTimeouts)];
}

// Reads `t` on the host through read path `path`: each must wait for its writer and raise the
// writer's failure (or a misuse Error), never read early or crash.
void read_through(const streamrt::Tensor& t, unsigned path) {
  switch (path % 6) {
    case 0:
      (void)t.data_ptr();
      break;
    case 1:
      t.wait();
      break;
    case 2:
      (void)t.wait_for(std::chrono::nanoseconds::max());
      (void)t.data_ptr();
      break;
    case 3:
      (void)streamrt::allclose(t, t);
      break;
    case 4:
      (void)streamrt::equal(t, t);
      break;
    default:
      (void)streamrt::sum(t).item<float>();
      break;
  }
}

// Starts the exit child with `steps`; a hang (20 s) or a crash is a finding.
void run_exit_child(const std::string& steps) {
  pid_t pid = 0;
  char* argv[] = {const_cast<char*>(STREAMRT_FUZZ_EXIT_CHILD), const_cast<char*>(steps.c_str()),
                  nullptr};
  if (posix_spawn(&pid, argv[0], nullptr, nullptr, argv, environ) != 0) return;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      finding("the exit child hung at exit with state left open");
    }
    std::this_thread::sleep_for(1ms);
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    finding("the exit child did not end cleanly with state left open at exit");
  }
}

// Fills through wraps of overlapping ranges of one buffer (other start addresses, other sizes)
// on two fresh streams: the writes must land in the order they were issued, as the sequential
// model applies them. Ranges are whole pages of page-aligned memory, so that under the read
// checker (STREAMRT_READ_CHECK=1) the checker closes them and the workers open them again.
void overlapping_fills(Bytes& in) {
  constexpr std::size_t kPage = 4096;
  constexpr int kPerPage = static_cast<int>(kPage / sizeof(double));
  constexpr int kPages = 4;
  constexpr int kLen = kPages * kPerPage;
  std::unique_ptr<double, decltype(&std::free)> buffer(
      static_cast<double*>(std::aligned_alloc(kPage, kPages * kPage)), &std::free);
  std::fill(buffer.get(), buffer.get() + kLen, 0.0);
  std::vector<double> model(kLen, 0.0);
  streamrt::Stream streams[2];
  std::vector<streamrt::Tensor> wraps;
  for (int i = 0, n = 2 + static_cast<int>(in.pick(3)); i < n; ++i) {
    const int start = kPerPage * static_cast<int>(in.pick(static_cast<unsigned>(kPages)));
    const int len =
        kPerPage *
        (1 + static_cast<int>(in.pick(static_cast<unsigned>(kPages - start / kPerPage))));
    wraps.push_back(streamrt::from_blob(buffer.get() + start, {len}, streamrt::DType::Float64));
    const double value = i + 1;
    {
      streamrt::StreamContext ctx(streams[in.pick(2)]);
      wraps.back().fill_(value);
    }
    std::fill(model.begin() + start, model.begin() + start + len, value);
  }
  for (auto& s : streams) s.synchronize();
  if (!std::equal(model.begin(), model.end(), buffer.get())) {
    finding("writes through overlapping wraps landed out of issue order");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  constexpr int kStreams = 3;
  constexpr int kEvents = 4;
  Bytes in(data, size);
  auto shared = std::make_shared<Shared>();
  std::vector<streamrt::Stream> streams;
  for (int i = 0; i < kStreams; ++i) {
    const auto [least, greatest] = streamrt::Stream::priority_range();
    streams.emplace_back(streamrt::Device{},
                         least - static_cast<int>(in.pick(least - greatest + 1)));
  }
  std::vector<streamrt::Event> events;
  for (int i = 0; i < kEvents; ++i) {
    events.emplace_back(streamrt::EventOptions{.enable_timing = i < 2, .blocking = i == 3});
  }
  std::vector<streamrt::Event> frozen;  // recorded once, never again
  int threads_changes = 0;

  for (int steps = 0; !in.done() && steps < 400; ++steps) {
    const unsigned op = in.pick(31);
    auto& s = streams[in.pick(kStreams)];
    auto& o = streams[in.pick(kStreams)];
    auto& e = events[in.pick(kEvents)];
    auto& e2 = events[in.pick(kEvents)];
    const unsigned arg = in.next();
    switch (op) {
      case 0:
      case 1:
        s.launch([shared] { shared->ran.fetch_add(1); });
        break;
      case 2:
        s.launch([arg] { throw_some(arg); });
        break;
      case 3:  // work that launches more work and records an event of its own
        s.launch([shared, o]() mutable {
          o.launch([shared] { shared->ran.fetch_add(1); });
          streamrt::Event inner;
          inner.record();
          (void)inner.query();
        });
        break;
      case 4: {  // work that waits on a frozen event (recorded before the work was launched)
        streamrt::Event f;
        f.record(o);
        frozen.push_back(f);
        const bool timed = arg % 2 == 0;
        s.launch([f, timed] {
          if (timed) {
            (void)f.wait_for(200us);
          } else {
            f.synchronize();  // may rethrow the failure of o's work: fine, that fails this item
          }
        });
        break;
      }
      case 5:  // work that cancels the rest of its own stream
        s.launch([] { (void)streamrt::current_stream().cancel(); });
        break;
      case 6:  // work that misuses the API: synchronizing its own stream must be an Error
        s.launch([] {
          try {
            streamrt::current_stream().synchronize();
          } catch (const streamrt::Error&) {
            return;
          }
          finding("self-synchronize from work did not throw Error");
        });
        break;
      case 7:
      case 8:
        e.record(s);
        break;
      case 9:
        swallow([&] { s.wait_event(e); });  // Error when never recorded
        break;
      case 10:
        s.wait_stream(o);
        break;
      case 11:
        (void)s.query();
        (void)s.pending();
        (void)e.query();
        (void)e.state();
        (void)e.device();
        break;
      case 12:
        swallow([&] { s.synchronize(); });
        break;
      case 13:
        swallow(
            [&] { (void)s.synchronize_for(std::chrono::microseconds(arg % 4 == 0 ? 0 : arg)); });
        break;
      case 14:
        swallow([&] { e.synchronize(); });
        break;
      case 15:
        swallow([&] { (void)e.wait_for(std::chrono::microseconds(arg)); });
        break;
      case 16:
        e.reset();
        break;
      case 17:
        swallow([&] { (void)e.elapsed_time(e2); });
        break;
      case 18: {
        const bool throws = arg % 8 == 0;
        try {
          e.on_complete([shared, throws](std::exception_ptr) {
            shared->callbacks_run.fetch_add(1);
            if (throws) throw NotStd{1};  // reported on stderr, must not kill the worker
          });
          shared->callbacks_registered.fetch_add(1);
        } catch (const streamrt::Error&) {
          // never recorded
        }
        break;
      }
      case 19:
        (void)s.cancel();
        break;
      case 20: {
        std::array<streamrt::Event, 2> pair{e, e2};
        if (arg % 2 == 0) {
          swallow([&] { streamrt::wait_all(pair); });
        } else {
          swallow([&] { (void)streamrt::wait_all_for(pair, std::chrono::microseconds(arg)); });
        }
        break;
      }
      case 21: {
        streamrt::StreamContext ctx(s);
        streamrt::current_stream().launch([shared] { shared->ran.fetch_add(1); });
        e.record();  // on the current stream
        break;
      }
      case 22:
        if (threads_changes < 2 && g_threads_set < 200) {
          ++threads_changes;
          ++g_threads_set;
          streamrt::cpu::set_num_threads(1 + static_cast<int>(arg % 3));
        }
        break;
      case 23:
        swallow([&] { (void)streamrt::Device::parse(in.text(12)); });
        break;
      case 24:
        swallow([&] { streamrt::Stream bad(streamrt::Device{}, static_cast<int>(arg) - 128); });
        break;
      case 26: {  // a tensor whose size is near the overflow limits: an Error or a tensor
        const std::int64_t a = edge_size(arg), b = edge_size(in.next());
        const auto dtype = static_cast<streamrt::DType>(in.pick(5));
        swallow([&] {
          streamrt::StreamContext ctx(s);
          // The huge ones within the byte limit fail to allocate (an Error) rather than be made.
          auto t = arg % 2 == 0 ? streamrt::empty({a}, dtype) : streamrt::zeros({a, b}, dtype);
          // Every size on the list is tiny or far past any memory: a big one that was made has a
          // byte count that wrapped (an 8-byte storage behind 2^61 + 1 elements).
          if (t.numel() > (std::int64_t{1} << 24)) finding("a tensor past any memory was made");
        });
        break;
      }
      case 27:  // time-outs near the clock's limits: every wait returns, none overflows
        swallow([&] { (void)s.synchronize_for(edge_timeout(arg)); });
        swallow([&] { (void)e.wait_for(edge_timeout(arg + 1)); });
        swallow([&] { (void)streamrt::synchronize_for(edge_timeout(arg + 2)); });
        break;
      case 28: {  // a failed writer, read through one of the read paths
        streamrt::Tensor t;
        {
          streamrt::StreamContext ctx(s);
          s.launch([arg] { throw_some(arg); });
          t = streamrt::ones({4}) + 1.0;
        }
        swallow([&] { read_through(t, in.next()); });
        break;
      }
      case 29:  // exit with state left open, in a child process (rarely: a process each)
        if (arg % 64 == 0 && g_exit_children < 40) {
          ++g_exit_children;
          std::string steps;
          for (unsigned n = in.pick(12); n > 0; --n) steps += "qfcgtxl"[in.pick(7)];
          run_exit_child(steps);
        }
        break;
      case 30:
        overlapping_fills(in);
        break;
      default:
        swallow([&] { streamrt::synchronize(); });
        break;
    }
  }

  // Drain: synchronize every stream until a whole pass finds nothing more (work may launch work
  // on a stream synchronized earlier in the pass).
  bool quiet = false;
  for (int pass = 0; pass < 16 && !quiet; ++pass) {
    quiet = true;
    for (auto& s : streams) {
      try {
        s.synchronize();
      } catch (...) {
        quiet = false;
      }
    }
    for (auto& s : streams) quiet = quiet && s.query() && s.pending() == 0;
  }
  if (!quiet) finding("streams still busy or failing after 16 synchronize passes");
  for (auto& f : frozen) {
    if (!f.query()) finding("an event is not complete after its stream synchronized");
  }
  // Callbacks run as separate tasks after completion: wait for them (a hang is a finding).
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (shared->callbacks_run.load() < shared->callbacks_registered.load()) {
    if (std::chrono::steady_clock::now() > deadline) finding("a completion callback never ran");
    std::this_thread::sleep_for(50us);
  }
  if (shared->callbacks_run.load() != shared->callbacks_registered.load()) {
    finding("a completion callback ran twice");
  }
  return 0;
}
