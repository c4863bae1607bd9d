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

#include <string>

#include <gtest/gtest.h>

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

TEST(Leftovers, ThreadOnADeadGotapsInt3SurvivesTheNextAttach) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (ptrace attach)";
  if (!file_exists(gotap_binary())) GTEST_SKIP() << gotap_binary() << " is not built";
  const std::string fx = hammering_fixture();
  if (fx.empty()) GTEST_SKIP() << "no latency fixture built (tests/tools/build-fixtures.sh)";
  // main.work in a loop on the main thread, for far longer than the test.
  Child prog = spawn({fx, "bench", "100000000000"});
  ASSERT_GT(prog.pid, 0);
  const std::string pid = std::to_string(prog.pid);
  usleep(300'000);
  auto alive = [&] {
    int st = 0;
    return waitpid(prog.pid, &st, WNOHANG) == 0;
  };
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
  kill(prog.pid, SIGKILL);
  waitpid(prog.pid, nullptr, 0);
  close(prog.out);
  close(prog.err);
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
TEST(Leftovers, NormalDetachUnmapsItsPages) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (ptrace attach)";
  if (!file_exists(gotap_binary())) GTEST_SKIP() << gotap_binary() << " is not built";
  const std::string fx = hammering_fixture();
  if (fx.empty()) GTEST_SKIP() << "no latency fixture built (tests/tools/build-fixtures.sh)";
  Child prog = spawn({fx, "bench", "100000000000"});
  ASSERT_GT(prog.pid, 0);
  const std::string pid = std::to_string(prog.pid);
  usleep(300'000);
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
  int st = 0;
  EXPECT_EQ(waitpid(prog.pid, &st, WNOHANG), 0) << "the program died";
  TextCompare text = compare_text(prog.pid);
  EXPECT_GT(text.bytes, 0u);
  EXPECT_EQ(text.differing, 0u) << text.first;
  kill(prog.pid, SIGKILL);
  waitpid(prog.pid, nullptr, 0);
  close(prog.out);
  close(prog.err);
}

}  // namespace
}  // namespace gotap::testing
