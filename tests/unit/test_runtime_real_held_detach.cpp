// The end of a whole-binary eBPF trace holds the program's threads still while its uprobes
// go (backends/ebpf/held_detach.h): each removal otherwise interrupts every CPU the program
// runs on, and a busy caddy's 116,521 took seconds to go. Checked from the kernel's side
// (each thread's state in /proc), not gotap's: every thread is in a tracing stop while the
// probes go, none after; the program's counts stay exact and its code equals its file; and
// a gotap killed in the middle of it leaves the program running, with no probe left.
#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/unit/fixtures.h"
#include "tests/unit/loopback.h"
#include "tests/unit/real_programs.h"

namespace gotap::testing {
namespace {

constexpr const char* kDelayVar = "GOTAP_TEST_HELD_DETACH_DELAY_MS";
constexpr const char* kHeldLine = "gotap: test: removing the probes, threads held";

// Each thread's state letter (/proc/PID/task/TID/stat, after the command's closing paren).
std::vector<char> thread_states(pid_t pid) {
  std::vector<char> states;
  const std::string dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = opendir(dir.c_str());
  if (!d) return states;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream f(dir + "/" + e->d_name + "/stat");
    std::string line;
    if (!std::getline(f, line)) continue;
    const size_t paren = line.rfind(')');
    if (paren != std::string::npos && paren + 2 < line.size()) states.push_back(line[paren + 2]);
  }
  closedir(d);
  return states;
}

size_t traced_stops(const std::vector<char>& states) {
  size_t n = 0;
  for (char s : states) n += s == 't';
  return n;
}

class HeldDetach : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (BPF and ptrace)";
    if (!file_exists(gotap_binary())) GTEST_SKIP() << gotap_binary() << " is not built";
    if (auto why = Caddy::unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  }
  void TearDown() override { unsetenv(kDelayVar); }

  // gotap counting every function of caddy (over 100,000 uprobes) on eBPF, with the held
  // removal widened to `delay_ms` (0: not); its pid, stderr on tap_err_.
  pid_t start_whole(pid_t caddy, const std::string& out, int delay_ms) {
    if (delay_ms > 0) setenv(kDelayVar, std::to_string(delay_ms).c_str(), 1);
    Child tap = spawn({gotap_binary(), "count", "--backend", "ebpf", "--json", "-o", out, "-p",
                       std::to_string(caddy), "re:."});
    unsetenv(kDelayVar);
    if (tap.pid <= 0) return -1;
    close(tap.out);
    tap_err_ = tap.err;
    err_ = read_until(tap_err_, "Tracing ", 120000);
    return tap.pid;
  }
  // gotap's wait status once it ends (-1 when it cannot be waited for), the rest of its
  // stderr added to err_.
  int reap(pid_t tap) {
    int st = 0;
    if (waitpid(tap, &st, 0) != tap) return -1;
    err_ += read_all(tap_err_);
    close(tap_err_);
    return st;
  }
  int tap_err_ = -1;
  std::string err_;
};

TEST_F(HeldDetach, EveryThreadIsHeldWhileAWholeBinarysProbesGoAndNoneAfter) {
  TempDir dir("held-detach");
  Caddy caddy(dir);
  ASSERT_EQ(caddy.start(), "");
  const pid_t pid = caddy.service().pid();
  const std::string out = dir / "count.jsonl";
  const pid_t tap = start_whole(pid, out, 1000);
  ASSERT_GT(tap, 0);
  ASSERT_NE(err_.find("Tracing "), std::string::npos) << err_;
  constexpr int kRequests = 20;
  int answered = 0;
  for (int i = 0; i < kRequests; ++i) answered += get_ok(caddy.port(), "/ok", "ok");
  ASSERT_EQ(answered, kRequests);
  kill(tap, SIGINT);
  err_ += read_until(tap_err_, kHeldLine, 60000);
  ASSERT_NE(err_.find(kHeldLine), std::string::npos) << err_;
  // The line comes once every thread is held, before the first uprobe goes.
  const std::vector<char> during = thread_states(pid);
  ASSERT_FALSE(during.empty());
  EXPECT_EQ(traced_stops(during), during.size())
      << std::string(during.begin(), during.end()) << " (t: tracing stop)";
  const int st = reap(tap);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << err_;
  Counts c = counts_in(read_file(out));
  ASSERT_TRUE(c.summary) << err_;
  EXPECT_EQ((*c.summary)["detach_held_threads"], true) << err_;
  EXPECT_EQ((*c.summary)["lost"], 0);
  EXPECT_EQ(c.of("net/http.(*conn).serve"), static_cast<uint64_t>(kRequests)) << err_;
  EXPECT_EQ(traced_stops(thread_states(pid)), 0u) << "a thread was left stopped";
  const TextCompare text = compare_text(pid);
  EXPECT_GT(text.bytes, 0u);
  EXPECT_EQ(text.differing, 0u) << text.first;
  int after = 0;
  for (int i = 0; i < 5; ++i) after += get_ok(caddy.port(), "/ok", "ok");
  EXPECT_EQ(after, 5) << "caddy stopped serving after gotap ended";
}

