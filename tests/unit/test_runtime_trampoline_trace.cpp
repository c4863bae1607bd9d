// `gotap trace --backend trampoline` (issue 38): each call's entry and return written by the
// trampolines into a ring of trace records (registers, stack slots, string bytes, the
// thread's id), decoded as the eBPF backend's events are. Held to the program's own truth:
// the latency fixture's burn calls carry the goroutine, arguments and result the program
// printed for each; under the hostile mode's signals, scans, stack copies and panics every
// call the program made is an event or counted lost, exactly; a loop faster than any reader
// loses records, counted. Go 1.17 and later (the register ABI's g in R14).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/unit/fixtures.h"
#include "tests/unit/loopback.h"

namespace gotap::testing {
namespace {

using json = nlohmann::json;

class TrampolineTrace : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "the trampoline backend needs root (ptrace)";
    if (!file_exists(gotap_binary())) GTEST_SKIP() << gotap_binary() << " is not built";
  }
};

bool stripped(const Fixture& f) {
  return f.flavour.find("stripped") != std::string::npos;
}

// An argument's integer: by name with DWARF, else the raw word at `index` (a stripped
// build's ArgInfo words: arg0, arg1, ...).
int64_t int_arg(const json& args, const std::string& name, size_t index) {
  for (const json& a : args)
    if (a.value("name", "") == name && a["value"].is_number_integer())
      return a["value"].get<int64_t>();
  if (index < args.size() && args[index]["value"].contains("raw"))
    return static_cast<int64_t>(
        std::stoull(args[index]["value"]["raw"][0].get<std::string>(), nullptr, 16));
  return INT64_MIN;
}

// Every release and flavour: main.burn(seq, us) int64 on two goroutines. Each entry is one
// of the program's calls, on the goroutine that made it (goid), with its arguments; with
// DWARF, each return's result is what the call returned (the time it measured), and its
// duration is at least that.
TEST_F(TrampolineTrace, BurnCallsCarryTheProgramsGoroutinesArgumentsAndResults) {
  auto fx = all_fixtures("latency");
  if (fx.empty()) GTEST_SKIP() << "no latency fixtures built";
  size_t traced = 0;
  for (const Fixture& f : fx) {
    SCOPED_TRACE(f.label());
    RunResult r = run_command({gotap_binary(), "trace", "--backend", "trampoline", "--json",
                               "main.burn", "--", f.path, "burn", "2", "12"},
                              120);
    if (!f.go_at_least(17)) {
      EXPECT_EQ(r.exit_code, 2) << r.err;
      EXPECT_NE(r.err.find("traces calls of Go 1.17 and later only"), std::string::npos) << r.err;
      continue;
    }
    ++traced;
    ASSERT_EQ(r.exit_code, 0) << r.err;
    // The program's calls: (goid, seq, us) -> the ns it returned.
    std::map<std::tuple<int64_t, int64_t, int64_t>, int64_t> want;
    std::istringstream in(r.out);
    for (std::string l; std::getline(in, l);) {
      long long g = 0, seq = 0, us = 0, ns = 0;
      if (sscanf(l.c_str(), "GT burn goid=%lld seq=%lld us=%lld ns=%lld", &g, &seq, &us, &ns) == 4)
        want[{g, seq, us}] = ns;
    }
    ASSERT_EQ(want.size(), 24u) << r.out;
    std::map<int64_t, std::vector<std::tuple<int64_t, int64_t, int64_t>>> open;  // by goid
    std::set<std::tuple<int64_t, int64_t, int64_t>> seen;
    size_t results = 0;
    for (const json& e : events_in(r.out)) {
      const std::string kind = e.value("event", "");
      if (kind != "entry" && kind != "return") continue;
      ASSERT_EQ(e["func"], "main.burn");
      EXPECT_GT(e.value("tid", 0), 0) << e;
      const int64_t goid = e["goid"].get<int64_t>();
      if (kind == "entry") {
        const auto key =
            std::make_tuple(goid, int_arg(e["args"], "seq", 0), int_arg(e["args"], "us", 1));
        EXPECT_TRUE(want.count(key)) << "a call the program did not make: " << e;
        EXPECT_TRUE(seen.insert(key).second) << "twice: " << e;
        open[goid].push_back(key);
        continue;
      }
      ASSERT_FALSE(open[goid].empty()) << "a return with no entry on its goroutine: " << e;
      const auto key = open[goid].back();
      open[goid].pop_back();
      ASSERT_TRUE(e.contains("duration_ns")) << e;
      if (!want.count(key)) continue;
      EXPECT_GE(e["duration_ns"].get<int64_t>(), want[key]) << e;
      if (stripped(f)) continue;  // a plain function's results: not in ArgInfo
      ASSERT_EQ(e["results"].size(), 1u) << e;
      EXPECT_EQ(e["results"][0]["value"].get<int64_t>(), want[key]) << e;
      ++results;
    }
    EXPECT_EQ(seen.size(), want.size());
    if (!stripped(f)) EXPECT_EQ(results, want.size());
    const json s = summary_in(r.out);
    EXPECT_EQ(s.value("lost", 1), 0) << s;
    EXPECT_EQ(s.value("backend", ""), "trampoline");
    EXPECT_TRUE(events_in(r.out, "unfinished").empty()) << r.out;
  }
  EXPECT_GT(traced, 0u) << "no fixture of Go 1.17 or later built";
}

