#pragma once
// Helpers shared by the conformance tests (and the whitebox, MPI and tool tests): gates and
// rendezvous with generous time-outs (a test that would hang if the runtime were wrong fails
// instead), a worker-count fixture, stderr capture that can be polled, a child-process runner,
// temporary files for checker scripts, and the messages of expected errors.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>

#include "schedule_util.hpp"
#include "streamrt/streamrt.hpp"

namespace streamrt_test {

using namespace std::chrono_literals;

// Long enough that only a broken runtime (serial or deadlocked) ever reaches it, even under TSan on
// a loaded 2-core machine.
inline constexpr auto kTimeout = std::chrono::seconds(30);

// A one-shot gate: work blocks on it until the test opens it. Waits time out instead of hanging.
class Gate {
 public:
  // Notifies under the lock: a waiter may destroy the gate as soon as it returns.
  void open() {
    std::lock_guard lock(mutex_);
    open_ = true;
    cv_.notify_all();
  }
  // True when opened within `timeout`.
  bool wait(std::chrono::nanoseconds timeout = kTimeout) {
    std::unique_lock lock(mutex_);
    return cv_.wait_for(lock, timeout, [&] { return open_; });
  }
  bool is_open() {
    std::lock_guard lock(mutex_);
    return open_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool open_ = false;
};

// `count` parties must all arrive; each returns true when all arrived within the time-out. A
// serial runtime, running the parties one after another, makes the first one time out.
class Rendezvous {
 public:
  explicit Rendezvous(int count) : left_(count) {}
  bool arrive_and_wait(std::chrono::nanoseconds timeout = kTimeout) {
    std::unique_lock lock(mutex_);
    if (--left_ <= 0) {
      cv_.notify_all();
      return true;
    }
    return cv_.wait_for(lock, timeout, [&] { return left_ <= 0; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  int left_;
};

// Launches on `s` an item that blocks until `release` opens, and returns once it has started: with
// one worker, that worker is then certainly busy, so everything launched next is queued behind it
// (and is picked by priority when it frees). Without the wait the worker might pick work launched
// later first, as it is more urgent than the holder.
inline void occupy_worker(streamrt::Stream& s, Gate& release) {
  auto started = std::make_shared<Gate>();
  s.launch([started, &release] {
    started->open();
    release.wait();
  });
  if (!started->wait()) throw std::runtime_error("the holding item never started");
}

// Called when the runtime is stuck in a way the test cannot undo (a worker blocked for ever):
// report and leave at once, since exit handlers would wait for the stuck work.
[[noreturn]] inline void fail_hard(const std::string& why) {
  std::fprintf(stderr, "FATAL (runtime stuck): %s\n", why.c_str());
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(1);
}

// Blocks the stream's worker until `release` opens, and says when it has started. The item fails
// the process if never released: the test would otherwise leave a worker blocked for ever.
struct Blocker {
  Gate started;
  Gate release;
  void launch_on(streamrt::Stream& s) {
    s.launch([this] {
      started.open();
      if (!release.wait()) fail_hard("a blocker was never released");
    });
  }
};

// Sets the worker count for one test and restores the previous count afterwards.
class ThreadCount {
 public:
  explicit ThreadCount(int n) : saved_(streamrt::cpu::num_threads()) {
    streamrt::cpu::set_num_threads(n);
  }
  ~ThreadCount() { streamrt::cpu::set_num_threads(saved_); }
  ThreadCount(const ThreadCount&) = delete;
  ThreadCount& operator=(const ThreadCount&) = delete;

 private:
  int saved_;
};

// Value-parameterized by the worker count (1, 2, 4, 8).
class WorkersTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override { threads_.emplace(GetParam()); }
  void TearDown() override { threads_.reset(); }
  int workers() const { return GetParam(); }

 private:
  std::optional<ThreadCount> threads_;
};

// Redirects fd 2 to a file for the life of the object; text() may be called while it runs, so a
// test can wait until a report written by a runtime thread has appeared.
class StderrCapture {
 public:
  StderrCapture() {
    char path[] = "/tmp/streamrt_stderr_XXXXXX";
    const int fd = mkstemp(path);
    if (fd < 0) throw std::runtime_error("mkstemp failed");
    path_ = path;
    std::fflush(stderr);
    saved_ = dup(2);
    dup2(fd, 2);
    close(fd);
  }
  ~StderrCapture() {
    std::fflush(stderr);
    dup2(saved_, 2);
    close(saved_);
    std::remove(path_.c_str());
  }
  StderrCapture(const StderrCapture&) = delete;
  StderrCapture& operator=(const StderrCapture&) = delete;

  std::string text() const {
    std::fflush(stderr);
    std::ifstream in(path_);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  // True when `needle` appears within `timeout`.
  bool wait_for_text(const std::string& needle, std::chrono::nanoseconds timeout = kTimeout) const {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      if (text().find(needle) != std::string::npos) return true;
      if (std::chrono::steady_clock::now() >= deadline) return false;
      std::this_thread::sleep_for(2ms);
    }
  }

 private:
  std::string path_;
  int saved_ = -1;
};

// Polls `pred` until true or time-out.
template <class Pred>
bool eventually(Pred pred, std::chrono::nanoseconds timeout = kTimeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (pred()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(1ms);
  }
}

// Output (stdout and stderr) and exit status of a child process.
struct ChildResult {
  int status = -1;  // exit code, or -1 when it did not exit normally
  std::string output;
};

// Runs `command` through /bin/sh, capturing stdout and stderr together.
inline ChildResult run_child(const std::string& command) {
  ChildResult r;
  FILE* p = popen((command + " 2>&1").c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  const int st = pclose(p);
  if (st != -1 && WIFEXITED(st)) r.status = WEXITSTATUS(st);
  return r;
}

// A path in the temporary directory for this process's file `name`.
inline std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("streamrt_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

// Writes a checker script next to the test's temporary files and returns its path.
inline std::string write_script(const std::string& name, const std::string& text) {
  const std::string path = temp_path(name);
  std::ofstream(path) << text;
  return path;
}

// True when new work launched on `s` runs within kTimeout: the stream still works (after a
// failure was reported, after refused calls). Rethrows what synchronize() would.
inline bool runs_new_work(streamrt::Stream& s) {
  std::atomic<bool> ran{false};
  s.launch([&] { ran = true; });
  return s.synchronize_for(kTimeout) && ran.load();
}

// Launches work on `s` that waits at `g`, then throws E(what): a failure that comes only once
// the test opens the gate.
template <class E = std::runtime_error>
void launch_failure_at(streamrt::Stream& s, Gate& g, const char* what) {
  s.launch([&g, what] {
    if (!g.wait()) fail_hard("the gate of a failing item was never opened");
    throw E(what);
  });
}

// The message of the E that `call` throws, or "<no error>" when it throws none (anything else
// propagates).
template <class E>
std::string message_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const E& e) {
    return e.what();
  }
  return "<no error>";
}

// The message of the std::runtime_error (a streamrt::Error too) that `call` throws.
inline std::string runtime_error_of(const std::function<void()>& call) {
  return message_of<std::runtime_error>(call);
}

// The message of the streamrt::Error that `call` throws, or "<no error>" when it throws none.
inline std::string error_of(const std::function<void()>& call) {
  return message_of<streamrt::Error>(call);
}

// Runs `child_command` (a test child that prints "error: <what>" and exits 3 when the runtime
// throws Error) with `variable`=`bad`, and checks that the Error names the variable and the value.
inline void expect_bad_setting(const std::string& variable, const std::string& bad,
                               const std::string& child_command) {
  const auto r = run_child(variable + "=" + bad + " timeout 120 " + child_command);
  EXPECT_EQ(r.status, 3) << variable << "=" << bad << ": " << r.output;
  EXPECT_NE(r.output.find("error: " + variable + "='" + bad + "'"), std::string::npos) << r.output;
}

// True when the thread `tid` of this process is asleep in the kernel (state S), as a host is
// once it has parked inside synchronize().
inline bool thread_sleeping(pid_t tid) {
  std::ifstream stat("/proc/self/task/" + std::to_string(tid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const auto paren = text.rfind(')');  // the command name may contain spaces
  return paren != std::string::npos && paren + 2 < text.size() && text[paren + 2] == 'S';
}

// Waits until `tid` has been asleep for several polls in a row.
inline bool settled_asleep(pid_t tid) {
  int in_a_row = 0;
  using namespace std::chrono_literals;
  return eventually([&] {
    in_a_row = thread_sleeping(tid) ? in_a_row + 1 : 0;
    if (in_a_row < 5) std::this_thread::sleep_for(2ms);
    return in_a_row >= 5;
  });
}

}  // namespace streamrt_test
