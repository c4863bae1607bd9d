// A ptrace gotap killed with SIGKILL leaves its int3s in the program; the next gotap puts the
// original bytes back (docs/design.md, "When gotap dies"). A thread that ran one of those
// int3s just before, or just after, the next gotap attached still has its SIGTRAP to take.
// Passed on to the program, that SIGTRAP met a handler that no longer knew the site (the new
// gotap's, which traces other functions), or found the thread in the injected syscall stub,
// and Go died of it ("SIGTRAP: trace trap"). Here the latency fixture's main thread calls
// main.work without pause, so it is on a dead gotap's int3 whenever the next gotap attaches.
// ptrace only: the eBPF backend leaves nothing behind when it dies.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <map>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/sys/proc_maps.h"
#include "tests/unit/fixtures.h"
#include "tests/unit/loopback.h"

namespace gotap::testing {
namespace {

std::string hammering_fixture() {
  std::string path;
  for (const Fixture& f : all_fixtures("latency"))
    if (f.flavour == "default") path = f.path;  // the newest Go's
  return path;
}

// The hammering fixture running main.work in a loop on its main thread, for far longer than
// any test; killed after the test, whatever its outcome.
class Leftovers : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (ptrace attach)";
    if (!file_exists(gotap_binary())) GTEST_SKIP() << gotap_binary() << " is not built";
    const std::string fx = hammering_fixture();
    if (fx.empty()) GTEST_SKIP() << "no latency fixture built (tests/tools/build-fixtures.sh)";
    prog = spawn({fx, "bench", "100000000000"});
    ASSERT_GT(prog.pid, 0);
    pid = std::to_string(prog.pid);
    usleep(300'000);
  }
  void TearDown() override {
    if (prog.pid <= 0) return;
    kill(prog.pid, SIGKILL);
    waitpid(prog.pid, nullptr, 0);
    close(prog.out);
    close(prog.err);
  }
  bool alive() {
    int st = 0;
    return waitpid(prog.pid, &st, WNOHANG) == 0;
  }
  Child prog;
  std::string pid;
};

TEST_F(Leftovers, ThreadOnADeadGotapsInt3SurvivesTheNextAttach) {
  int restored = 0;
  for (int trial = 0; trial < 20 && !HasFailure(); ++trial) {
    SCOPED_TRACE("trial " + std::to_string(trial));
    Child dead = spawn({gotap_binary(), "trace", "--backend", "ptrace", "-p", pid, "main.work"});
    ASSERT_GT(dead.pid, 0);
    const std::string got = read_until(dead.out, "main.work", 30000);
    kill(dead.pid, SIGKILL);
    waitpid(dead.pid, nullptr, 0);
    close(dead.out);
    close(dead.err);
    ASSERT_NE(got.find("main.work"), std::string::npos) << "no event before the kill";
    // The next gotap traces another function: its handler knows none of main.work's sites.
    RunResult next = run_command(
        {gotap_binary(), "count", "--backend", "ptrace", "-p", pid, "-d", "0.2", "main.park"}, 60);
    EXPECT_EQ(next.exit_code, 0) << next.err;
    if (next.err.find("by a gotap that was killed") != std::string::npos) ++restored;
    ASSERT_TRUE(alive()) << "the program died after the gotap of trial " << trial
                         << " was killed; the next gotap said:\n"
                         << next.err << "the program said:\n"
                         << read_until(prog.err, "\n\n\n", 500);
  }
  // Every next gotap found the dead one's int3s (main.work runs without pause), and the
  // last one, which ended normally, left the code as in the file.
  EXPECT_EQ(restored, 20);
  TextCompare text = compare_text(prog.pid);
  EXPECT_GT(text.bytes, 0u);
  EXPECT_EQ(text.differing, 0u) << text.first;
}

// Anonymous executable mappings of pid: gotap's scratch pages among them ([vdso] and the
// kernel's [uprobes] page have names).
int anonymous_code_mappings(pid_t pid) {
  int n = 0;
  for (const sys::Mapping& m : sys::read_maps(pid))
    if (m.inode == 0 && m.perms.find('x') != std::string::npos && m.path.empty()) ++n;
  return n;
}

// A gotap that ends normally takes its pages with it (backends/ptrace/page_release.h): ten
// attaches leave the program with the mappings it had. Before, each left its scratch page
// (7 MiB for a whole binary) and a data page, until vm.max_map_count or the room within 2
// GiB of the image ran out. The main thread runs main.work without pause, so half of the
// attaches trace a function in use at the detach. ptrace only: the eBPF backend maps
// nothing into the program.
TEST_F(Leftovers, NormalDetachUnmapsItsPages) {
  const int before = anonymous_code_mappings(prog.pid);
  for (int i = 0; i < 10; ++i) {
    const char* func = i % 2 ? "main.work" : "main.park";
    RunResult r = run_command({gotap_binary(), i % 4 < 2 ? "count" : "trace", "--backend", "ptrace",
                               "-p", pid, "-d", "0.2", func},
                              60);
    EXPECT_EQ(r.exit_code, 0) << func << ": " << r.err;
    EXPECT_EQ(anonymous_code_mappings(prog.pid), before)
        << "after attach " << i << " (" << func << ")";
  }
  EXPECT_TRUE(alive()) << "the program died";
  TextCompare text = compare_text(prog.pid);
  EXPECT_GT(text.bytes, 0u);
  EXPECT_EQ(text.differing, 0u) << text.first;
}

bool catches_sigtrap(pid_t pid) {
  std::string status = read_file("/proc/" + std::to_string(pid) + "/status");
  size_t at = status.find("SigCgt:");
  if (at == std::string::npos) return false;
  return std::stoull(status.substr(at + 7, status.find('\n', at) - at - 7), nullptr, 16) &
         (1ull << (SIGTRAP - 1));
}

// An int3 that a thread hits while it blocks SIGTRAP (in a signal handler: Go's block every
// signal) has its SIGTRAP forced by the kernel, which resets the handler to SIG_DFL first.
// gotap then lost its safety net for the rest of the trace, and at the detach took SIG_DFL
// for a handler the program had set, so it left the program without its own: Go's handler
// never came back, and neither did gotap's pages. Here runtime.sigtrampgo, which runs in
// Go's handler, is traced while the program gets a SIGURG every 2 ms.
TEST_F(Leftovers, HitsInSignalHandlersLeaveTheProgramItsHandler) {
  ASSERT_TRUE(catches_sigtrap(prog.pid));
  const int before = anonymous_code_mappings(prog.pid);
  Child g = spawn({gotap_binary(), "count", "--backend", "ptrace", "--json", "-p", pid, "-d", "2",
                   "runtime.sigtrampgo"});
  ASSERT_GT(g.pid, 0);
  // Late in the trace, long after the first forced SIGTRAP, the net is back most of the time
  // (it is gone from each forced hit to gotap's next injection).
  const auto start = std::chrono::steady_clock::now();
  int late = 0, caught = 0;
  int st = 0;
  while (waitpid(g.pid, &st, WNOHANG) == 0) {
    kill(prog.pid, SIGURG);
    usleep(2000);
    const auto t = std::chrono::steady_clock::now() - start;
    if (t > std::chrono::milliseconds(1200) && t < std::chrono::milliseconds(1900)) {
      ++late;
      caught += catches_sigtrap(prog.pid);
    }
  }
  EXPECT_GT(caught, 0) << "the net never came back (of " << late << " looks)";
  const std::string out = read_all(g.out), err = read_all(g.err);
  close(g.out);
  close(g.err);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << err;
  uint64_t hits = 0;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    auto e = nlohmann::json::parse(line, nullptr, false);
    if (!e.is_discarded() && e.value("func", "") == "runtime.sigtrampgo")
      hits = e.value("count", uint64_t{0});
  }
  EXPECT_GT(hits, 0u) << out << err;
  EXPECT_TRUE(catches_sigtrap(prog.pid)) << "the program's SIGTRAP handler did not come back";
  EXPECT_EQ(anonymous_code_mappings(prog.pid), before);
  EXPECT_TRUE(alive()) << "the program died";
}

