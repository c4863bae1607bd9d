// The trampoline backend (issue 38): `gotap count --backend trampoline`, run on the fixtures
// and against the program's own truth. Counts equal the calls the program makes (the stress
// fixture's recursion grows its stack, so each call of main.grow passes the stack check once
// or twice); an attached program gets exactly the calls made while it was patched, runs on
// unchanged after, and keeps nothing of gotap (its text equals its file, its mappings are
// those it had); a gotap killed mid-trace leaves a program that runs as before; a uprobe put
// on the patched code by another tracer keeps the program right and keeps its int3; exec
// and fork end or pass as they do on the other backends.
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/perf_event.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/binary/elf_file.h"
#include "core/sys/fd.h"
#include "tests/unit/fixtures.h"
#include "tests/unit/loopback.h"

namespace gotap::testing {
namespace {

using json = nlohmann::json;

class Trampoline : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "the trampoline backend needs root (ptrace)";
  }
};

// Runs a command and returns what it printed; its stdout alone when untraced.
std::string untraced(const std::vector<std::string>& argv) {
  RunResult r = run_command(argv, 120);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.out;
}

// The count events of a JSON run, by function.
std::map<std::string, uint64_t> counts_of(const std::string& out) {
  std::map<std::string, uint64_t> m;
  for (const json& e : events_in(out, "count")) m[e["func"]] = e["count"];
  return m;
}

// The stress fixture, launched: its output is the untraced run's, and its functions' counts
// are the calls tests/fixtures/stress/main.go makes with these flags (as in PtraceTrace's
// StressOutputUnchanged): grow(1500) is 1501 calls, goroutine g calls grow(g%50) (g%50+1
// calls), mayPanic runs 30 times, main.main.func1 once per goroutine. grow's frame is large
// and its stack grows under it: a call that goes through morestack is still one call.
TEST_F(Trampoline, CountsEveryCallOfTheStressFixture) {
  auto fx = all_fixtures("stress");
  if (fx.empty()) GTEST_SKIP() << "no stress fixtures built";
  for (const Fixture& f : fx) {
    SCOPED_TRACE(f.label());
    const int goroutines = 300, depth = 1500;
    std::vector<std::string> argv = {f.path, "-goroutines", std::to_string(goroutines), "-depth",
                                     std::to_string(depth)};
    const std::string want = untraced(argv);
    ASSERT_NE(want.find("done"), std::string::npos);
    std::vector<std::string> cmd = {gotap_binary(),  "count",           "--backend",
                                    "trampoline",    "--json",          "main.grow",
                                    "main.mayPanic", "main.main.func1", "--"};
    cmd.insert(cmd.end(), argv.begin(), argv.end());
    RunResult r = run_command(cmd, 180);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::string program;  // its lines, without gotap's events
    std::istringstream in(r.out);
    for (std::string line; std::getline(in, line);)
      if (line.rfind("{\"event\"", 0) != 0) program += line + "\n";
    EXPECT_EQ(program, want);
    uint64_t grows = depth + 1;
    for (int g = 0; g < goroutines; ++g) grows += g % 50 + 1;
    auto c = counts_of(r.out);
    EXPECT_EQ(c["main.grow"], grows);
    EXPECT_EQ(c["main.mayPanic"], 30u);
    EXPECT_EQ(c["main.main.func1"], uint64_t(goroutines));
    const json s = summary_in(r.out);
    EXPECT_EQ(s.value("backend", ""), "trampoline");
    EXPECT_EQ(s.value("ended_by", ""), "exit");
    EXPECT_EQ(s.value("exit_code", -1), 0);
    EXPECT_EQ(s.value("lost", 1), 0);
    EXPECT_EQ(s.value("probes", 0), 3);
  }
}

// The basic fixture on every Go release and build flavour: each function it prints ground
// truth for ("GT main.add a=1 b=2", one line per call) is counted exactly that often, and
// counts equal the eBPF backend's for the same run of the program (eBPF without inlined
// sites, which the trampoline backend does not count).
TEST_F(Trampoline, CountsEqualTheGroundTruthAndEbpfOnEveryRelease) {
  auto fx = all_fixtures("basic");
  if (fx.empty()) GTEST_SKIP() << "no basic fixtures built";
  for (const Fixture& f : fx) {
    SCOPED_TRACE(f.label());
    RunResult t = run_command(
        {gotap_binary(), "count", "--backend", "trampoline", "--json", "main.*", "--", f.path},
        120);
    RunResult e = run_command({gotap_binary(), "count", "--backend", "ebpf", "--json",
                               "--no-inline", "main.*", "--", f.path},
                              120);
    ASSERT_EQ(t.exit_code, 0) << t.err;
    ASSERT_EQ(e.exit_code, 0) << e.err;
    std::map<std::string, uint64_t> truth;
    std::istringstream in(t.out);
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("GT ", 0) != 0 || line.find(" -> ") != std::string::npos) continue;
      const size_t sp = line.find(' ', 3);
      ++truth[line.substr(3, sp == std::string::npos ? std::string::npos : sp - 3)];
    }
    ASSERT_FALSE(truth.empty()) << t.out;
    const auto tc = counts_of(t.out), ec = counts_of(e.out);
    for (const auto& [func, n] : truth) {
      if (f.go_version == "1.19" && !tc.count(func)) continue;  // short functions left out
      EXPECT_EQ(tc.count(func) ? tc.at(func) : 0, n) << func << "\n" << t.err;
    }
    for (const auto& [func, n] : tc) EXPECT_EQ(ec.count(func) ? ec.at(func) : 0, n) << func;
    EXPECT_GE(tc.size() * 2, ec.size()) << "most functions have a site";
  }
}