// Every release from 1.17 and flavour: main.describe(id int, name string, ok bool, k int8)
// string, a frame of 128 bytes or more (its RETs' jumps are wide: trampoline_code.h). With
// DWARF each call's arguments and its result, strings included (empty, with spaces, not
// ASCII), are the ones the program printed, in order; stripped, its first word is the id.
// Before 1.21 its frame saves rbp at 0xc0: the RET's stub would be 1 GiB below the site,
// which a non-PIE says it cannot have, and traces it on kernel uprobes instead.
TEST_F(TrampolineTrace, DescribeCallsCarryTheProgramsStrings) {
  std::vector<Fixture> fx;
  for (const Fixture& f : all_fixtures("latency"))
    if (f.go_at_least(17)) fx.push_back(f);
  if (fx.empty()) GTEST_SKIP() << "no latency fixtures built";
  for (const Fixture& f : fx) {
    SCOPED_TRACE(f.label());
    RunResult r = run_command({gotap_binary(), "trace", "--backend", "trampoline", "--json",
                               "main.describe", "--", f.path, "args", "20"},
                              120);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    // Before Go 1.21, a non-PIE's frame puts describe's RET stub below the program: the
    // function is traced on kernel uprobes instead, with the same values.
    if (!f.go_at_least(21) && f.flavour.find("pie") == std::string::npos) {
      EXPECT_NE(r.err.find("its RET's trampoline would be below the program"), std::string::npos)
          << r.err;
      EXPECT_NE(r.err.find("traced on kernel uprobes (eBPF) instead"), std::string::npos) << r.err;
      EXPECT_EQ(summary_in(r.out)["uprobes"].value("functions", 0), 1) << r.out;
    }
    struct Call {
      long long id = 0, k = 0;
      std::string name, ok, result;
    };
    std::vector<Call> want;
    std::istringstream in(r.out);
    for (std::string l; std::getline(in, l);) {
      const std::string head = "GT main.describe ";
      if (l.rfind(head, 0) != 0) continue;
      if (l.rfind(head + "-> \"", 0) == 0) {
        ASSERT_FALSE(want.empty());
        want.back().result = l.substr(head.size() + 4, l.size() - head.size() - 5);
        continue;
      }
      Call c;
      const size_t n0 = l.find(" name=\""), n1 = l.rfind("\" ok=");
      ASSERT_TRUE(n0 != std::string::npos && n1 != std::string::npos) << l;
      c.name = l.substr(n0 + 7, n1 - n0 - 7);
      char ok[8] = {};
      ASSERT_EQ(sscanf(l.c_str(), "GT main.describe id=%lld", &c.id), 1) << l;
      ASSERT_EQ(sscanf(l.c_str() + n1, "\" ok=%5s k=%lld", ok, &c.k), 2) << l;
      c.ok = ok;
      want.push_back(c);
    }
    ASSERT_EQ(want.size(), 20u) << r.out;
    const auto entries = events_in(r.out, "entry"), returns = events_in(r.out, "return");
    ASSERT_EQ(entries.size(), want.size()) << r.out;
    ASSERT_EQ(returns.size(), want.size()) << r.out;
    for (size_t i = 0; i < want.size(); ++i) {
      SCOPED_TRACE(i);
      const json& a = entries[i]["args"];
      EXPECT_EQ(int_arg(a, "id", 0), want[i].id) << entries[i];
      if (stripped(f)) continue;
      ASSERT_EQ(a.size(), 4u) << entries[i];
      EXPECT_EQ(a[1]["value"], want[i].name) << entries[i];
      EXPECT_EQ(a[2]["value"].dump(), want[i].ok) << entries[i];
      EXPECT_EQ(a[3]["value"].get<long long>(), want[i].k) << entries[i];
      ASSERT_EQ(returns[i]["results"].size(), 1u) << returns[i];
      EXPECT_EQ(returns[i]["results"][0]["value"], want[i].result) << returns[i];
    }
    EXPECT_EQ(summary_in(r.out).value("lost", 1), 0);
  }
}