// SIGKILL while the threads are held and no uprobe has gone yet: the kernel lets the
// threads go when their tracer dies and closes its links, so caddy serves on, probe-free.
TEST_F(HeldDetach, AGotapKilledWhileHoldingLeavesTheProgramRunningWithNoProbe) {
  TempDir dir("held-detach-kill");
  Caddy caddy(dir);
  ASSERT_EQ(caddy.start(), "");
  const pid_t pid = caddy.service().pid();
  const pid_t tap = start_whole(pid, dir / "count.jsonl", 5000);
  ASSERT_GT(tap, 0);
  ASSERT_NE(err_.find("Tracing "), std::string::npos) << err_;
  ASSERT_TRUE(get_ok(caddy.port(), "/ok", "ok"));
  kill(tap, SIGINT);
  err_ += read_until(tap_err_, kHeldLine, 60000);
  ASSERT_NE(err_.find(kHeldLine), std::string::npos) << err_;
  ASSERT_GT(traced_stops(thread_states(pid)), 0u);
  kill(tap, SIGKILL);
  const int st = reap(tap);
  ASSERT_NE(st, -1);
  EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) << st;
  EXPECT_TRUE(wait_until(5000, [&] { return traced_stops(thread_states(pid)) == 0; }))
      << "threads still stopped after gotap died";
  int answered = 0;
  for (int i = 0; i < 5; ++i) answered += get_ok(caddy.port(), "/ok", "ok");
  EXPECT_EQ(answered, 5) << "caddy stopped serving after gotap was killed";
  // The links go with the dead gotap's files; their uprobes may take a moment to be gone.
  TextCompare text;
  EXPECT_TRUE(wait_until(30000, [&] {
    text = compare_text(pid);
    return text.bytes > 0 && text.differing == 0;
  })) << text.first;
  EXPECT_TRUE(caddy.service().alive());
}

// Threads another tracer holds (a ptrace gotap attached) cannot be seized: the uprobes go
// with the program running, with a warning that says why, and the other tracer's probe and
// count are untouched.
TEST_F(HeldDetach, ThreadsAnotherTracerHoldsAreLeftAndTheProbesGoAllTheSame) {
  TempDir dir("held-detach-other");
  Caddy caddy(dir);
  ASSERT_EQ(caddy.start(), "");
  const pid_t pid = caddy.service().pid();
  const std::string other_out = dir / "other.jsonl";
  AttachedGotap other;
  ASSERT_EQ(other.attach({"count", "--backend", "ptrace", "--json", "net/http.(*conn).serve"}, pid,
                         other_out),
            "");
  const std::string out = dir / "count.jsonl";
  const pid_t tap = start_whole(pid, out, 0);
  ASSERT_GT(tap, 0);
  ASSERT_NE(err_.find("Tracing "), std::string::npos) << err_;
  constexpr int kRequests = 10;
  int answered = 0;
  for (int i = 0; i < kRequests; ++i) answered += get_ok(caddy.port(), "/ok", "ok");
  ASSERT_EQ(answered, kRequests);
  kill(tap, SIGINT);
  const int st = reap(tap);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << err_;
  EXPECT_NE(err_.find("probes with the program running"), std::string::npos) << err_;
  Counts c = counts_in(read_file(out));
  ASSERT_TRUE(c.summary) << err_;
  EXPECT_EQ((*c.summary)["detach_held_threads"], false) << err_;
  // What differs from the file is the ptrace gotap's int3s (an entry and its RETs), none of
  // the eBPF gotap's 100,000.
  TextCompare text = compare_text(pid);
  EXPECT_GE(text.differing, 1u) << text.first;
  EXPECT_LE(text.differing, 4u) << text.first;
  for (int i = 0; i < kRequests; ++i) answered += get_ok(caddy.port(), "/ok", "ok");
  std::string other_err;
  EXPECT_EQ(other.detach(&other_err), 0) << other_err;
  EXPECT_EQ(counts_in(read_file(other_out)).of("net/http.(*conn).serve"),
            static_cast<uint64_t>(2 * kRequests))
      << other_err;
  text = compare_text(pid);
  EXPECT_GT(text.bytes, 0u);
  EXPECT_EQ(text.differing, 0u) << text.first;
  EXPECT_TRUE(caddy.service().alive());
}

}  // namespace
}  // namespace gotap::testing