std::vector<std::pair<uint64_t, std::string>> objdump_head(const std::string& listing,
                                                           const std::string& func);

// Whether gotap's other backends probe main.work on its stack check's jbe, which a
// trampoline's jump over the short check's compare goes around (core/plan/probe_detour.h):
// no `push rbp` follows the jbe (Go before 1.21), as go tool objdump lists the default
// flavour of that release.
bool probe_gone_around(const Fixture& f) {
  std::string path = f.path;
  if (const size_t at = path.find("/pie-stripped/"); at != std::string::npos)
    path.replace(at, 14, "/default/");
  const auto head = objdump_head(read_file(path + ".objdump"), "main.work");
  EXPECT_GE(head.size(), 3u) << path;
  return head.size() >= 3 && head[2].second != "55";
}

std::vector<Fixture> latency_fixtures() {
  std::vector<Fixture> out;
  for (const Fixture& f : all_fixtures("latency"))
    if (f.flavour == "default" || f.flavour == "pie-stripped") out.push_back(f);
  return out;
}

TEST_F(Trampoline, AttachedProgramGetsExactlyTheCallsMadeWhilePatched) {
  auto fx = latency_fixtures();
  if (fx.empty()) GTEST_SKIP() << "no latency fixtures built";
  for (const Fixture& f : fx) {
    SCOPED_TRACE(f.label());
    Spin prog(f.path);
    ASSERT_TRUE(prog.ask(1000)) << "before the attach: not counted";
    const auto maps_before = maps_of(prog.pid());
    Background g{spawn({gotap_binary(), "count", "--backend", "trampoline", "--json", "-p",
                        std::to_string(prog.pid()), "main.work"})};
    ASSERT_TRUE(g.tracing()) << g.err;
    EXPECT_EQ(anonymous_code(maps_of(prog.pid())), anonymous_code(maps_before) + 1)
        << "the trampolines' pages";
    ASSERT_TRUE(prog.ask(5000));
    ASSERT_TRUE(prog.ask(2345));
    std::string out;
    EXPECT_EQ(g.end(SIGINT, &out), 0) << g.err;
    EXPECT_EQ(counts_of(out)["main.work"], 7345u) << out;
    const json s = summary_in(out);
    EXPECT_EQ(s.value("ended_by", ""), "stop");
    EXPECT_EQ(s["pages_kept"], false);
    // Nothing of gotap is left: the text is the file's, the mappings are those it had, and
    // the program goes on and ends as it would have.
    TextCompare text = compare_text(prog.pid());
    EXPECT_GT(text.bytes, 0u);
    EXPECT_EQ(text.differing, 0u) << text.first;
    EXPECT_EQ(anonymous_code(maps_of(prog.pid())), anonymous_code(maps_before));
    ASSERT_TRUE(prog.ask(100));
    EXPECT_TRUE(prog.ends_well());
  }
}