// The hostile mode (latency fixture): SIGPROF at 500 Hz, async preemption, locked threads,
// runtime.GC and runtime.Stack in a loop, main.hop's recursion copying the stack under open
// calls, panics unwinding them. The program ends as it does untraced, and each of hop's
// calls and returns is an event or counted lost, exactly: entries + returns + lost = calls +
// returns the program counted. Every entry's n is one the program passed (below 300).
TEST_F(TrampolineTrace, TheRuntimesSignalsScansAndPanicsLeaveEveryRecordAccountedFor) {
  std::vector<Fixture> fx;
  for (const Fixture& f : all_fixtures("latency"))
    if (f.go_at_least(17) && (f.flavour == "default" || f.flavour == "pie-stripped"))
      fx.push_back(f);
  if (fx.empty()) GTEST_SKIP() << "no latency fixtures of Go 1.17 or later built";
  for (const Fixture& f : fx) {
    SCOPED_TRACE(f.label());
    RunResult r = run_command({gotap_binary(), "trace", "--backend", "trampoline", "--json",
                               "main.hop", "--", f.path, "hostile", "2", "300"},
                              180);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    unsigned long long calls = 0, returned = 0, panics = 0, samples = 0;
    const size_t at = r.out.find("GT hostile ");
    ASSERT_NE(at, std::string::npos) << r.out;
    ASSERT_EQ(
        sscanf(r.out.c_str() + at, "GT hostile calls=%llu returned=%llu panics=%llu samples=%llu",
               &calls, &returned, &panics, &samples),
        4);
    EXPECT_GT(panics, 0u);
    EXPECT_EQ(samples, 1u) << "the CPU profile got samples";
    size_t entries = 0, returns = 0;
    for (const json& e : events_in(r.out, "entry")) {
      ++entries;
      const int64_t n = int_arg(e["args"], "n", 0);
      EXPECT_TRUE(n >= 0 && n < 300) << e;
    }
    returns = events_in(r.out, "return").size();
    const json s = summary_in(r.out);
    const uint64_t lost = s.value("lost", uint64_t(0));
    EXPECT_EQ(entries + returns + lost, calls + returned)
        << entries << " entries, " << returns << " returns, " << lost << " lost";
    EXPECT_LE(entries, calls);
    EXPECT_LE(returns, returned);
    EXPECT_EQ(s.value("exit_code", -1), 0);
    // A call a panic unwound never returned; once records were lost, its return may be
    // among them, which it says.
    for (const json& u : events_in(r.out, "unfinished"))
      if (lost == 0) EXPECT_FALSE(u.contains("reason")) << u;
  }
}

