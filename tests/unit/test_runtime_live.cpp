// A trace read while it runs, once per backend, attached by pid to Debian's stripped rclone
// serving loopback requests one at a time (docs/cli.md, "Output"):
// - one request's events reach a pipe, and a file given with -o, within 0.5 s of the
//   request being answered, though nothing else happens in the program; so do
//   `goroutines --json` events;
// - `gotap ... | head -2` ends within 1 s of head's second line;
// - a failure after the probes are placed (an output that throws at its Nth event,
//   GOTAP_TEST_FAIL_SINK_AT) ends gotap with exit 1 and one line, and leaves the program's
//   code as in its file, the program serving; so does a write that fails (-o /dev/full).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "tests/unit/fixtures.h"
#include "tests/unit/loopback.h"

namespace gotap::testing {
namespace {

using Clock = std::chrono::steady_clock;

// Runs once per request, on the connection's goroutine, after the request is read.
const char* const kFunc = "net/http.serverHandler.ServeHTTP";

// The start of a long output, for failure messages.
std::string head(const std::string& s) {
  return s.size() > 400 ? s.substr(0, 400) + "..." : s;
}

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

// Waits up to timeout_ms for pid to end; its wait status, or -1.
int wait_for(pid_t pid, int timeout_ms) {
  int st = 0;
  for (auto end = Clock::now() + std::chrono::milliseconds(timeout_ms); Clock::now() < end;) {
    if (waitpid(pid, &st, WNOHANG) == pid) return st;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return -1;
}

void end_child(Child& c) {
  if (c.pid > 0 && wait_for(c.pid, 0) == -1) {
    kill(c.pid, SIGINT);
    if (wait_for(c.pid, 10000) == -1) {
      kill(c.pid, SIGKILL);
      waitpid(c.pid, nullptr, 0);
    }
  }
  c.pid = -1;
  if (c.out >= 0) close(c.out);
  if (c.err >= 0) close(c.err);
  c.out = c.err = -1;
}

class LiveTrace : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (ptrace attach and BPF)";
    if (!file_exists(gotap_binary())) GTEST_SKIP() << gotap_binary() << " is not built";
    if (auto why = RcloneServer::unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
    std::string err = srv_.start("gotap-live");
    ASSERT_TRUE(err.empty()) << err;
  }
  void TearDown() override { srv_.stop(); }

  std::vector<std::string> trace_argv(std::vector<std::string> extra = {}) {
    std::vector<std::string> a = {gotap_binary(),
                                  "trace",
                                  "--backend",
                                  GetParam(),
                                  "--json",
                                  "-p",
                                  std::to_string(srv_.pid())};
    a.insert(a.end(), extra.begin(), extra.end());
    a.push_back(kFunc);
    return a;
  }

  // Waits for the banner that says the probes are live.
  void wait_tracing(int err_fd) {
    std::string err = read_until(err_fd, "Tracing ", 60000);
    ASSERT_NE(err.find("Tracing "), std::string::npos) << err;
    // The banner's end: its newline may come in a write of its own.
    if (err.find('\n', err.find("Tracing ")) == std::string::npos)
      err += read_until(err_fd, "\n", 5000);
    ASSERT_NE(err.find('\n', err.find("Tracing ")), std::string::npos) << err;
    // The program settles: nothing it does now is traced (no request is in flight).
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }

  // Serves requests (at most 20, 200 ms apart) until gotap ends by itself, as it must after
  // the failure `why`; its exit status and stderr, or nullopt (a failure recorded) when it
  // did not end.
  std::optional<std::pair<int, std::string>> serve_until_exit(Child& tap, const char* why) {
    int st = -1;
    for (int i = 0; i < 20 && st == -1; ++i) {
      EXPECT_TRUE(served_ok(http_get(srv_.port(), RcloneServer::kPage), RcloneServer::kBody));
      st = wait_for(tap.pid, 200);
    }
    if (st == -1) {
      ADD_FAILURE() << "gotap did not end on " << why;
      end_child(tap);
      return std::nullopt;
    }
    tap.pid = -1;
    std::string err = read_until(tap.err, "\n\n", 1000);
    end_child(tap);
    return std::make_pair(st, err);
  }

  RcloneServer srv_;
};

// One request, then nothing: its entry and return reach the pipe within 0.5 s.
TEST_P(LiveTrace, OneRequestReachesAPipeWithinHalfASecond) {
  Child tap = spawn(trace_argv());
  ASSERT_GT(tap.pid, 0);
  wait_tracing(tap.err);
  if (HasFatalFailure()) return end_child(tap);
  for (int i = 0; i < 3; ++i) {
    SCOPED_TRACE("request " + std::to_string(i));
    ASSERT_TRUE(served_ok(http_get(srv_.port(), RcloneServer::kPage), RcloneServer::kBody));
    const auto answered = Clock::now();
    std::string got = read_until(tap.out, "\"event\":\"return\"", 500);
    EXPECT_NE(got.find("\"event\":\"entry\""), std::string::npos)
        << "no entry within " << ms_since(answered) << " ms of the answer: " << head(got);
    EXPECT_NE(got.find("\"event\":\"return\""), std::string::npos)
        << "no return within " << ms_since(answered) << " ms of the answer: " << head(got);
    EXPECT_NE(got.find(kFunc), std::string::npos) << head(got);
  }
  end_child(tap);
}

// `goroutines --json` streams too: the goroutine a request's connection runs on is created
// within 0.5 s of the answer reaching us (and nothing is held back until the end).
TEST_P(LiveTrace, GoroutineEventsReachAPipeWithinHalfASecond) {
  Child tap = spawn({gotap_binary(), "goroutines", "--backend", GetParam(), "--json", "-p",
                     std::to_string(srv_.pid())});
  ASSERT_GT(tap.pid, 0);
  wait_tracing(tap.err);
  if (HasFatalFailure()) return end_child(tap);
  read_until(tap.out, "\n\n", 200);  // whatever the idle server's goroutines did
  ASSERT_TRUE(served_ok(http_get(srv_.port(), RcloneServer::kPage), RcloneServer::kBody));
  const auto answered = Clock::now();
  std::string got = read_until(tap.out, "\"event\":\"gcreate\"", 500);
  EXPECT_NE(got.find("\"event\":\"gcreate\""), std::string::npos)
      << "no gcreate within " << ms_since(answered) << " ms of the answer: " << head(got);
  end_child(tap);
}

// The same through -o FILE, which is fully buffered: flushed per batch all the same.
TEST_P(LiveTrace, OneRequestReachesAFileWithinHalfASecond) {
  const std::string path = ::testing::TempDir() + "gotap-live-" + GetParam() + ".jsonl";
  std::filesystem::remove(path);
  Child tap = spawn(trace_argv({"-o", path}));
  ASSERT_GT(tap.pid, 0);
  wait_tracing(tap.err);
  if (HasFatalFailure()) return end_child(tap);
  ASSERT_TRUE(served_ok(http_get(srv_.port(), RcloneServer::kPage), RcloneServer::kBody));
  const auto answered = Clock::now();
  std::string got;
  while (ms_since(answered) < 500 && got.find("\"event\":\"return\"") == std::string::npos) {
    got = read_file(path);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_NE(got.find("\"event\":\"entry\""), std::string::npos) << "after 500 ms: " << head(got);
  EXPECT_NE(got.find("\"event\":\"return\""), std::string::npos) << "after 500 ms: " << head(got);
  end_child(tap);
  std::filesystem::remove(path);
}

// `gotap trace ... | head -2`, as a user types it: the pipeline ends within 1 s of the
// second line, and the server goes on serving.
TEST_P(LiveTrace, HeadTwoEndsTheTraceWithinASecond) {
  std::string cmd;
  for (const auto& a : trace_argv()) cmd += "'" + a + "' ";
  cmd += "| head -2";
  Child sh = spawn({"/bin/sh", "-c", cmd});
  ASSERT_GT(sh.pid, 0);
  wait_tracing(sh.err);
  if (HasFatalFailure()) return end_child(sh);
  std::string got;
  int lines = 0;
  for (int i = 0; i < 5 && lines < 2; ++i) {
    ASSERT_TRUE(served_ok(http_get(srv_.port(), RcloneServer::kPage), RcloneServer::kBody));
    got += read_until(sh.out, "\n\n", 500);  // all that arrives within 0.5 s
    lines = int(std::count(got.begin(), got.end(), '\n'));
  }
  ASSERT_EQ(lines, 2) << "head's output: " << head(got);
  const auto second_line = Clock::now();
  const int st = wait_for(sh.pid, 1000);
  EXPECT_NE(st, -1) << "`gotap ... | head -2` still runs " << ms_since(second_line)
                    << " ms after head's second line";
  if (st != -1) sh.pid = -1;
  end_child(sh);
  EXPECT_TRUE(srv_.serves_page());
}

// The output throws at its 3rd event (after the probes went in): gotap removes every probe,
// says so in one line and exits 1; the program's code equals its file's, and it serves.
TEST_P(LiveTrace, FailureAfterProbesAreInLeavesTheCodeAsInItsFile) {
  const TextCompare before = compare_text(srv_.pid());
  ASSERT_GT(before.bytes, 0u);
  ASSERT_EQ(before.differing, 0u) << before.first;
  setenv("GOTAP_TEST_FAIL_SINK_AT", "3", 1);
  Child tap = spawn(trace_argv());
  unsetenv("GOTAP_TEST_FAIL_SINK_AT");
  ASSERT_GT(tap.pid, 0);
  wait_tracing(tap.err);
  if (HasFatalFailure()) return end_child(tap);
  // Mid-trace the probes are in the code: the comparison sees them.
  const TextCompare during = compare_text(srv_.pid());
  EXPECT_GT(during.differing, 0u) << "no probe seen in the program's code while tracing";
  auto ended = serve_until_exit(tap, "the injected failure");
  if (!ended) return;
  const auto& [st, err] = *ended;
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 1) << "status " << st << ": " << err;
  EXPECT_EQ(err.rfind("gotap: ", 0), 0u) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  EXPECT_NE(err.find("injected output failure"), std::string::npos) << err;
  const TextCompare after = compare_text(srv_.pid());
  EXPECT_EQ(after.bytes, before.bytes);
  EXPECT_EQ(after.differing, 0u) << after.first;
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(srv_.serves_page());
}

// A write that fails (here: -o /dev/full, ENOSPC) is no reader leaving: the trace stops, its
// probes removed, and gotap exits 1 with one line; the program's code is as in its file.
TEST_P(LiveTrace, WriteErrorEndsTheTraceWithExitOne) {
  Child tap = spawn(trace_argv({"-o", "/dev/full"}));
  ASSERT_GT(tap.pid, 0);
  wait_tracing(tap.err);
  if (HasFatalFailure()) return end_child(tap);
  auto ended = serve_until_exit(tap, "the failed write");
  if (!ended) return;
  const auto& [st, err] = *ended;
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 1) << "status " << st << ": " << err;
  EXPECT_EQ(err, "gotap: cannot write the output: No space left on device\n");
  const TextCompare after = compare_text(srv_.pid());
  EXPECT_GT(after.bytes, 0u);
  EXPECT_EQ(after.differing, 0u) << after.first;
  EXPECT_TRUE(srv_.serves_page());
}

INSTANTIATE_TEST_SUITE_P(Backends, LiveTrace, ::testing::Values("ebpf", "ptrace"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace gotap::testing