// Every function of Debian's stripped rclone that has a site, patched while it serves: each
// request on a connection of its own is one call of net/http.(*conn).serve, counted exactly
// whatever else runs; the server answers throughout and after, with its text the file's.
TEST_F(Trampoline, AWholeStrippedServerCountsItsRequestsExactly) {
  if (auto why = RcloneServer::unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  RcloneServer srv;
  const std::string started = srv.start("gotap-trampoline");
  ASSERT_EQ(started, "");
  ASSERT_TRUE(srv.serves_page());
  const auto maps_before = maps_of(srv.pid());
  Background g(spawn({gotap_binary(), "count", "--backend", "trampoline", "--json", "-p",
                      std::to_string(srv.pid()), "*"}));
  ASSERT_TRUE(g.tracing(180000)) << g.err;
  constexpr int kRequests = 40;
  for (int i = 0; i < kRequests; ++i) ASSERT_TRUE(srv.serves_page()) << "request " << i;
  std::string out;
  EXPECT_EQ(g.end(SIGINT, &out), 0) << g.err;
  auto c = counts_of(out);
  EXPECT_EQ(c["net/http.(*conn).serve"], uint64_t(kRequests));
  EXPECT_GT(c.size(), 100u) << "the rest of the server's work is counted too";
  const json s = summary_in(out);
  EXPECT_GT(s.value("probes", 0), 10000) << s;
  EXPECT_EQ(s["pages_kept"], false);
  TextCompare text = compare_text(srv.pid());
  EXPECT_GT(text.bytes, 0u);
  EXPECT_EQ(text.differing, 0u) << text.first;
  EXPECT_EQ(anonymous_code(maps_of(srv.pid())), anonymous_code(maps_before));
  EXPECT_TRUE(srv.serves_page());
}

// Each way a trace can end, three times each, on Debian's stripped rclone that two clients
// keep busy: the server never fails a request, answers after each end, and after every end
// but SIGKILL its text is its file's again. -i keeps output flowing, so that a reader that
// goes away is seen at the next write.
TEST_F(Trampoline, AServerUnderLoadSurvivesEveryWayGotapEnds) {
  if (auto why = RcloneServer::unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  RcloneServer srv;
  ASSERT_EQ(srv.start("gotap-trampoline-ends"), "");
  std::atomic<bool> stop{false};
  std::atomic<int> ok{0}, failed{0};
  std::vector<std::thread> load;
  // A failed ASSERT returns with the load running: its threads are stopped and joined then
  // too (a joinable thread's destructor ended the whole test binary, its reason unprinted).
  struct Joiner {
    std::atomic<bool>& stop;
    std::vector<std::thread>& threads;
    ~Joiner() {
      stop.store(true);
      for (auto& t : threads)
        if (t.joinable()) t.join();
    }
  } joiner{stop, load};
  for (int i = 0; i < 2; ++i)
    load.emplace_back([&] {
      while (!stop.load())
        (served_ok(http_get(srv.port(), RcloneServer::kPage), RcloneServer::kBody) ? ok : failed)++;
    });
  const std::vector<std::pair<std::string, int>> ends = {{"SIGKILL", SIGKILL},
                                                         {"reader gone", 0},
                                                         {"SIGHUP", SIGHUP},
                                                         {"SIGTERM", SIGTERM},
                                                         {"SIGINT", SIGINT}};
  for (const auto& [name, sig] : ends)
    for (int i = 0; i < 3; ++i) {
      SCOPED_TRACE(name + " #" + std::to_string(i));
      Background g(spawn({gotap_binary(), "count", "--backend", "trampoline", "-i", "0.05", "-p",
                          std::to_string(srv.pid()), "net/http.*"}));
      ASSERT_TRUE(g.tracing()) << g.err;
      read_until(g.c.out, "[interval 2", 5000);
      int st = 0;
      if (sig) {
        kill(g.c.pid, sig);
      } else {
        close(g.c.out);
        g.c.out = -1;
      }
      std::thread drain([fd = g.c.out] {
        if (fd >= 0) read_all(fd);
      });
      waitpid(g.c.pid, &st, 0);
      drain.join();
      g.err += read_all(g.c.err);
      if (g.c.out >= 0) close(g.c.out);
      close(g.c.err);
      if (sig == SIGKILL) {
        EXPECT_TRUE(WIFSIGNALED(st)) << st;
      } else {
        EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st << "\n" << g.err;
        TextCompare text = compare_text(srv.pid());
        EXPECT_EQ(text.differing, 0u) << text.first;
      }
      EXPECT_TRUE(srv.serves_page());
    }
  stop.store(true);
  for (auto& t : load) t.join();
  EXPECT_EQ(failed.load(), 0) << ok.load() << " served";
  EXPECT_GT(ok.load(), 0);
}

// SIGKILL leaves the jumps and the trampolines in place: the program runs on, counting into
// memory nobody reads, and another backend still counts its calls exactly.
TEST_F(Trampoline, AKilledGotapLeavesAProgramThatRunsAsBefore) {
  auto fx = latency_fixtures();
  if (fx.empty()) GTEST_SKIP() << "no latency fixtures built";
  for (const Fixture& f : fx) {
    SCOPED_TRACE(f.label());
    const bool around = probe_gone_around(f);
    Spin prog(f.path);
    ASSERT_TRUE(prog.ask(10));
    const auto maps_before = maps_of(prog.pid());
    Background g{spawn({gotap_binary(), "count", "--backend", "trampoline", "-p",
                        std::to_string(prog.pid()), "main.work"})};
    ASSERT_TRUE(g.tracing()) << g.err;
    EXPECT_EQ(g.end(SIGKILL, nullptr), -1);
    ASSERT_TRUE(prog.ask(3000));
    EXPECT_GT(compare_text(prog.pid()).differing, 0u) << "the jump stays";
    Background e{spawn({gotap_binary(), "count", "--backend", "ebpf", "--json", "-p",
                        std::to_string(prog.pid()), "main.work"})};
    std::string out;
    if (around) {
      // Its probe on the jbe, which the left jump holds: it says so, counts nothing.
      EXPECT_EQ(e.end(0, &out), 1) << e.err;
      EXPECT_NE(e.err.find("(a trampoline gotap's) holds the entry probe"), std::string::npos)
          << e.err;
    } else {
      ASSERT_TRUE(e.tracing()) << e.err;
      ASSERT_TRUE(prog.ask(300));
      EXPECT_EQ(e.end(SIGINT, &out), 0) << e.err;
      EXPECT_EQ(counts_of(out)["main.work"], 300u) << out;
    }
    // A trampoline gotap after it takes back the jump left, whose pages hold its trampoline's
    // place (a short function's), and their pages; it counts exactly, and at its end the
    // text and the mappings are the program's own again.
    Background t{spawn({gotap_binary(), "count", "--backend", "trampoline", "--json", "-p",
                        std::to_string(prog.pid()), "main.work"})};
    ASSERT_TRUE(t.tracing()) << t.err;
    EXPECT_NE(t.err.find("took back 1 jump left in pid"), std::string::npos) << t.err;
    ASSERT_TRUE(prog.ask(400));
    EXPECT_EQ(t.end(SIGINT, &out), 0) << t.err;
    EXPECT_EQ(counts_of(out)["main.work"], 400u) << out;
    TextCompare text = compare_text(prog.pid());
    EXPECT_EQ(text.differing, 0u) << text.first;
    EXPECT_EQ(anonymous_code(maps_of(prog.pid())), anonymous_code(maps_before));
    EXPECT_TRUE(prog.ends_well());
  }
}

// A killed gotap that patched every main function leaves jumps into pages that hold the
// place of one function's trampoline: a gotap for that one function takes back every jump
// into them (read from the whole text, not from its pattern), removes them, counts
// exactly, and at its end the program is its own again.
TEST_F(Trampoline, AKilledGotapsPagesAreTakenBackWhateverItPatched) {
  auto fx = latency_fixtures();
  if (fx.empty()) GTEST_SKIP() << "no latency fixtures built";
  const Fixture& f = fx.back();
  Spin prog(f.path);
  ASSERT_TRUE(prog.ask(10));
  const auto maps_before = maps_of(prog.pid());
  Background g{spawn({gotap_binary(), "count", "--backend", "trampoline", "-p",
                      std::to_string(prog.pid()), "re:^main\\."})};
  ASSERT_TRUE(g.tracing()) << g.err;
  EXPECT_EQ(g.end(SIGKILL, nullptr), -1);
  ASSERT_TRUE(prog.ask(500));
  const TextCompare left = compare_text(prog.pid());
  ASSERT_GT(left.differing, 1u) << "jumps in more than main.work";
  Background t{spawn({gotap_binary(), "count", "--backend", "trampoline", "--json", "-p",
                      std::to_string(prog.pid()), "main.work"})};
  ASSERT_TRUE(t.tracing()) << t.err;
  std::smatch n;
  ASSERT_TRUE(std::regex_search(t.err, n, std::regex("took back (\\d+) jumps left"))) << t.err;
  EXPECT_GT(std::stoul(n[1]), 1u) << t.err;
  ASSERT_TRUE(prog.ask(400));
  std::string out;
  EXPECT_EQ(t.end(SIGINT, &out), 0) << t.err;
  EXPECT_EQ(counts_of(out)["main.work"], 400u) << out;
  // Of the killed gotap's, only jumps into its other region can be left (a 6-byte jbe's jno,
  // outside main.work), with that region: no short check's jump, and no page at the place.
  const TextCompare text = compare_text(prog.pid());
  EXPECT_LT(text.differing, left.differing);
  EXPECT_EQ(text.jmp_opcodes, 0u) << text.first;
  EXPECT_LE(anonymous_code(maps_of(prog.pid())), anonymous_code(maps_before) + 1);
  EXPECT_TRUE(prog.ends_well());
}

// A second trampoline gotap beside a live first one takes none of its jumps (their pages'
// owner still runs): it says so, maps nothing and exits 1, and the first counts on exactly.
TEST_F(Trampoline, ASecondGotapLeavesTheFirstsJumps) {
  auto fx = latency_fixtures();
  if (fx.empty()) GTEST_SKIP() << "no latency fixtures built";
  const Fixture& f = fx.back();
  Spin prog(f.path);
  ASSERT_TRUE(prog.ask(10));
  Background first{spawn({gotap_binary(), "count", "--backend", "trampoline", "--json", "-p",
                          std::to_string(prog.pid()), "main.work"})};
  ASSERT_TRUE(first.tracing()) << first.err;
  const size_t code_before = anonymous_code(maps_of(prog.pid()));
  RunResult second = run_command({gotap_binary(), "count", "--backend", "trampoline", "-p",
                                  std::to_string(prog.pid()), "main.work"},
                                 60);
  EXPECT_EQ(second.exit_code, 1) << second.err;
  EXPECT_NE(second.err.find("every site is another tracer's"), std::string::npos) << second.err;
  EXPECT_EQ(anonymous_code(maps_of(prog.pid())), code_before) << "nothing mapped";
  ASSERT_TRUE(prog.ask(500));
  std::string out;
  EXPECT_EQ(first.end(SIGINT, &out), 0) << first.err;
  EXPECT_EQ(counts_of(out)["main.work"], 500u) << out;
  EXPECT_EQ(compare_text(prog.pid()).differing, 0u);
  EXPECT_TRUE(prog.ends_well());
}

// A timed run (latency, or a count with a condition decided at the return) whose every site
// another tracer holds
// (eBPF's uprobe on a Go 1.19 function's stack check, which the jump needs) writes no jump,
// says how many of its sites were held, and takes back the pages it mapped: it once left them
// in the program, and said "2 of 0 sites". The other tracer counts every call.
TEST_F(Trampoline, ATimedRunThatPatchesNothingLeavesNoPages) {
  std::vector<Fixture> fx;
  for (const Fixture& f : latency_fixtures())
    if (!f.go_at_least(21) && f.flavour == "default") fx.push_back(f);
  if (fx.empty()) GTEST_SKIP() << "no latency fixture of Go before 1.21 built";
  const Fixture& f = fx.front();
  Spin prog(f.path);
  ASSERT_TRUE(prog.ask(10));
  const size_t code_before = anonymous_code(maps_of(prog.pid()));
  Background first{spawn({gotap_binary(), "count", "--backend", "ebpf", "--json", "-p",
                          std::to_string(prog.pid()), "main.work"})};
  ASSERT_TRUE(first.tracing()) << first.err;
  for (const std::vector<std::string>& how :
       {std::vector<std::string>{"latency"},
        std::vector<std::string>{"count", "--if", "duration >= 0"}}) {
    SCOPED_TRACE(how.back());
    std::vector<std::string> cmd = {gotap_binary()};
    cmd.insert(cmd.end(), how.begin(), how.end());
    for (const std::string a : {"--backend", "trampoline", "-p"}) cmd.push_back(a);
    cmd.push_back(std::to_string(prog.pid()));
    cmd.push_back("--jumps-only");
    cmd.push_back("main.work");
    RunResult second = run_command(cmd, 60);
    EXPECT_EQ(second.exit_code, 1) << second.err;
    EXPECT_NE(second.err.find("could be patched"), std::string::npos) << second.err;
    std::smatch m;
    ASSERT_TRUE(std::regex_search(second.err, m,
                                  std::regex(R"(([1-9][0-9]*) of ([0-9]+) sites are another)")))
        << second.err;
    EXPECT_EQ(m[1], m[2]) << second.err;
    EXPECT_EQ(anonymous_code(maps_of(prog.pid())), code_before) << "its pages taken back";
  }
  ASSERT_TRUE(prog.ask(500));
  std::string out;
  EXPECT_EQ(first.end(SIGINT, &out), 0) << first.err;
  EXPECT_EQ(counts_of(out)["main.work"], 500u) << out;
  EXPECT_EQ(compare_text(prog.pid()).differing, 0u);
  EXPECT_TRUE(prog.ends_well());
}

// Functions whose sites another tracer's uprobes hold (eBPF's on a Go 1.19 function's stack
// check, which the jump needs) go on this run's own uprobes, beside them: the kernel shares a
// site between uprobes. A count and a latency of main.work and fmt.Fprintf (on jumps), and a
// count of main.work alone (every site held: the whole run on uprobes), each exact while the
// other tracer counts on; then the program's text is its file's and no page is left. Before,
// main.work was left to the other tracer, not counted.
TEST_F(Trampoline, FunctionsOtherUprobesHoldGoOnUprobesBesideThem) {
  std::vector<Fixture> fx;
  for (const Fixture& f : latency_fixtures())
    if (!f.go_at_least(21) && f.flavour == "default") fx.push_back(f);
  if (fx.empty()) GTEST_SKIP() << "no latency fixture of Go before 1.21 built";
  const Fixture& f = fx.front();
  Spin prog(f.path);
  ASSERT_TRUE(prog.ask(10));
  const size_t code_before = anonymous_code(maps_of(prog.pid()));
  Background first{spawn({gotap_binary(), "count", "--backend", "ebpf", "--json", "-p",
                          std::to_string(prog.pid()), "main.work"})};
  ASSERT_TRUE(first.tracing()) << first.err;
  const std::vector<std::vector<std::string>> runs = {{"count", "main.work", "fmt.Fprintf"},
                                                      {"latency", "main.work", "fmt.Fprintf"},
                                                      {"count", "main.work"}};
  for (const auto& how : runs) {
    SCOPED_TRACE(how[0] + " of " + std::to_string(how.size() - 1));
    std::vector<std::string> cmd = {gotap_binary(),
                                    how[0],
                                    "--backend",
                                    "trampoline",
                                    "--json",
                                    "-p",
                                    std::to_string(prog.pid())};
    cmd.insert(cmd.end(), how.begin() + 1, how.end());
    Background second{spawn(cmd)};
    ASSERT_TRUE(second.tracing()) << second.err;
    EXPECT_NE(second.err.find("on kernel uprobes (eBPF)"), std::string::npos) << second.err;
    ASSERT_TRUE(prog.ask(300));
    std::string out;
    EXPECT_EQ(second.end(SIGINT, &out), 0) << second.err;
    std::map<std::string, uint64_t> n;
    for (const std::string kind : {"count", "latency"})
      for (const json& e : events_in(out, kind)) n[e["func"]] = e["count"];
    EXPECT_EQ(n["main.work"], 300u) << out;
    // One Printf a request ("did 300").
    if (how.size() > 2) EXPECT_EQ(n["fmt.Fprintf"], 1u) << out;
    EXPECT_EQ(anonymous_code(maps_of(prog.pid())), code_before) << "its pages taken back";
  }
  ASSERT_TRUE(prog.ask(500));
  std::string out;
  EXPECT_EQ(first.end(SIGINT, &out), 0) << first.err;
  EXPECT_EQ(counts_of(out)["main.work"], 3 * 300u + 500u) << out;
  EXPECT_EQ(compare_text(prog.pid()).differing, 0u);
  EXPECT_TRUE(prog.ends_well());
}

// gotap's other backends beside a live trampoline gotap, on every release: each counts the
// calls exactly where its probe is after the jump's way back (a `push rbp`), and where it is
// on the jbe (Go before 1.21), which the jump holds or goes around, says so and exits 1
// rather than count nothing or take calls from the trampoline unseen. The trampoline counts
// every call throughout, and the program ends well.
TEST_F(Trampoline, OtherBackendsBesideItCountExactlyOrSayWhyNot) {
  auto fx = latency_fixtures();
  if (fx.empty()) GTEST_SKIP() << "no latency fixtures built";
  for (const Fixture& f : fx) {
    SCOPED_TRACE(f.label());
    const bool around = probe_gone_around(f);
    Spin prog(f.path);
    ASSERT_TRUE(prog.ask(10));
    Background t{spawn({gotap_binary(), "count", "--backend", "trampoline", "--json", "-p",
                        std::to_string(prog.pid()), "main.work"})};
    ASSERT_TRUE(t.tracing()) << t.err;
    uint64_t asked = 0;
    for (const char* backend : {"ebpf", "ptrace"}) {
      SCOPED_TRACE(backend);
      Background o{spawn({gotap_binary(), "count", "--backend", backend, "--json", "-p",
                          std::to_string(prog.pid()), "main.work"})};
      std::string out;
      if (around) {
        EXPECT_EQ(o.end(0, &out), 1) << o.err;
        EXPECT_NE(o.err.find("(a trampoline gotap's) holds the entry probe"), std::string::npos)
            << o.err;
        continue;
      }
      ASSERT_TRUE(o.tracing()) << o.err;
      ASSERT_TRUE(prog.ask(200));
      asked += 200;
      EXPECT_EQ(o.end(SIGINT, &out), 0) << o.err;
      EXPECT_EQ(counts_of(out)["main.work"], 200u) << out;
    }
    ASSERT_TRUE(prog.ask(100));
    asked += 100;
    std::string out;
    EXPECT_EQ(t.end(SIGINT, &out), 0) << t.err;
    EXPECT_EQ(counts_of(out)["main.work"], asked) << out;
    TextCompare text = compare_text(prog.pid());
    EXPECT_EQ(text.differing, 0u) << text.first;
    EXPECT_TRUE(prog.ends_well());
  }
}

// A perf uprobe (no BPF program) at `offset` in `path`, counting its hits on every CPU (a
// count per task would see one thread's): what bpftrace or perf would put there.
struct Uprobe {
  std::vector<sys::Fd> fds;
  bool open(const std::string& path, uint64_t offset) {
    std::ifstream t("/sys/bus/event_source/devices/uprobe/type");
    int type = -1;
    if (!(t >> type)) return false;
    perf_event_attr a{};
    a.size = sizeof a;
    a.type = static_cast<uint32_t>(type);
    a.config1 = reinterpret_cast<uint64_t>(path.c_str());
    a.config2 = offset;
    for (long cpu = 0; cpu < sysconf(_SC_NPROCESSORS_ONLN); ++cpu) {
      sys::Fd fd(static_cast<int>(syscall(SYS_perf_event_open, &a, -1, cpu, -1, 0)));
      if (!fd) return false;
      fds.push_back(std::move(fd));
    }
    return true;
  }
  uint64_t hits() const {
    uint64_t total = 0;
    for (const auto& fd : fds) {
      uint64_t n = 0;
      if (read(fd.get(), &n, sizeof n) == sizeof n) total += n;
    }
    return total;
  }
  void close() { fds.clear(); }
};

// A function's first instructions as `go tool objdump` lists them: {address, bytes}.
std::vector<std::pair<uint64_t, std::string>> objdump_head(const std::string& listing,
                                                           const std::string& func) {
  std::vector<std::pair<uint64_t, std::string>> out;
  std::istringstream in(listing);
  bool inside = false;
  static const std::regex insn(R"(^\s+\S+\s+0x([0-9a-f]+)\s+([0-9a-f]+)\s)");
  for (std::string line; std::getline(in, line) && out.size() < 3;) {
    if (line.rfind("TEXT ", 0) == 0) {
      inside = line.rfind("TEXT " + func + "(SB)", 0) == 0;
      continue;
    }
    std::smatch m;
    if (inside && std::regex_search(line, m, insn))
      out.emplace_back(std::stoull(m[1], nullptr, 16), m[2]);
  }
  return out;
}

std::vector<uint8_t> bytes_at(pid_t pid, uint64_t addr, size_t n) {
  std::vector<uint8_t> b(n);
  std::ifstream mem("/proc/" + std::to_string(pid) + "/mem", std::ios::binary);
  mem.seekg(static_cast<std::streamoff>(addr));
  mem.read(reinterpret_cast<char*>(b.data()), static_cast<std::streamsize>(n));
  return mem ? b : std::vector<uint8_t>{};
}

std::vector<uint8_t> unhex(const std::string& h) {
  std::vector<uint8_t> b;
  for (size_t i = 0; i + 1 < h.size(); i += 2) b.push_back(std::stoi(h.substr(i, 2), nullptr, 16));
  return b;
}

// The demo fixture of the newest Go, and the first instructions of two of its functions as
// go tool objdump lists them: main.processOrder, whose stack check ends in a 6-byte jbe, and
// main.discount, a short function. fx.path is empty when it is not built.
struct DemoSites {
  ~DemoSites() {
    if (!own.empty()) std::remove(own.c_str());
  }
  static int& copies() {
    static int n = 0;
    return n;
  }
  Fixture fx;
  std::string own;  // the private copy fx.path names once loaded
  std::vector<std::pair<uint64_t, std::string>> po, di;
  std::unique_ptr<ElfFile> elf;
  void load() {
    for (const Fixture& f : all_fixtures("demo"))
      if (f.flavour == "default") fx = f;  // the newest Go's
    if (fx.path.empty()) return;
    const std::string listing = read_file(fx.path + ".objdump");
    // A copy of the test's own: uprobes belong to a file, and the tests that run meanwhile
    // (ctest -j) put theirs on the fixture's, which this test's gotap rightly left to them.
    own = "/tmp/gotap-demo-" + std::to_string(getpid()) + "-" + std::to_string(++copies());
    std::error_code ec;
    ASSERT_TRUE(std::filesystem::copy_file(fx.path, own, ec)) << ec.message();
    fx.path = own;
    po = objdump_head(listing, "main.processOrder");
    di = objdump_head(listing, "main.discount");
    ASSERT_GE(po.size(), 2u);
    ASSERT_GE(di.size(), 2u);
    ASSERT_EQ(po[1].second.substr(0, 4), "0f86") << "processOrder's jbe is a rel32";
    ASSERT_EQ(di[1].second.substr(0, 2), "76") << "discount's jbe is short";
    auto e = ElfFile::open(fx.path);
    ASSERT_TRUE(e);
    elf = std::move(*e);
  }
  // The file offset of a link-time address, for a perf uprobe.
  uint64_t offset_of(uint64_t vaddr) const {
    for (const auto& seg : elf->segments())
      if (seg.type == 1 && vaddr >= seg.vaddr && vaddr < seg.vaddr + seg.filesz)
        return vaddr - seg.vaddr + seg.offset;
    return 0;
  }
  // The demo, printing its orders into `log` until killed.
  pid_t start(const std::string& log) const {
    const pid_t pid = fork();
    if (pid == 0) {
      freopen(log.c_str(), "w", stdout);
      execl(fx.path.c_str(), fx.path.c_str(), "-n", "1000000", "-sleep", "200us", nullptr);
      _exit(127);
    }
    return pid;
  }
};

// Another tracer's uprobes, put on the patched code while gotap traces: one on the 6-byte
// jbe that became main.processOrder's jump, one on the first instruction of main.discount
// (a short function, whose compare became its jump). The kernel runs the file's instructions
// for both, so the program stays right; at the end gotap puts its bytes back under their
// int3s, and once they go the text is the file's. Addresses from go tool objdump.
TEST_F(Trampoline, UprobesOnThePatchedCodeKeepTheProgramRightAndTheirInt3s) {
  DemoSites d;
  ASSERT_NO_FATAL_FAILURE(d.load());
  if (d.fx.path.empty()) GTEST_SKIP() << "no demo fixture built";
  const auto& po = d.po;
  const auto& di = d.di;
  const std::string log = "/tmp/gotap-tramp-demo-" + std::to_string(getpid()) + ".out";
  const pid_t prog = d.start(log);
  usleep(200 * 1000);
  Background g{spawn({gotap_binary(), "count", "--backend", "trampoline", "--json", "-p",
                      std::to_string(prog), "main.processOrder", "main.discount"})};
  ASSERT_TRUE(g.tracing()) << g.err;
  usleep(100 * 1000);
  Uprobe on_jbe, on_entry;
  ASSERT_TRUE(on_jbe.open(d.fx.path, d.offset_of(po[1].first)) &&
              on_entry.open(d.fx.path, d.offset_of(di[0].first)))
      << "perf_event_open: " << std::strerror(errno);
  usleep(300 * 1000);
  std::string out;
  EXPECT_EQ(g.end(SIGINT, &out), 0) << g.err;
  EXPECT_GT(on_jbe.hits(), 0u);
  EXPECT_GT(on_entry.hits(), 0u);
  auto c = counts_of(out);
  EXPECT_GT(c["main.processOrder"], 0u) << "counted until the uprobe came";
  EXPECT_EQ(summary_in(out).value("taken_by_uprobes", 0), 2) << out;
  EXPECT_NE(g.err.find("were not counted"), std::string::npos) << g.err;
  // Under each int3, the file's bytes again.
  std::vector<uint8_t> want = unhex(po[1].second);
  want[0] = 0xcc;
  EXPECT_EQ(bytes_at(prog, po[1].first, want.size()), want);
  want = unhex(di[0].second);
  want[0] = 0xcc;
  EXPECT_EQ(bytes_at(prog, di[0].first, want.size()), want);
  on_jbe.close();
  on_entry.close();
  TextCompare text = compare_text(prog);
  EXPECT_GT(text.bytes, 0u);
  EXPECT_EQ(text.differing, 0u) << text.first;
  // Still running, still printing its orders.
  const auto size_then = std::filesystem::file_size(log);
  usleep(200 * 1000);
  EXPECT_GT(std::filesystem::file_size(log), size_then);
  EXPECT_EQ(kill(prog, 0), 0);
  kill(prog, SIGKILL);
  int st = 0;
  waitpid(prog, &st, 0);
  EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) << "it was alive until then";
  std::remove(log.c_str());
}

// The same uprobes, removed while gotap still counts: the kernel writes the file's first byte
// back over each, which every jump begins with or is (trampoline_code.h). processOrder's
// jump is whole again and counts on; discount's site is the file's again and runs uncounted;
// the program never runs half a jump. (Before, the jumps began with 0xe9: the kernel's byte
// turned them into other instructions, and the program died of a SIGTRAP or worse, as it did
// when gotap's eBPF backend, which probes that jbe before Go 1.21, ended first.)
TEST_F(Trampoline, UprobesRemovedDuringTheTraceLeaveEveryJumpWhole) {
  DemoSites d;
  ASSERT_NO_FATAL_FAILURE(d.load());
  if (d.fx.path.empty()) GTEST_SKIP() << "no demo fixture built";
  const auto& po = d.po;
  const auto& di = d.di;
  const std::string log = "/tmp/gotap-tramp-gone-" + std::to_string(getpid()) + ".out";
  const pid_t prog = d.start(log);
  usleep(200 * 1000);
  Background g{spawn({gotap_binary(), "count", "--backend", "trampoline", "--json", "-i", "0.1",
                      "-p", std::to_string(prog), "main.processOrder", "main.discount"})};
  ASSERT_TRUE(g.tracing()) << g.err;
  usleep(100 * 1000);
  Uprobe on_jbe, on_entry;
  ASSERT_TRUE(on_jbe.open(d.fx.path, d.offset_of(po[1].first)) &&
              on_entry.open(d.fx.path, d.offset_of(di[0].first)))
      << "perf_event_open: " << std::strerror(errno);
  // gotap looks every 100 ms; 500 ms leaves it four looks however late the first comes.
  usleep(500 * 1000);
  EXPECT_GT(on_jbe.hits(), 0u);
  EXPECT_GT(on_entry.hits(), 0u);
  on_jbe.close();
  on_entry.close();
  // processOrder's jump as gotap wrote it (jno), discount's compare as the file has it.
  std::vector<uint8_t> jno = bytes_at(prog, po[1].first, 6);
  ASSERT_EQ(jno.size(), 6u);
  EXPECT_EQ(jno[0], 0x0f);
  EXPECT_EQ(jno[1], 0x81);
  EXPECT_EQ(bytes_at(prog, di[0].first, 4), unhex(di[0].second));
  usleep(500 * 1000);
  std::string out;
  EXPECT_EQ(g.end(SIGINT, &out), 0) << g.err;
  // The last intervals, well after the uprobes went.
  std::map<int, std::map<std::string, uint64_t>> by_interval;
  for (const json& e : events_in(out, "count"))
    if (e.contains("interval")) by_interval[e["interval"].get<int>()][e["func"]] = e["count"];
  ASSERT_GE(by_interval.size(), 6u) << out;
  for (auto it = std::prev(by_interval.end(), 3); it != std::prev(by_interval.end()); ++it) {
    EXPECT_GT(it->second["main.processOrder"], 0u) << "interval " << it->first << "\n" << out;
    EXPECT_EQ(it->second["main.discount"], 0u) << "interval " << it->first << "\n" << out;
  }
  // Both: the jno's uprobe, there for 500 ms, was seen (note_uprobes) though it left the
  // jump as it was; the short check's left the file's byte.
  EXPECT_EQ(summary_in(out).value("taken_by_uprobes", 0), 2) << out;
  TextCompare text = compare_text(prog);
  EXPECT_GT(text.bytes, 0u);
  EXPECT_EQ(text.differing, 0u) << text.first;
  const auto size_then = std::filesystem::file_size(log);
  usleep(200 * 1000);
  EXPECT_GT(std::filesystem::file_size(log), size_then) << "still printing its orders";
  EXPECT_EQ(kill(prog, 0), 0);
  kill(prog, SIGKILL);
  int st = 0;
  waitpid(prog, &st, 0);
  EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) << "it was alive until then";
  std::remove(log.c_str());
}