// A loop faster than any reader (main.work, tens of nanoseconds a call): the ring fills, and
// what it has no room for is counted: every call is two events or counted lost.
TEST_F(TrampolineTrace, AFullRingCountsWhatItLoses) {
  std::string path;
  for (const Fixture& f : all_fixtures("latency"))
    if (f.go_at_least(17) && f.flavour == "default") path = f.path;
  if (path.empty()) GTEST_SKIP() << "no latency fixture of Go 1.17 or later built";
  const uint64_t calls = 300'000;
  RunResult r = run_command({gotap_binary(), "trace", "--backend", "trampoline", "--json",
                             "main.work", "--", path, "bench", std::to_string(calls)},
                            120);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_NE(r.out.find("ns_per_call"), std::string::npos) << r.out;
  const size_t entries = events_in(r.out, "entry").size(),
               returns = events_in(r.out, "return").size();
  const json s = summary_in(r.out);
  const uint64_t lost = s.value("lost", uint64_t(0));
  EXPECT_EQ(entries + returns + lost, 2 * calls) << entries << " " << returns << " " << lost;
  EXPECT_GT(entries, 0u);
  // Every call of the loop returned: one shown unfinished had its return record lost, and
  // says it may have (not that it never returned), while the trace goes (a later entry at
  // its depth) or at its end.
  for (const json& u : events_in(r.out, "unfinished")) {
    ASSERT_TRUE(u.contains("reason")) << u;
    EXPECT_EQ(u["reason"].get<std::string>().rfind("no return seen: the ring lost ", 0), 0u) << u;
  }
  // Each entry's x is a value the loop passed, each return's result work(x).
  for (const json& e : events_in(r.out, "entry")) {
    const int64_t x = int_arg(e["args"], "x", 0);
    ASSERT_TRUE(x >= 0 && x < int64_t(calls)) << e;
  }
}

// A burst past the ring (the stress fixture's 2,000 goroutines, each main.grow 11 calls deep:
// about 44,000 records in a few milliseconds) loses records, counted, and gotap, which pairs
// them, finds calls whose return it never read. Every one of them returned: each
// `unfinished` says that its return may be among the records lost, in JSON and in text, and
// none is shown as never returned. Before, each read "never returned".
TEST_F(TrampolineTrace, AnUnfinishedCallWhoseReturnMayBeLostSaysSo) {
  std::vector<Fixture> fx;
  for (const Fixture& f : all_fixtures("stress"))
    if (f.go_at_least(17) && f.flavour == "default") fx.push_back(f);
  if (fx.empty()) GTEST_SKIP() << "no stress fixture of Go 1.17 or later built";
  const Fixture& f = fx.back();
  for (const bool text : {false, true}) {
    SCOPED_TRACE(text ? "text" : "json");
    std::vector<std::string> cmd = {gotap_binary(), "trace", "--backend", "trampoline"};
    if (!text) cmd.push_back("--json");
    for (const char* a : {"main.grow", "--", f.path.c_str(), "-goroutines", "2000", "-depth", "10"})
      cmd.push_back(a);
    RunResult r = run_command(cmd, 120);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    if (text) {
      const bool lost = r.out.find(" 0 lost") == std::string::npos;
      EXPECT_EQ(r.out.find("unfinished: never returned"), std::string::npos);
      if (lost) {
        EXPECT_NE(r.out.find("(unfinished: no return seen: the ring lost "), std::string::npos)
            << r.out.substr(r.out.size() > 3000 ? r.out.size() - 3000 : 0);
      }
      continue;
    }
    const uint64_t lost = summary_in(r.out).value("lost", uint64_t(0));
    const auto open = events_in(r.out, "unfinished");
    // A machine whose reader kept up has no call left open (every one returned).
    if (!lost) EXPECT_TRUE(open.empty());
    for (const json& u : open) {
      ASSERT_TRUE(u.contains("reason")) << u;
      EXPECT_EQ(u["reason"].get<std::string>().rfind("no return seen: the ring lost ", 0), 0u) << u;
    }
    std::printf("%zu unfinished, %llu records lost\n", open.size(),
                static_cast<unsigned long long>(lost));
  }
}