// Ends gotap as SIGKILL or the OOM killer would, and reaps it.
void kill_gotap(Child& g) {
  kill(g.pid, SIGKILL);
  waitpid(g.pid, nullptr, 0);
  close(g.out);
  close(g.err);
}

// Watches `pid` for `rounds` of `poke` then `pause_us`: how it died ("Trace/breakpoint trap",
// "exit 2"), or "" when it lived through them. A death is reaped.
std::string death_of(pid_t pid, int rounds, int pause_us, const std::function<void()>& poke) {
  for (int i = 0; i < rounds; ++i) {
    poke();
    usleep(pause_us);
    int st = 0;
    if (waitpid(pid, &st, WNOHANG) == pid)
      return WIFSIGNALED(st) ? strsignal(WTERMSIG(st)) : "exit " + std::to_string(WEXITSTATUS(st));
  }
  return "";
}

// Go's signal handlers block every signal while they run. A gotap killed while it probed
// code they run (here runtime.sigtrampgo, hit at each SIGURG) left int3s whose SIGTRAP the
// kernel forced past the blocked mask, with the default action: the program died at the next
// signal ("trace/breakpoint trap"), though its SIGTRAP handler was the net. gotap now takes
// SIGTRAP out of the handlers' masks while it traces, so the net catches those hits too.
TEST_F(Leftovers, KilledWhileProbingSignalHandlerCodeLeavesTheProgramRunning) {
  Child g = spawn(
      {gotap_binary(), "count", "--backend", "ptrace", "--json", "-p", pid, "runtime.sigtrampgo"});
  ASSERT_GT(g.pid, 0);
  const std::string err = read_until(g.err, "Tracing ", 60000);
  ASSERT_NE(err.find("Tracing "), std::string::npos) << err;
  for (int i = 0; i < 100; ++i) {  // hits while traced
    kill(prog.pid, SIGURG);
    usleep(2000);
  }
  kill_gotap(g);
  // Every signal now runs the dead gotap's int3 in the handler.
  const std::string death = death_of(prog.pid, 500, 2000, [&] { kill(prog.pid, SIGURG); });
  EXPECT_EQ(death, "") << "the program died";
  if (!death.empty()) prog.pid = 0;
}