// A program that execs ends the trace there; a launched one is still waited for, and ends
// as it would have.
TEST_F(Trampoline, ExecEndsTheTraceAndTheNewProgramRunsUntouched) {
  Fixture fx;
  for (const Fixture& f : all_fixtures("execer"))
    if (f.flavour == "default") fx = f;
  if (fx.path.empty()) GTEST_SKIP() << "no execer fixture built";
  const std::string latency = fx.path.substr(0, fx.path.rfind('/') + 1) + "latency";
  RunResult r = run_command({gotap_binary(), "count", "--backend", "trampoline", "--json",
                             "main.main", "--", fx.path, "300", latency, "args", "3"},
                            120);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("done 3"), std::string::npos) << r.out;
  EXPECT_EQ(counts_of(r.out)["main.main"], 1u) << r.out << r.err;
  EXPECT_EQ(summary_in(r.out).value("ended_by", ""), "exec") << r.out;
}

// Children forked with raw system calls inherit the jumps and the trampolines: each runs and
// exits 0 (the fixture's own account), and the parent's calls are counted.
TEST_F(Trampoline, ForkedChildrenRunAsBefore) {
  auto fx = all_fixtures("forker");
  if (fx.empty()) GTEST_SKIP() << "no forker fixtures built";
  for (const Fixture& f : fx) {
    if (f.flavour != "default" && f.flavour != "cgo") continue;
    SCOPED_TRACE(f.label());
    RunResult r = run_command({gotap_binary(), "count", "--backend", "trampoline", "--json",
                               "main.work", "main.main", "--", f.path, "-n", "20"},
                              120);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("GT forked 20 exited0 20 other 0"), std::string::npos) << r.out;
    EXPECT_EQ(counts_of(r.out)["main.main"], 1u) << r.out << r.err;
  }
}