// A burst the reader cannot follow (the stress fixture's main.grow, 5,001 calls deep with
// their 16-word pad, in about a millisecond: 10,002 records): it fits in the ring, whose
// records are as small as the trace's captures (256 bytes: 16,384 of them), where 512-byte
// records (8,192) lost 1,810. Nothing lost, each depth entered once, and the outermost call
// returned what the program printed.
TEST_F(TrampolineTrace, ABurstOfSmallRecordsFitsTheRing) {
  std::vector<Fixture> fx;
  for (const Fixture& f : all_fixtures("stress"))
    if (f.go_at_least(17) && f.flavour == "default") fx.push_back(f);
  if (fx.empty()) GTEST_SKIP() << "no stress fixture of Go 1.17 or later built";
  for (const Fixture& f : {fx.front(), fx.back()}) {
    SCOPED_TRACE(f.label());
    const int depth = 5000;
    RunResult r =
        run_command({gotap_binary(), "trace", "--backend", "trampoline", "--json", "main.grow",
                     "--", f.path, "-goroutines", "0", "-depth", std::to_string(depth)},
                    120);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    long long printed = -1;
    const size_t at = r.out.find("result grow ");
    ASSERT_NE(at, std::string::npos) << r.out.substr(0, 2000);
    ASSERT_EQ(sscanf(r.out.c_str() + at, "result grow %lld", &printed), 1);
    const json s = summary_in(r.out);
    EXPECT_EQ(s.value("lost", uint64_t(1)), 0u) << s;
    std::set<int64_t> depths;
    for (const json& e : events_in(r.out, "entry")) depths.insert(int_arg(e["args"], "depth", 0));
    EXPECT_EQ(depths.size(), size_t(depth + 1));
    EXPECT_EQ(*depths.begin(), 0);
    EXPECT_EQ(*depths.rbegin(), depth);
    const auto rets = events_in(r.out, "return");
    ASSERT_EQ(rets.size(), size_t(depth + 1));
    // The last return is the outermost call's.
    const json& outer = rets.back()["results"];
    ASSERT_FALSE(outer.empty()) << rets.back();
    const json& v = outer[0]["value"];
    const long long got =
        v.is_number_integer()
            ? v.get<long long>()
            : static_cast<long long>(std::stoull(v["raw"][0].get<std::string>(), nullptr, 16));
    EXPECT_EQ(got, printed) << rets.back();
  }
}

// An attached trace ended every way gotap can end (Ctrl-C, SIGTERM, SIGHUP, its reader gone,
// SIGKILL) while the program calls main.work: the program keeps answering, exits 0, and,
// unless gotap was killed (its jumps then write into a ring nobody reads), its text is its
// file's again.
TEST_F(TrampolineTrace, EveryWayGotapEndsLeavesTheProgramAsItWas) {
  std::string path;
  for (const Fixture& f : all_fixtures("latency"))
    if (f.go_at_least(17) && f.flavour == "default") path = f.path;
  if (path.empty()) GTEST_SKIP() << "no latency fixture of Go 1.17 or later built";
  const std::vector<std::pair<std::string, int>> ends = {{"SIGINT", SIGINT},
                                                         {"SIGTERM", SIGTERM},
                                                         {"SIGHUP", SIGHUP},
                                                         {"reader gone", 0},
                                                         {"SIGKILL", SIGKILL}};
  for (const auto& [name, sig] : ends) {
    SCOPED_TRACE(name);
    Spin prog(path);
    ASSERT_TRUE(prog.ask(10));
    Child g = spawn({gotap_binary(), "trace", "--backend", "trampoline", "--json", "-p",
                     std::to_string(prog.pid()), "main.work"});
    std::string err = read_until(g.err, "Tracing ", 60000);
    ASSERT_NE(err.find("Tracing "), std::string::npos) << err;
    ASSERT_TRUE(prog.ask(3000));
    const std::string head = read_until(g.out, "\"event\":\"return\"", 5000);
    EXPECT_NE(head.find("\"func\":\"main.work\""), std::string::npos) << head;
    if (sig) {
      kill(g.pid, sig);
    } else {
      close(g.out);
      g.out = -1;
      ASSERT_TRUE(prog.ask(3000)) << "more events, to a reader that is gone";
    }
    if (g.out >= 0) read_all(g.out);
    err += read_all(g.err);
    int st = 0;
    waitpid(g.pid, &st, 0);
    if (g.out >= 0) close(g.out);
    close(g.err);
    if (sig == SIGKILL) {
      EXPECT_TRUE(WIFSIGNALED(st)) << st;
    } else {
      EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st << "\n" << err;
      TextCompare text = compare_text(prog.pid());
      EXPECT_GT(text.bytes, 0u);
      EXPECT_EQ(text.differing, 0u) << text.first;
    }
    ASSERT_TRUE(prog.ask(5000)) << "the program answers after gotap's end";
    EXPECT_TRUE(prog.ends_well());
  }
}

}  // namespace
}  // namespace gotap::testing