// The newest "GT sigmask" line the program printed: what was read over 300 ms, its last line.
std::string newest_mask_line(int fd) {
  const std::string got = read_until(fd, "\x01", 300);
  const size_t end = got.rfind('\n');
  if (end == std::string::npos) return "";
  const size_t before = end == 0 ? std::string::npos : got.rfind('\n', end - 1);
  const size_t start = before == std::string::npos ? 0 : before + 1;
  return got.substr(start, end - start);
}

// That line without its SIGINT column.
std::string mask_of_urg_and_prof(int fd) {
  const std::string line = newest_mask_line(fd);
  return line.substr(0, line.find(" int="));
}

// While ptrace traces, the program's handlers let SIGTRAP through (the net above); a normal
// end gives them their masks back. The program reads its handlers' masks itself.
TEST(SignalMasks, TracedHandlersLetSigtrapThroughAndGetTheirMasksBack) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (ptrace attach)";
  if (!file_exists(gotap_binary())) GTEST_SKIP() << gotap_binary() << " is not built";
  const std::string fx = hammering_fixture();
  if (fx.empty()) GTEST_SKIP() << "no latency fixture built (tests/tools/build-fixtures.sh)";
  Child prog = spawn({fx, "sigmask", "20000"});
  ASSERT_GT(prog.pid, 0);
  usleep(200'000);
  // SIGINT is left out: Go keeps an inherited SIG_IGN for it (a CI runner's background job).
  EXPECT_EQ(mask_of_urg_and_prof(prog.out), "GT sigmask urg=1 prof=1") << "before";
  Child g = spawn({gotap_binary(), "trace", "--backend", "ptrace", "-p", std::to_string(prog.pid),
                   "main.work"});
  ASSERT_GT(g.pid, 0);
  const std::string err = read_until(g.err, "Tracing ", 60000);
  EXPECT_NE(err.find("Tracing "), std::string::npos) << err;
  usleep(200'000);
  EXPECT_EQ(mask_of_urg_and_prof(prog.out), "GT sigmask urg=0 prof=0") << "while traced";
  kill(g.pid, SIGINT);
  int st = 0;
  waitpid(g.pid, &st, 0);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st << read_all(g.err);
  close(g.out);
  close(g.err);
  usleep(200'000);
  EXPECT_EQ(mask_of_urg_and_prof(prog.out), "GT sigmask urg=1 prof=1") << "after";
  kill(prog.pid, SIGKILL);
  waitpid(prog.pid, nullptr, 0);
  close(prog.out);
  close(prog.err);
}

// Go also blocks every signal with sigprocmask: around clone and fork, in an exiting thread
// (mexit, and handoffp, startm, newm and the allocator it calls), and a cgo thread starts
// with C's full mask. A gotap killed while it probed the whole binary of a program whose
// threads come and go, or that execs, left int3s there, and the program died of SIGTRAP at
// once. Now gotap clears SIGTRAP in Go's two full masks while it traces, and places no int3
// where a cgo thread starts or where handlers return (core/plan/signals_blocked.h). The
// program's own count is the ground truth that it went on.
TEST(KilledGotap, ProgramWhoseThreadsComeAndGoOrThatExecsSurvives) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (ptrace attach)";
  if (!file_exists(gotap_binary())) GTEST_SKIP() << gotap_binary() << " is not built";
  std::map<std::string, std::string> newest;  // flavour -> the newest Go's build
  for (const Fixture& f : all_fixtures("latency"))
    if (f.flavour == "default" || f.flavour == "cgo") newest[f.flavour] = f.path;
  if (newest.empty()) GTEST_SKIP() << "no latency fixture built (tests/tools/build-fixtures.sh)";
  for (const auto& [flavour, path] : newest)
    for (const char* mode : {"threads", "exec"}) {
      SCOPED_TRACE(flavour + " " + mode);
      Child prog = spawn({path, mode, "100000000"});
      ASSERT_GT(prog.pid, 0);
      usleep(200'000);
      Child g = spawn(
          {gotap_binary(), "count", "--backend", "ptrace", "-p", std::to_string(prog.pid), "re:."});
      ASSERT_GT(g.pid, 0);
      const std::string err = read_until(g.err, "Tracing ", 60000);
      EXPECT_NE(err.find("Tracing "), std::string::npos) << err;
      usleep(300'000);
      kill_gotap(g);
      const std::string death = death_of(prog.pid, 100, 10'000, [] {});
      EXPECT_EQ(death, "") << "the program died";
      if (death.empty()) {
        kill(prog.pid, SIGKILL);
        waitpid(prog.pid, nullptr, 0);
      }
      const std::string out = read_all(prog.out);
      EXPECT_EQ(out.find("exec failed"), std::string::npos) << out.substr(0, 2000);
      close(prog.out);
      close(prog.err);
    }
}

}  // namespace
}  // namespace gotap::testing