// What the jumps do not do yet goes whole on kernel uprobes, said on stderr and in the
// summary (tests/unit/test_runtime_{cond,goroutines,stacks}.cpp hold those runs to the
// programs' ground truth). With the fallback off (--jumps-only) it is
// refused in one line, exit status 2, before any process is touched, and so are --why and
// --goroutines, whose goroutine probes are uprobes.
TEST_F(Trampoline, WhatJumpsDoNotDoGoesOnUprobesOrIsRefused) {
  auto fx = all_fixtures("basic");
  if (fx.empty()) GTEST_SKIP() << "no basic fixtures built";
  const std::string bin = fx.back().path;
  struct Want {
    std::vector<std::string> args;
    std::string says;
  };
  for (bool fallback : {true, false}) {
    for (const Want& w : std::vector<Want>{
             {{"goroutines"}, "has no jumps for goroutine events"},
             {{"count", "--stack", "2", "main.add"},
              "has jumps for --stack in trace and graph only"},
         }) {
      SCOPED_TRACE(w.args[0] + (fallback ? " with the fallback" : " without it"));
      std::vector<std::string> cmd = {gotap_binary(), w.args[0], "--backend", "trampoline",
                                      "--json"};
      cmd.insert(cmd.end(), w.args.begin() + 1, w.args.end());
      if (!fallback) cmd.push_back("--jumps-only");
      cmd.insert(cmd.end(), {"--", bin});
      RunResult r = run_command(cmd, 60);
      EXPECT_NE(r.err.find(w.says), std::string::npos) << r.err;
      if (!fallback) {
        EXPECT_EQ(r.exit_code, 2) << r.err;
        EXPECT_EQ(r.out.find("done"), std::string::npos) << "the program never ran";
        continue;
      }
      EXPECT_EQ(r.exit_code, 0) << r.err;
      EXPECT_NE(r.err.find("every probe goes on kernel uprobes"), std::string::npos) << r.err;
      const auto sum = events_in(r.out, "summary");
      ASSERT_EQ(sum.size(), 1u) << r.out;
      EXPECT_EQ(sum[0].value("backend", ""), "trampoline");
      ASSERT_TRUE(sum[0].contains("uprobes")) << sum[0];
      EXPECT_NE(sum[0]["uprobes"].value("reason", "").find(w.says), std::string::npos) << sum[0];
      // main.add's calls, as the program printed them.
      if (w.args[0] == "count") {
        size_t gt = 0;
        for (size_t at = 0; (at = r.out.find("GT main.add a=", at)) != std::string::npos; ++at)
          ++gt;
        EXPECT_EQ(counts_of(r.out)["main.add"], gt) << r.out;
      }
    }
  }
  for (const char* flag : {"--why", "--goroutines"}) {
    SCOPED_TRACE(flag);
    RunResult r = run_command({gotap_binary(), "trace", "--backend", "trampoline", "--json",
                               "--jumps-only", flag, "main.add", "--", bin},
                              60);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("which --jumps-only leaves out"), std::string::npos) << r.err;
    EXPECT_EQ(r.out.find("done"), std::string::npos) << "the program never ran";
  }
}

}  // namespace
}  // namespace gotap::testing
