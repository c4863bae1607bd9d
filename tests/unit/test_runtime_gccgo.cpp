// gccgo programs traced on every backend (tests/fixtures-gccgo/calls, built with Debian's
// gccgo-12; the trampoline backend's run on kernel uprobes). The ground truth is the fixture's own
// account: each call's arguments and results as fmt prints them, and how many calls it made. With
// DWARF (linked against libgo.so, and with libgo inside), every call's values as gotap decoded them
// from the System V places (rdx as an argument and as a second result, a string, a slice on the
// stack, a pointer) equal the program's print, and counts are exact. The stripped build
// (.dynsym only: main.main is its one Go function) traces by name alone, without values.
// Every call's goroutine id is the one the program's own traceback gives.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cinttypes>
#include <filesystem>
#include <functional>
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

using nlohmann::json;

const std::vector<std::string> kFuncs = {"main.Add",   "main.Label", "main.Sum",    "main.DivMod",
                                         "main.Deref", "main.Cut",   "main.Halves", "main.Evens"};
constexpr int kRounds = 12;  // per goroutine: 24 calls of each function

std::string fixture(const std::string& flavour) {
  return std::string(GOTAP_GCCGO_FIXTURES_DIR) + "/" + flavour + "/calls";
}

struct Truth {
  std::map<std::string, uint64_t> counts;  // "calls F N"
  std::multiset<std::string> calls;        // "F ARGS -> RESULTS"
  // "goroutine main ID" (rounds 0 to N-1), "goroutine worker ID" (rounds N to 2N-1)
  int64_t main_goid = -1, worker_goid = -1;
};

Truth truth_of(const std::string& out) {
  Truth t;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("call ", 0) == 0) t.calls.insert(line.substr(5));
    if (line.rfind("goroutine main ", 0) == 0) t.main_goid = std::stoll(line.substr(15));
    if (line.rfind("goroutine worker ", 0) == 0) t.worker_goid = std::stoll(line.substr(17));
    if (line.rfind("calls ", 0) == 0) {
      std::istringstream w(line.substr(6));
      std::string f;
      uint64_t n = 0;
      w >> f >> n;
      t.counts[f] = n;
    }
  }
  return t;
}

// A decoded value as the fixture's fmt.Sprint prints it. What the eBPF backend does not copy
// (docs/json.md: a slice's elements, a pointer's target) reads "[len N]" and "*".
std::string go_text(const json& v) {
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("elems") && v.contains("len")) {  // a slice
    if (v.value("truncated", false) || v["elems"].size() != v["len"].get<size_t>())
      return "[len " + v["len"].dump() + "]";
    std::string out = "[";
    for (const auto& e : v["elems"]) out += (out.size() > 1 ? " " : "") + go_text(e);
    return out + "]";
  }
  if (v.is_object() && v.contains("addr") && !v.contains("unreadable"))  // a pointer
    return v.contains("elem") ? go_text(v["elem"]) : "*";
  return v.dump();
}

// A slice as the eBPF backend shows it: its length, its elements not copied.
std::string slice_len(const std::string& text, size_t open) {
  const size_t close = text.find(']', open);
  std::istringstream elems(text.substr(open + 1, close - open - 1));
  size_t n = 0;
  for (std::string e; elems >> e;) ++n;
  return text.substr(0, open) + "[len " + std::to_string(n) + text.substr(close);
}

// The program's line as the eBPF backend can show it: the elements of main.Sum's argument
// and main.Evens's result and the int main.Deref's pointer points to are not copied by its
// BPF program.
std::string ebpf_view(const std::string& call) {
  if (call.rfind("main.Sum [", 0) == 0) return slice_len(call, 9);
  if (call.rfind("main.Evens ", 0) == 0) return slice_len(call, call.find("-> [") + 3);
  if (call.rfind("main.Deref ", 0) == 0) return "main.Deref *" + call.substr(call.find(" ->"));
  return call;
}

std::string joined(const json& params) {
  std::string out;
  bool first = true;
  for (const auto& p : params) {
    out += (first ? "" : " ") + go_text(p["value"]);
    first = false;
  }
  return out;
}

// The libgo.so a program loads, as ldd resolves it ("" when none).
std::string libgo_of(const std::string& prog) {
  RunResult ldd = run_command({"ldd", prog});
  std::istringstream lines(ldd.out);
  for (std::string name, arrow, path; lines >> name;)
    if (name.rfind("libgo.so", 0) == 0 && lines >> arrow >> path) return path;
  return "";
}

// gotap attached by pid to `prog` started as "PROG N wait FILE": gotap (its `args`, then -p
// PID, then `after`) attaches while the program waits; `before` runs with the pid before
// gotap starts, `meanwhile` once gotap says it traces; then FILE lets the program make its
// calls, and both end with the program.
struct AttachedRun {
  bool started = false;  // gotap printed "Tracing"
  std::string program_out, out, err;
  int status = -1;  // gotap's wait status
};

AttachedRun run_attached(const std::string& prog, int rounds, std::vector<std::string> args,
                         const std::vector<std::string>& after,
                         const std::function<void(pid_t)>& before = {},
                         const std::function<void()>& meanwhile = {}) {
  AttachedRun run;
  const std::string go = "/tmp/gotap-gccgo-attach-" + std::to_string(getpid());
  unlink(go.c_str());
  Child p = spawn({prog, std::to_string(rounds), "wait", go});
  EXPECT_GT(p.pid, 0);
  if (p.pid <= 0) return run;
  const bool waiting = read_until(p.out, "waiting", 30'000).find("waiting") != std::string::npos;
  EXPECT_TRUE(waiting) << prog << " never said it was waiting";
  Child g;
  if (waiting) {
    if (before) before(p.pid);
    args.insert(args.begin(), gotap_binary());
    args.insert(args.end(), {"-p", std::to_string(p.pid)});
    args.insert(args.end(), after.begin(), after.end());
    g = spawn(args);
    EXPECT_GT(g.pid, 0);
  }
  std::string started;
  if (g.pid > 0) started = read_until(g.err, "Tracing", 60'000);
  run.started = started.find("Tracing") != std::string::npos;
  if (run.started && meanwhile) meanwhile();
  std::FILE* f = std::fopen(go.c_str(), "w");
  EXPECT_NE(f, nullptr) << go;
  if (f) std::fclose(f);
  run.program_out = read_all(p.out);
  waitpid(p.pid, nullptr, 0);
  close(p.out);
  close(p.err);
  if (g.pid > 0) {
    run.out = read_all(g.out);
    run.err = started + read_all(g.err);
    waitpid(g.pid, &run.status, 0);
    close(g.out);
    close(g.err);
  }
  unlink(go.c_str());
  return run;
}

class Gccgo : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (ptrace and BPF)";
    if (!file_exists(gotap_binary())) GTEST_SKIP() << gotap_binary() << " is not built";
    if (!file_exists(fixture(flavour())))
      GTEST_SKIP() << "no gccgo fixture " << fixture(flavour())
                   << " (gccgo-12 absent: tests/tools/build-gccgo-fixtures.sh)";
  }
  const std::string& backend() const { return std::get<0>(GetParam()); }
  const std::string& flavour() const { return std::get<1>(GetParam()); }

  RunResult gotap(const std::string& command, const std::vector<std::string>& funcs = kFuncs) {
    std::vector<std::string> argv = {gotap_binary(), command, "--backend", backend(), "--json"};
    argv.insert(argv.end(), funcs.begin(), funcs.end());
    argv.insert(argv.end(), {"--", fixture(flavour()), std::to_string(kRounds)});
    return run_command(argv, 60);
  }
};

TEST_P(Gccgo, CountsAreTheProgramsOwn) {
  RunResult r = gotap("count");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  Truth t = truth_of(r.out);
  ASSERT_EQ(t.counts.size(), kFuncs.size()) << r.out;
  std::map<std::string, uint64_t> got;
  for (const auto& e : events_in(r.out, "count")) got[e.value("func", "")] = e.value("count", 0ull);
  for (const auto& f : kFuncs) {
    EXPECT_EQ(t.counts[f], uint64_t(2 * kRounds)) << f;
    EXPECT_EQ(got[f], t.counts[f]) << f << "\n" << r.out;
  }
}

// An error result returned in memory (main.Parse's (int, error), the error at rax+8 at the
// RET): the failed calls are the program's own.
TEST_P(Gccgo, FailedCallsOfAnErrorReturnedInMemory) {
  RunResult r = gotap("count", {"main.Parse"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  uint64_t calls = 0, failed = 0;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("errors main.Parse ", 0) == 0)
      std::istringstream(line.substr(18)) >> calls >> failed;
  ASSERT_EQ(calls, uint64_t(2 * kRounds)) << r.out;
  ASSERT_GT(failed, 0u);
  auto counts = events_in(r.out, "count");
  ASSERT_EQ(counts.size(), 1u) << r.out;
  EXPECT_EQ(counts[0].value("count", 0ull), calls) << r.out;
  EXPECT_EQ(counts[0].value("failed", 0ull), failed) << r.out;
}

// Each call's goroutine is the one that made it, as libgo's traceback names it: main.Add's
// first argument is the round, which tells the goroutine. Entries and returns pair by
// goroutine, the fixture's functions being leaves.
TEST_P(Gccgo, TracedCallsAreTheProgramsOwn) {
  RunResult r = gotap("trace");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  Truth t = truth_of(r.out);
  ASSERT_EQ(t.calls.size(), kFuncs.size() * 2 * kRounds) << r.out;
  ASSERT_GT(t.main_goid, 0) << r.out;
  ASSERT_GT(t.worker_goid, 0) << r.out;
  ASSERT_NE(t.main_goid, t.worker_goid);
  std::map<int64_t, std::vector<json>> open;  // by goid
  std::multiset<std::string> got;
  std::map<std::string, uint64_t> entries, returns;
  std::map<int64_t, uint64_t> adds;  // main.Add's calls by goid
  for (const auto& e : events_in(r.out)) {
    const std::string kind = e.value("event", "");
    if (kind != "entry" && kind != "return") continue;
    const int64_t goid = e.value("goid", int64_t(-1));
    ASSERT_TRUE(goid == t.main_goid || goid == t.worker_goid) << e.dump();
    const std::string f = e.value("func", "");
    if (kind == "entry") {
      ++entries[f];
      open[goid].push_back(e);
      if (f == "main.Add") {
        const int64_t round = e["args"][0].value("value", int64_t(-1));
        EXPECT_EQ(goid, round < kRounds ? t.main_goid : t.worker_goid) << e.dump();
        ++adds[goid];
      }
      continue;
    }
    ++returns[f];
    ASSERT_FALSE(open[goid].empty()) << "a return without its entry: " << e.dump();
    json entry = open[goid].back();
    open[goid].pop_back();
    ASSERT_EQ(entry.value("func", ""), f) << e.dump();
    EXPECT_TRUE(e.contains("duration_ns")) << "not paired with its entry: " << e.dump();
    got.insert(f + " " + joined(entry["args"]) + " -> " + joined(e["results"]));
  }
  for (const auto& f : kFuncs) {
    EXPECT_EQ(entries[f], t.counts[f]) << f;
    EXPECT_EQ(returns[f], t.counts[f]) << f;
  }
  EXPECT_EQ(adds[t.main_goid], uint64_t(kRounds));
  EXPECT_EQ(adds[t.worker_goid], uint64_t(kRounds));
  EXPECT_TRUE(events_in(r.out, "unfinished").empty()) << r.out;
  std::multiset<std::string> want;
  // The trampoline backend has no jumps for gccgo: its calls are traced on kernel uprobes,
  // and it says so.
  for (const auto& c : t.calls) want.insert(backend() != "ptrace" ? ebpf_view(c) : c);
  if (backend() == "trampoline")
    EXPECT_NE(r.err.find("gc only (gccgo's functions have no stack check it can use): every "
                         "probe goes on kernel uprobes"),
              std::string::npos)
        << r.err;
  EXPECT_EQ(got, want);
}

// graph: per goroutine, each of the program's rounds beneath its own main.round, the calls it
// makes one level down. The goroutines are the ones the program names.
TEST_P(Gccgo, GraphNestsEachRoundUnderItsGoroutine) {
  std::vector<std::string> argv = {
      gotap_binary(), "graph", "--backend",        backend(),
      "main.round",   "--",    fixture(flavour()), std::to_string(kRounds)};
  RunResult r = run_command(argv, 120);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Truth t = truth_of(r.out);
  ASSERT_GT(t.main_goid, 0) << r.out;
  ASSERT_GT(t.worker_goid, 0) << r.out;
  // "             [     1] | main.round() {", "   21.3 us [     1] |   main.Add();"
  std::map<int64_t, int> rounds, adds;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    const size_t open = line.find('['), bar = line.find("] | ");
    if (line.rfind('#', 0) == 0 || open == std::string::npos || bar == std::string::npos ||
        bar < open)
      continue;
    const int64_t goid = std::stoll(line.substr(open + 1, bar - open - 1));
    const std::string call = line.substr(bar + 4);
    if (call == "main.round() {") ++rounds[goid];
    if (call == "  main.Add();") ++adds[goid];
  }
  for (int64_t g : {t.main_goid, t.worker_goid}) {
    EXPECT_EQ(rounds[g], kRounds) << "goroutine " << g << "\n" << r.out;
    EXPECT_EQ(adds[g], kRounds) << "goroutine " << g;
  }
  EXPECT_EQ(rounds.size(), 2u) << r.out;
}

// --if on the goroutine id: exactly the main goroutine's calls (libgo numbers it 1, as its
// traceback says), counted in the kernel (eBPF) or at the stop (ptrace).
TEST_P(Gccgo, ConditionOnTheGoroutine) {
  RunResult r = gotap("count", {"--if", "goid == 1", "main.Add"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(truth_of(r.out).main_goid, 1) << r.out;
  auto counts = events_in(r.out, "count");
  ASSERT_EQ(counts.size(), 1u) << r.out;
  EXPECT_EQ(counts[0].value("count", 0ull), uint64_t(kRounds)) << r.out;
}

// Attached by pid: libgo is loaded by then, its TLS module id read from the process (linked
// against libgo.so) or the offset from the file (libgo linked in). Each call's goroutine is
// the program's own.
TEST_P(Gccgo, GoroutineIdsWhenAttachedByPid) {
  const AttachedRun run = run_attached(fixture(flavour()), kRounds,
                                       {"trace", "--backend", backend(), "--json"}, {"main.Add"});
  ASSERT_TRUE(run.started) << run.err;
  EXPECT_TRUE(WIFEXITED(run.status) && WEXITSTATUS(run.status) == 0) << run.err;
  EXPECT_EQ(run.err.find("warning"), std::string::npos) << run.err;
  const std::string& pout = run.program_out;
  const std::string& out = run.out;
  Truth t = truth_of(pout);
  ASSERT_GT(t.main_goid, 0) << pout;
  ASSERT_GT(t.worker_goid, 0) << pout;
  std::map<int64_t, uint64_t> adds;
  for (const auto& e : events_in(out, "entry")) {
    const int64_t round = e["args"][0].value("value", int64_t(-1));
    EXPECT_EQ(e.value("goid", int64_t(-1)), round < kRounds ? t.main_goid : t.worker_goid)
        << e.dump();
    ++adds[e.value("goid", int64_t(-1))];
  }
  EXPECT_EQ(adds[t.main_goid], uint64_t(kRounds)) << out;
  EXPECT_EQ(adds[t.worker_goid], uint64_t(kRounds)) << out;
}

// An error result: nil when the program's was; otherwise, on ptrace, the dynamic type and
// fields the program printed for it, read through libgo's type descriptors (the method
// table's first word, then the descriptor's name and struct fields). eBPF decodes from the
// program's file: with libgo linked in, the type is named (its pointee is not copied);
// linked dynamically, libgo's descriptors are in libgo's file, and the value is unnamed.
TEST_P(Gccgo, ErrorResultsAreTheProgramsOwn) {
  RunResult r = gotap("trace", {"main.Parse"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::multiset<std::string> want, got;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("parse ", 0) == 0) {
      std::istringstream w(line.substr(6));
      std::string in, n, type, func, num, err;
      w >> in >> n >> type >> func >> num;
      std::getline(w, err);
      if (type == "<nil>")
        want.insert(n + " nil");
      else if (backend() == "ptrace")
        want.insert(n + " " + type + " " + func + " " + num + err);
      else if (flavour() == "static")  // libgo's descriptors are in the program's file
        want.insert(n + " " + type);
      else
        want.insert(n + " error");
    }
  ASSERT_EQ(want.size(), size_t(2 * kRounds)) << r.out;
  for (const auto& e : events_in(r.out, "return")) {
    const json& res = e["results"];
    ASSERT_EQ(res.size(), 2u) << e.dump();
    const std::string n = go_text(res[0]["value"]);
    const json& v = res[1]["value"];
    if (v.is_null()) {
      got.insert(n + " nil");
    } else if (backend() == "ptrace") {
      const json f = v.value("value", json::object())
                         .value("elem", json::object())
                         .value("fields", json::array());
      ASSERT_EQ(f.size(), 3u) << e.dump();
      got.insert(n + " " + v.value("type", "") + " " + go_text(f[0]["value"]) + " " +
                 go_text(f[1]["value"]) + " " + f[2]["value"].value("error", ""));
    } else if (flavour() == "static") {
      got.insert(n + " " + v.value("type", ""));
    } else {
      got.insert(n + " error");
    }
  }
  EXPECT_EQ(got, want);
}

// --if on a string in rsi:rdx: the calls the program made with that string.
TEST_P(Gccgo, ConditionOnAStringInRdx) {
  RunResult r = gotap("count", {"--if", "s == \"w3\"", "main.Label"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  uint64_t want = 0;
  for (const auto& c : truth_of(r.out).calls)
    if (c.rfind("main.Label ", 0) == 0 && c.find(" w3 -> ") != std::string::npos) ++want;
  ASSERT_EQ(want, 1u) << r.out;
  auto counts = events_in(r.out, "count");
  ASSERT_EQ(counts.size(), 1u) << r.out;
  EXPECT_EQ(counts[0].value("count", 0ull), want) << r.out;
}

// --if on results that share rax (main.Halves's two int32s, the second in its upper half,
// negative for most calls): the calls the program made with such results.
TEST_P(Gccgo, ConditionOnAResultInARegistersUpperHalf) {
  RunResult r = gotap("count", {"--if", "~r1 < 0 && ~r0 > -8", "main.Halves"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  uint64_t want = 0, seen = 0;
  for (const auto& c : truth_of(r.out).calls) {
    if (c.rfind("main.Halves ", 0) != 0) continue;
    ++seen;
    int h1 = 0, h2 = 0;
    std::istringstream(c.substr(c.find("-> ") + 3)) >> h1 >> h2;
    if (h2 < 0 && h1 > -8) ++want;
  }
  ASSERT_EQ(seen, uint64_t(2 * kRounds)) << r.out;
  ASSERT_GT(want, 0u);
  ASSERT_LT(want, seen);
  auto counts = events_in(r.out, "count");
  ASSERT_EQ(counts.size(), 1u) << r.out;
  EXPECT_EQ(counts[0].value("count", 0ull), want) << r.out;
}

INSTANTIATE_TEST_SUITE_P(Backends, Gccgo,
                         ::testing::Combine(::testing::Values("ebpf", "ptrace", "trampoline"),
                                            ::testing::Values("default", "static")),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" + std::get<1>(info.param);
                         });

using GccgoStripped = Gccgo;

// Without DWARF and .symtab: main.main by name, its one call counted and traced whole, with
// no values, while the program runs as it does untraced.
TEST_P(GccgoStripped, TracedByNameAlone) {
  RunResult c = gotap("count", {"main.main"});
  ASSERT_EQ(c.exit_code, 0) << c.err;
  auto counts = events_in(c.out, "count");
  ASSERT_EQ(counts.size(), 1u) << c.out;
  EXPECT_EQ(counts[0].value("count", 0ull), 1ull);
  EXPECT_EQ(truth_of(c.out).counts["main.Add"], uint64_t(2 * kRounds)) << c.out;

  RunResult r = gotap("trace", {"main.main"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(truth_of(r.out).calls.size(), kFuncs.size() * 2 * kRounds) << r.out;
  auto entries = events_in(r.out, "entry"), returns = events_in(r.out, "return");
  ASSERT_EQ(entries.size(), 1u) << r.out;
  ASSERT_EQ(returns.size(), 1u) << r.out;
  EXPECT_TRUE(entries[0]["args"].empty()) << entries[0].dump();
  EXPECT_TRUE(returns[0]["results"].empty()) << returns[0].dump();
  EXPECT_TRUE(returns[0].contains("duration_ns")) << returns[0].dump();
  // libgo.so, which the program needs, has its symbols: main.main runs on the main goroutine.
  const Truth t = truth_of(r.out);
  ASSERT_GT(t.main_goid, 0) << r.out;
  EXPECT_EQ(entries[0].value("goid", int64_t(-1)), t.main_goid) << entries[0].dump();
  EXPECT_EQ(returns[0].value("goid", int64_t(-1)), t.main_goid) << returns[0].dump();
}

INSTANTIATE_TEST_SUITE_P(Backends, GccgoStripped,
                         ::testing::Combine(::testing::Values("ebpf", "ptrace"),
                                            ::testing::Values("stripped")),
                         [](const auto& info) { return std::get<0>(info.param); });

// A copy of libgo of the test's own, in a directory of its own that the programs are given
// as LD_LIBRARY_PATH: gccgo programs other tests run meanwhile map the system's, not it.
struct PrivateLibgo {
  explicit PrivateLibgo(const std::string& libgo) {
    char tmpl[] = "/tmp/gotap-libgo.XXXXXX";
    if (!mkdtemp(tmpl)) return;
    dir = tmpl;
    copy = dir + "/" + std::filesystem::path(libgo).filename().string();
    std::error_code ec;
    if (!std::filesystem::copy_file(libgo, copy, ec)) copy.clear();
  }
  ~PrivateLibgo() {
    std::error_code ec;
    if (!dir.empty()) std::filesystem::remove_all(dir, ec);
  }
  std::string dir, copy;
};

// libgo as the target (eBPF, --all --binary): its strconv.Atoi counted in every process that
// maps it, failures included (an (int, error) returned in memory), in all and by process: two
// processes of different sizes each get their own count. The programs load a copy of libgo
// of the test's own (LD_LIBRARY_PATH), so that gccgo programs other tests run meanwhile are
// not counted.
TEST(GccgoLibgo, AllBinaryCountsInEveryProcessThatMapsIt) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (BPF)";
  if (!file_exists(gotap_binary())) GTEST_SKIP() << gotap_binary() << " is not built";
  const std::string prog = fixture("default");
  if (!file_exists(prog)) GTEST_SKIP() << "no gccgo fixture " << prog << " (gccgo-12 absent)";
  const std::string libgo = libgo_of(prog);
  ASSERT_FALSE(libgo.empty()) << "ldd names no libgo.so for " << prog;
  const PrivateLibgo own(libgo);
  ASSERT_FALSE(own.copy.empty());
  const std::string &dir = own.dir, &copy = own.copy;
  Child g = spawn({gotap_binary(), "count", "--backend", "ebpf", "--json", "--all", "--binary",
                   copy, "strconv.Atoi"});
  ASSERT_GT(g.pid, 0);
  const std::string started = read_until(g.err, "Tracing", 60'000);
  uint64_t want_calls = 0, want_failed = 0;
  std::map<int64_t, uint64_t> want_by_pid;
  const char* sizes[] = {"12", "5"};
  for (int run = 0; run < 2 && started.find("Tracing") != std::string::npos; ++run) {
    Child p = spawn({"/usr/bin/env", "LD_LIBRARY_PATH=" + dir, prog, sizes[run]});
    ASSERT_GT(p.pid, 0);
    const std::string out = read_all(p.out);
    int pst = 0;
    waitpid(p.pid, &pst, 0);
    close(p.out);
    close(p.err);
    ASSERT_TRUE(WIFEXITED(pst) && WEXITSTATUS(pst) == 0) << out;
    std::istringstream lines(out);
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("errors main.Parse ", 0) != 0) continue;
      uint64_t calls = 0, failed = 0;
      std::istringstream(line.substr(18)) >> calls >> failed;
      want_calls += calls + 1;          // and main's own, of its argument
      want_by_pid[p.pid] += calls + 1;  // env execs the program in its own process
      want_failed += failed;
    }
  }
  kill(g.pid, SIGINT);
  const std::string out = read_all(g.out), err = started + read_all(g.err);
  int st = 0;
  waitpid(g.pid, &st, 0);
  close(g.out);
  close(g.err);
  ASSERT_NE(started.find("Tracing"), std::string::npos) << started;
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << err;
  ASSERT_EQ(want_calls, (2 * 12 + 1) + (2 * 5 + 1));
  auto counts = events_in(out, "count");
  ASSERT_EQ(counts.size(), 1u) << out << err;
  EXPECT_EQ(counts[0].value("count", 0ull), want_calls) << out;
  EXPECT_EQ(counts[0].value("failed", 0ull), want_failed) << out;
  // By process: each its own count, under the name the kernel gives its threads.
  ASSERT_TRUE(counts[0].contains("processes")) << out;
  std::map<int64_t, uint64_t> got_by_pid;
  for (const json& p : counts[0]["processes"]) {
    got_by_pid[p.value("pid", int64_t(-1))] = p.value("count", 0ull);
    EXPECT_EQ(p.value("comm", std::string()),
              std::filesystem::path(prog).filename().string().substr(0, 15))
        << p.dump();
  }
  EXPECT_EQ(got_by_pid, want_by_pid) << out;
  EXPECT_FALSE(counts[0].contains("processes_lost")) << out;
}

// The same target, traced: every Atoi call of two processes carries its process's pid and
// the goroutine id that process printed for the round that made it (rounds 0 to N-1 are
// main's, N to 2N-1 the worker's, and the input is the round's number): each hit reads the
// TLS module id from the GOT of the libgo it ran in.
TEST(GccgoLibgo, AllBinaryTracesEachProcesssGoroutines) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (BPF)";
  if (!file_exists(gotap_binary())) GTEST_SKIP() << gotap_binary() << " is not built";
  const std::string prog = fixture("default");
  if (!file_exists(prog)) GTEST_SKIP() << "no gccgo fixture " << prog << " (gccgo-12 absent)";
  const std::string libgo = libgo_of(prog);
  ASSERT_FALSE(libgo.empty()) << "ldd names no libgo.so for " << prog;
  const PrivateLibgo own(libgo);
  ASSERT_FALSE(own.copy.empty());
  const std::string &dir = own.dir, &copy = own.copy;
  Child g = spawn({gotap_binary(), "trace", "--backend", "ebpf", "--json", "--all", "--binary",
                   copy, "strconv.Atoi"});
  ASSERT_GT(g.pid, 0);
  const std::string started = read_until(g.err, "Tracing", 60'000);
  std::map<int64_t, Truth> truths;  // by pid
  for (int run = 0; run < 2 && started.find("Tracing") != std::string::npos; ++run) {
    Child p = spawn({"/usr/bin/env", "LD_LIBRARY_PATH=" + dir, prog, "6"});
    ASSERT_GT(p.pid, 0);
    const std::string out = read_all(p.out);
    waitpid(p.pid, nullptr, 0);
    close(p.out);
    close(p.err);
    truths[p.pid] = truth_of(out);  // env execs the program in its own process
  }
  usleep(200 * 1000);
  kill(g.pid, SIGINT);
  const std::string out = read_all(g.out), err = started + read_all(g.err);
  waitpid(g.pid, nullptr, 0);
  close(g.out);
  close(g.err);
  ASSERT_NE(started.find("Tracing"), std::string::npos) << started;
  EXPECT_EQ(err.find("goroutine ids are not read"), std::string::npos) << err;
  size_t checked = 0;
  for (const json& e : events_in(out, "entry")) {
    const int64_t pid = e.value("pid", int64_t(-1));
    ASSERT_TRUE(truths.count(pid)) << "a process not run here: " << e.dump();
    const Truth& t = truths[pid];
    std::string in = e["args"][0]["value"].get<std::string>();
    if (in == "6") continue;  // main's own, of its argument, before its goroutines' rounds
    const int round = std::stoi(in[0] == 'x' ? in.substr(1) : in);
    EXPECT_EQ(e.value("goid", int64_t(-1)), round < 6 ? t.main_goid : t.worker_goid) << e.dump();
    ++checked;
  }
  EXPECT_EQ(checked, 2u * 12) << out << err;
}

// libgo's copy in one process as the target (-p PID --binary LIB, as bcc's funccount -p PID
// LIB:FUNC), on eBPF and ptrace: the Atoi calls that process makes once attached, failures
// included, and none of another process that maps the same libgo meanwhile.
class GccgoLibgo : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (BPF and ptrace of another process)";
    if (!file_exists(gotap_binary())) GTEST_SKIP() << gotap_binary() << " is not built";
    prog = fixture("default");
    if (!file_exists(prog)) GTEST_SKIP() << "no gccgo fixture " << prog << " (gccgo-12 absent)";
    libgo = libgo_of(prog);
    ASSERT_FALSE(libgo.empty()) << "ldd names no libgo.so for " << prog;
  }
  std::string prog, libgo;
};

TEST_P(GccgoLibgo, PidAndBinaryCountsThatProcessAlone) {
  const AttachedRun run = run_attached(prog, 12, {"count", "--backend", GetParam(), "--json"},
                                       {"--binary", libgo, "strconv.Atoi"}, {}, [&] {
                                         // Another process of the same libgo, traced by nobody: its
                                         // calls are not counted.
                                         RunResult other = run_command({prog, "12"});
                                         EXPECT_EQ(other.exit_code, 0) << other.err;
                                       });
  // The traced process exits, and the trace ends with it.
  ASSERT_TRUE(run.started) << run.err;
  EXPECT_TRUE(WIFEXITED(run.status) && WEXITSTATUS(run.status) == 0) << run.err;
  const std::string& pout = run.program_out;
  const std::string &out = run.out, &err = run.err;
  uint64_t calls = 0, failed = 0;
  std::istringstream pl(pout);
  for (std::string line; std::getline(pl, line);)
    if (line.rfind("errors main.Parse ", 0) == 0)
      std::istringstream(line.substr(18)) >> calls >> failed;
  ASSERT_EQ(calls, 2u * 12) << pout;
  auto counts = events_in(out, "count");
  ASSERT_EQ(counts.size(), 1u) << out << err;
  EXPECT_EQ(counts[0].value("count", 0ull), calls) << out;
  EXPECT_EQ(counts[0].value("failed", 0ull), failed) << out;
}

// Each Atoi call in libgo's copy, traced: its argument, its int result and its error equal
// what the program printed of that call ("parse IN N *strconv.NumError FUNC NUM ERR" or
// "parse IN N <nil>"), on the goroutine that made it. ptrace decodes the error's dynamic type
// and fields from libgo's type descriptors; eBPF shows a failing error's two words raw.
TEST_P(GccgoLibgo, PidAndBinaryTracesLibgosValuesAndGoroutines) {
  const bool ptrace = GetParam() == "ptrace";
  const AttachedRun run = run_attached(prog, 12, {"trace", "--backend", GetParam(), "--json"},
                                       {"--binary", libgo, "strconv.Atoi"});
  ASSERT_TRUE(run.started) << run.err;
  EXPECT_TRUE(WIFEXITED(run.status) && WEXITSTATUS(run.status) == 0) << run.err;
  const Truth t = truth_of(run.program_out);
  ASSERT_GE(t.main_goid, 0) << run.program_out;
  ASSERT_GE(t.worker_goid, 0) << run.program_out;
  struct Parse {
    std::string result, type, fields;
    int64_t goid = -1;
  };
  std::map<std::string, Parse> want;  // by input: each is parsed once
  std::istringstream pl(run.program_out);
  for (std::string line; std::getline(pl, line);) {
    if (line.rfind("parse ", 0) != 0) continue;
    std::istringstream w(line.substr(6));
    std::string in;
    Parse p;
    w >> in >> p.result >> p.type;
    std::getline(w, p.fields);
    // Rounds 0 to N-1 are main's, N to 2N-1 the worker's; the input is the round's number.
    const int round = std::stoi(in[0] == 'x' ? in.substr(1) : in);
    p.goid = round < 12 ? t.main_goid : t.worker_goid;
    want[in] = p;
  }
  ASSERT_EQ(want.size(), 24u) << run.program_out;
  // Entries and returns pair by goroutine: each goroutine makes one call at a time.
  std::map<int64_t, std::string> open;
  size_t checked = 0;
  for (const json& e : events_in(run.out)) {
    const std::string kind = e.value("event", "");
    if (kind != "entry" && kind != "return") continue;
    ASSERT_EQ(e.value("func", ""), "strconv.Atoi") << e.dump();
    const int64_t goid = e.value("goid", int64_t(-1));
    if (kind == "entry") {
      ASSERT_EQ(e["args"].size(), 1u) << e.dump();
      const std::string in = e["args"][0]["value"].get<std::string>();
      ASSERT_TRUE(want.count(in)) << "no call of the program parsed " << in;
      EXPECT_EQ(goid, want[in].goid) << e.dump();
      open[goid] = in;
      continue;
    }
    ASSERT_TRUE(open.count(goid)) << "a return without its entry: " << e.dump();
    const Parse& p = want[open[goid]];
    open.erase(goid);
    ASSERT_EQ(e["results"].size(), 2u) << e.dump();
    EXPECT_EQ(go_text(e["results"][0]["value"]), p.result) << e.dump();
    const json& err = e["results"][1]["value"];
    if (p.type == "<nil>") {
      EXPECT_TRUE(err.is_null()) << e.dump();
    } else if (ptrace) {
      EXPECT_EQ(err.value("type", ""), p.type) << e.dump();
      std::string fields;
      for (const json& f : err["value"]["elem"]["fields"]) {
        const json& v = f["value"];
        fields += " " + (v.is_object() && v.contains("error") ? v["error"].get<std::string>()
                                                              : go_text(v));
      }
      EXPECT_EQ(fields, p.fields) << e.dump();
    } else {
      EXPECT_EQ(err["raw"].size(), 2u) << e.dump();
    }
    ++checked;
  }
  EXPECT_EQ(checked, want.size()) << run.out << run.err;
}

// gotap killed (SIGKILL) while its probes are in libgo's copy: the program runs on, each
// Atoi call through a probe that no one handles any more, and ends as untraced (its own
// count of calls, exit 0). On ptrace the int3s stay, and the safety net in the program
// takes them (docs/design.md); on eBPF the kernel removes the uprobes.
TEST_P(GccgoLibgo, PidAndBinaryKilledTracerLeavesTheProgramWhole) {
  const std::string go = "/tmp/gotap-gccgo-kill-" + std::to_string(getpid());
  unlink(go.c_str());
  Child p = spawn({prog, "300", "wait", go});
  ASSERT_GT(p.pid, 0);
  ASSERT_NE(read_until(p.out, "waiting", 30'000).find("waiting"), std::string::npos);
  Child g = spawn({gotap_binary(), "trace", "--backend", GetParam(), "--json", "-p",
                   std::to_string(p.pid), "--binary", libgo, "strconv.*"});
  ASSERT_GT(g.pid, 0);
  const std::string started = read_until(g.err, "Tracing", 60'000);
  std::FILE* f = std::fopen(go.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fclose(f);
  usleep(30 * 1000);  // in the middle of the program's calls
  kill(g.pid, SIGKILL);
  waitpid(g.pid, nullptr, 0);
  close(g.out);
  close(g.err);
  const std::string out = read_all(p.out);
  int st = 0;
  waitpid(p.pid, &st, 0);
  close(p.out);
  close(p.err);
  unlink(go.c_str());
  ASSERT_NE(started.find("Tracing"), std::string::npos) << started;
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "wait status " << st;
  EXPECT_NE(out.find("errors main.Parse 600 "), std::string::npos) << out.substr(out.size() / 2);
}

INSTANTIATE_TEST_SUITE_P(Backends, GccgoLibgo, ::testing::Values("ebpf", "ptrace"),
                         [](const auto& info) { return info.param; });

// Side by side with a peer (issue 39: bcc's funccount cannot compile its programs on a kernel
// without its headers, CI's; bpftrace needs none): bpftrace's uprobes and gotap, on each
// eBPF backend, count the same calls of one run, and both are the program's own count (ptrace
// refuses sites that hold another tracer's int3, as documented). bpftrace probes a private
// copy of the fixture, so that other tests' runs of it stay out.
TEST(GccgoPeer, CountsEqualBpftracesAndTheProgramsOwn) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (BPF)";
  if (!file_exists(gotap_binary())) GTEST_SKIP() << gotap_binary() << " is not built";
  if (!file_exists(fixture("default"))) GTEST_SKIP() << "no gccgo fixtures (gccgo-12 absent)";
  const std::string bpftrace = "/usr/bin/bpftrace";
  if (!file_exists(bpftrace)) GTEST_SKIP() << "bpftrace is not installed (dev.sh installs it)";
  const std::string copy = "/tmp/gotap-gccgo-peer-" + std::to_string(getpid());
  std::filesystem::copy_file(fixture("default"), copy,
                             std::filesystem::copy_options::overwrite_existing);
  const std::vector<std::string> funcs = {"main.Add", "main.Halves", "main.Parse"};
  std::string program = "BEGIN { printf(\"attached\\n\"); }";
  for (const auto& f : funcs)
    program += " uprobe:" + copy + ":" + f + " { @[\"" + f + "\"] = count(); }";
  Child bt = spawn({bpftrace, "-e", program});
  ASSERT_GT(bt.pid, 0);
  const std::string started = read_until(bt.out, "attached\n", 60'000);
  RunResult r;
  if (started.find("attached\n") != std::string::npos) {
    std::vector<std::string> argv = {gotap_binary(), "count", "--backend", "ebpf", "--json"};
    argv.insert(argv.end(), funcs.begin(), funcs.end());
    argv.insert(argv.end(), {"--", copy, std::to_string(kRounds)});
    r = run_command(argv, 60);
  }
  kill(bt.pid, SIGINT);
  const std::string bt_out = started + read_all(bt.out), bt_err = read_all(bt.err);
  waitpid(bt.pid, nullptr, 0);
  close(bt.out);
  close(bt.err);
  std::remove(copy.c_str());
  ASSERT_NE(started.find("attached\n"), std::string::npos) << started << bt_err;
  ASSERT_EQ(r.exit_code, 0) << r.err;
  Truth t = truth_of(r.out);
  std::map<std::string, uint64_t> got;
  for (const auto& e : events_in(r.out, "count")) got[e.value("func", "")] = e.value("count", 0ull);
  t.counts["main.Parse"] = 0;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("errors main.Parse ", 0) == 0)
      std::istringstream(line.substr(18)) >> t.counts["main.Parse"];
  for (const auto& f : funcs) {
    SCOPED_TRACE(f);
    EXPECT_EQ(t.counts[f], uint64_t(2 * kRounds)) << r.out;
    EXPECT_EQ(got[f], t.counts[f]) << r.out;
    // bpftrace prints each map entry as @[main.Add]: 24.
    const std::string key = "@[" + f + "]: ";
    const size_t at = bt_out.find(key);
    ASSERT_NE(at, std::string::npos) << bt_out << bt_err;
    EXPECT_EQ(std::stoull(bt_out.substr(at + key.size())), t.counts[f]) << bt_out;
  }
}

// Side by side with bcc, the oldest Go tracing there is (issue 39): it reads gccgo programs by
// their ELF symbols and the C calling convention. bcc's funccount-bpfcc counts libgo's
// strconv.Atoi as `go:strconv.Atoi` (bcc's name for libgo) and trace-bpfcc prints main.Add's
// and main.Label's argument registers and main.Add's result, in one run of the program
// attached by pid; gotap's eBPF backend counts the same Atoi (libgo's copy in the process) and
// traces the same calls in a second run (the program's calls are the same each run: it
// prints them). Not in one run: Debian's bcc 0.26 gives its uprobes a stray reference
// counter, and the kernel lets no other uprobe share their sites (test_runtime_counted_
// uprobes.cpp). Counts are equal and the program's own; where bcc prints a word gotap prints
// the value: main.Label's string is bcc's pointer and length (rsi, rdx), and gotap's string
// has that length and is the program's. bcc compiles its BPF with kernel headers, which CI's
// kernel does not ship: tests/tools/bcc-kernel-source.sh lends it Debian's (dev.sh installs
// them with bpfcc-tools).
TEST(GccgoPeer, BccCountsAndWordsAreGotapsAndTheProgramsOwn) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (BPF)";
  if (!file_exists(gotap_binary())) GTEST_SKIP() << gotap_binary() << " is not built";
  const std::string prog = fixture("default");
  if (!file_exists(prog)) GTEST_SKIP() << "no gccgo fixtures (gccgo-12 absent)";
  const std::string funccount = "/usr/sbin/funccount-bpfcc", trace = "/usr/sbin/trace-bpfcc";
  if (!file_exists(funccount) || !file_exists(trace))
    GTEST_SKIP() << "bcc's tools are not installed (package bpfcc-tools: dev.sh installs it)";
  const std::string src = "/tmp/gotap-bcc-kernel-" + std::to_string(getpid());
  RunResult headers =
      run_command({std::string(GOTAP_SOURCE_DIR) + "/tests/tools/bcc-kernel-source.sh", src});
  if (headers.exit_code != 0)
    GTEST_SKIP() << "no kernel headers for bcc: " << headers.err
                 << "(package linux-headers-amd64: dev.sh installs it)";
  const std::string libgo = libgo_of(prog);
  ASSERT_FALSE(libgo.empty()) << prog << " loads no libgo.so";

  // 1. bcc. Python buffers a pipe: unbuffered, bcc's first line says when its probes are in.
  const std::string go = "/tmp/gotap-gccgo-bcc-" + std::to_string(getpid());
  unlink(go.c_str());
  Child p = spawn({prog, std::to_string(kRounds), "wait", go});
  ASSERT_GT(p.pid, 0);
  ASSERT_NE(read_until(p.out, "waiting", 30'000).find("waiting"), std::string::npos);
  const std::string pid = std::to_string(p.pid);
  Child fc = spawn({"/usr/bin/env", "PYTHONUNBUFFERED=1", "BCC_KERNEL_SOURCE=" + src, funccount,
                    "-p", pid, "go:strconv.Atoi"});
  Child tr =
      spawn({"/usr/bin/env", "PYTHONUNBUFFERED=1", "BCC_KERNEL_SOURCE=" + src, trace, "-p", pid,
             prog + ":main.Add \"%d %d\", arg1, arg2", "r:" + prog + ":main.Add \"%d\", retval",
             prog + ":main.Label \"%d %llx %d\", arg1, arg2, arg3"});
  std::string fc_out = read_until(fc.out, "Hit Ctrl-C to end.", 120'000);
  std::string tr_out = read_until(tr.out, "FUNC", 120'000);
  std::FILE* f = std::fopen(go.c_str(), "w");
  if (f) std::fclose(f);
  const std::string bcc_run = read_all(p.out);
  waitpid(p.pid, nullptr, 0);
  close(p.out);
  close(p.err);
  unlink(go.c_str());
  usleep(200 * 1000);  // bcc reads its ring: the program's last calls reach it
  for (Child* c : {&fc, &tr}) kill(c->pid, SIGINT);  // each prints what it has and detaches
  fc_out += read_all(fc.out);
  tr_out += read_all(tr.out);
  const std::string bcc_err = read_all(fc.err) + read_all(tr.err);
  for (Child* c : {&fc, &tr}) {
    waitpid(c->pid, nullptr, 0);
    close(c->out);
    close(c->err);
  }
  std::filesystem::remove_all(src);
  ASSERT_NE(fc_out.find("Hit Ctrl-C to end."), std::string::npos) << fc_out << bcc_err;
  ASSERT_NE(tr_out.find("FUNC"), std::string::npos) << tr_out << bcc_err;

  // 2. gotap: trace of the program's functions, count of libgo's Atoi in the same process.
  Child count;
  std::string count_err;
  const AttachedRun run =
      run_attached(prog, kRounds, {"trace", "--backend", "ebpf", "--json"},
                   {"main.Add", "main.Label"}, [&](pid_t pid) {
                     count = spawn({gotap_binary(), "count", "--backend", "ebpf", "--json", "-p",
                                    std::to_string(pid), "--binary", libgo, "strconv.Atoi"});
                     count_err = read_until(count.err, "Tracing", 60'000);
                   });
  const std::string count_out = read_all(count.out);
  count_err += read_all(count.err);
  int st = 0;
  waitpid(count.pid, &st, 0);
  close(count.out);
  close(count.err);
  ASSERT_TRUE(run.started) << run.err;
  ASSERT_TRUE(WIFEXITED(run.status) && WEXITSTATUS(run.status) == 0) << run.err;
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << count_err;
  // Both runs made the same calls.
  ASSERT_EQ(truth_of(bcc_run).calls, truth_of(run.program_out).calls) << bcc_run;

  // Counts: the program's own Parse calls, each one strconv.Atoi (its first Atoi, of its
  // argument, ran before it waited).
  uint64_t parses = 0;
  std::istringstream plines(run.program_out);
  for (std::string line; std::getline(plines, line);)
    if (line.rfind("errors main.Parse ", 0) == 0) std::istringstream(line.substr(18)) >> parses;
  ASSERT_EQ(parses, uint64_t(2 * kRounds)) << run.program_out;
  uint64_t bcc_count = 0;  // funccount's table: "FUNC  COUNT", then "strconv.Atoi  N"
  std::istringstream flines(fc_out);
  for (std::string line; std::getline(flines, line);) {
    std::istringstream w(line);
    std::string fn;
    uint64_t n = 0;
    if (w >> fn >> n && fn == "strconv.Atoi") bcc_count = n;
  }
  EXPECT_EQ(bcc_count, parses) << fc_out << bcc_err;
  auto counts = events_in(count_out, "count");
  ASSERT_EQ(counts.size(), 1u) << count_out << count_err;
  EXPECT_EQ(counts[0].value("count", 0ull), parses) << count_out;

  // The calls: the program's own print, bcc's words and gotap's values, as multisets.
  std::multiset<std::string> truth_add, truth_ret, truth_label, label_words, bcc_add, bcc_ret,
      bcc_label, gotap_add, gotap_label;
  for (const std::string& c : truth_of(run.program_out).calls) {
    std::istringstream w(c);
    std::string fn, a, b, arrow, res;
    w >> fn >> a >> b >> arrow >> res;
    if (fn == "main.Add") {
      truth_add.insert(a + " " + b);
      truth_ret.insert(res);
    } else if (fn == "main.Label") {  // "main.Label true w3 -> W3"
      truth_label.insert(a + " " + b);
      label_words.insert(std::string(a == "true" ? "1" : "0") + " " + std::to_string(b.size()));
    }
  }
  ASSERT_EQ(truth_add.size(), size_t(2 * kRounds)) << run.program_out;
  // trace-bpfcc's lines: "PID TID COMM FUNC MESSAGE"; an entry's message has the arguments,
  // main.Add's return one word.
  std::istringstream tlines(tr_out);
  for (std::string line; std::getline(tlines, line);) {
    std::istringstream w(line);
    std::string tpid, tid, comm, fn, x, y, z;
    if (!(w >> tpid >> tid >> comm >> fn >> x)) continue;
    const bool more = bool(w >> y);
    if (fn == "main.Add" && more) bcc_add.insert(x + " " + y);
    if (fn == "main.Add" && !more) bcc_ret.insert(x);
    if (fn == "main.Label" && more && (w >> z)) bcc_label.insert(x + " " + z);
  }
  for (const auto& e : events_in(run.out, "entry")) {
    if (e.value("func", "") == "main.Add") gotap_add.insert(joined(e["args"]));
    if (e.value("func", "") == "main.Label") gotap_label.insert(joined(e["args"]));
  }
  EXPECT_EQ(bcc_add, truth_add) << tr_out;
  EXPECT_EQ(bcc_ret, truth_ret) << tr_out;
  EXPECT_EQ(bcc_label, label_words) << tr_out;  // bcc: the bool and the length
  EXPECT_EQ(gotap_add, truth_add) << run.out;
  EXPECT_EQ(gotap_label, truth_label) << run.out;  // gotap: the bool and the string
}

// `goroutines` follows each goroutine's life from libgo's own runtime: in the program with
// libgo linked in, in libgo.so otherwise (eBPF; the trampoline backend runs it there). The
// worker the program starts is created by main.main on the main goroutine (the ids its
// tracebacks print), runs, and exits; every goroutine's changes chain (each leaves the state
// the one before entered); the main goroutine's sleep is a wait with its reason named.
// ptrace places no probe in libgo.so beside the program: it refuses, naming the ways that do.
class GccgoGoroutines : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {
 protected:
  const std::string& backend() const { return std::get<0>(GetParam()); }
  const std::string& flavour() const { return std::get<1>(GetParam()); }
};

// The program's life as `goroutines --json` showed it, checked against its own account.
void expect_life_cycles(const std::string& out, const Truth& t) {
  std::map<int64_t, std::string> state;  // each goroutine's last state
  bool created = false, exited = false, reason = false;
  int worker_changes = 0;
  for (const auto& e : events_in(out)) {
    const std::string kind = e.value("event", "");
    const int64_t goid = e.value("goid", int64_t(-1));
    if (kind == "gcreate") {
      state[goid] = "dead";
      if (goid == t.worker_goid) {
        created = true;
        EXPECT_EQ(e.value("parent_goid", int64_t(-1)), t.main_goid) << e.dump();
        EXPECT_EQ(e.value("created_by", ""), "main.main") << e.dump();
      }
    } else if (kind == "gstate") {
      auto it = state.find(goid);
      if (it != state.end())
        EXPECT_EQ(e.value("from", ""), it->second) << "goroutine " << goid << ": " << e.dump();
      state[goid] = e.value("to", "");
      if (goid == t.worker_goid) ++worker_changes;
      // main.main sleeps once before wg.Wait, whichever goroutine ends first.
      if (goid == t.main_goid && e.value("reason", "") == "sleep") reason = true;
    } else if (kind == "gexit" && goid == t.worker_goid) {
      exited = true;
    }
  }
  EXPECT_TRUE(created) << out;
  EXPECT_TRUE(exited) << out;
  // dead -> runnable -> running, and running -> dead at least.
  EXPECT_GE(worker_changes, 3) << out;
  EXPECT_TRUE(state.count(t.main_goid)) << "the main goroutine was never seen";
  EXPECT_TRUE(reason) << "the main goroutine's sleep was not seen with its reason\n" << out;
}

TEST_P(GccgoGoroutines, LifeCyclesAreTheProgramsOwn) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (ptrace and BPF)";
  if (!file_exists(gotap_binary())) GTEST_SKIP() << gotap_binary() << " is not built";
  if (!file_exists(fixture(flavour()))) GTEST_SKIP() << "no gccgo fixtures (gccgo-12 absent)";
  RunResult r = run_command({gotap_binary(), "goroutines", "--backend", backend(), "--json", "--",
                             fixture(flavour()), std::to_string(kRounds)},
                            60);
  if (backend() == "ptrace" && flavour() != "static") {
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("libgo.so.21 beside the program's own yet: goroutine states of this "
                         "program need --backend ebpf, or -p PID --binary /"),
              std::string::npos)
        << r.err;
    EXPECT_EQ(r.out.find("call "), std::string::npos) << "the program ran: " << r.out;
    return;
  }
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Truth t = truth_of(r.out);
  ASSERT_GT(t.main_goid, 0) << r.out;
  ASSERT_GT(t.worker_goid, 0) << r.out;
  expect_life_cycles(r.out, t);
  if (backend() == "trampoline")
    EXPECT_NE(r.err.find("every probe goes on kernel uprobes"), std::string::npos) << r.err;
}

// "bundled": the program's RUNPATH ($ORIGIN/lib) names its own copy of libgo.so, which ld.so
// loads: the probes go into that copy, not the system's (which gotap once planned, and then
// refused the program for mapping another file).
INSTANTIATE_TEST_SUITE_P(Backends, GccgoGoroutines,
                         ::testing::Combine(::testing::Values("ebpf", "ptrace", "trampoline"),
                                            ::testing::Values("static", "default", "bundled")),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" + std::get<1>(info.param);
                         });

// Attached by pid to a program linked against libgo.so: the probes go into the copy of libgo
// that process maps. The worker it starts once attached is seen from its creation to its exit.
// eBPF probes libgo beside the program, or with libgo's copy as its target (-p PID --binary
// LIB); ptrace, one file per trace, with libgo as its target, given or (`goroutines`, which
// probes none of the program's functions) taken without --binary: before, that was refused.
// The creator, main.main, is then named from the executable.
class GccgoGoroutinesAttached : public ::testing::TestWithParam<std::tuple<std::string, bool>> {};

TEST_P(GccgoGoroutinesAttached, LibgoSoOfThatProcess) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (BPF and ptrace)";
  if (!file_exists(gotap_binary())) GTEST_SKIP() << gotap_binary() << " is not built";
  if (!file_exists(fixture("default"))) GTEST_SKIP() << "no gccgo fixtures (gccgo-12 absent)";
  const auto& [backend, libgo_target] = GetParam();
  std::vector<std::string> after;
  if (libgo_target) after = {"--binary", libgo_of(fixture("default"))};
  const AttachedRun run = run_attached(fixture("default"), kRounds,
                                       {"goroutines", "--backend", backend, "--json"}, after);
  ASSERT_TRUE(run.started) << run.err;
  EXPECT_TRUE(WIFEXITED(run.status) && WEXITSTATUS(run.status) == 0) << run.err;
  const std::string& pout = run.program_out;
  const std::string& out = run.out;
  const Truth t = truth_of(pout);
  ASSERT_GT(t.worker_goid, 0) << pout;
  expect_life_cycles(out, t);
}

INSTANTIATE_TEST_SUITE_P(Backends, GccgoGoroutinesAttached,
                         ::testing::Values(std::tuple{"ebpf", false}, std::tuple{"ebpf", true},
                                           std::tuple{"ptrace", false}, std::tuple{"ptrace", true}),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param)) +
                                  (std::get<1>(info.param) ? "_libgo_target" : "");
                         });

// Structs as parameters and results (tests/fixtures-gccgo/structs), decoded from the fields
// gccgo's DWARF gives: in two integer registers (Point), on the stack (Rect, a struct of
// structs), and through a pointer (*Person, whose target ptrace reads). Each call's values, as
// %v prints them, equal the program's own line. eBPF copies no pointer's target and reads no
// float (the x registers), as documented: Greet's argument is its address, Scale's values raw.
class GccgoStructs : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

// A decoded value as Go's %v prints it (a pointer: its target, as the fixture prints *p).
std::string go_v(const json& v) {
  if (v.is_number_float()) {
    std::ostringstream o;
    o << v.get<double>();
    return o.str();
  }
  if (v.is_object() && v.contains("fields")) {
    std::string out = "{";
    for (const auto& f : v["fields"]) out += (out.size() > 1 ? " " : "") + go_v(f["value"]);
    return out + "}";
  }
  if (v.is_object() && v.contains("elem")) return go_v(v["elem"]);
  return go_text(v);
}

TEST_P(GccgoStructs, ValuesAreTheProgramsOwn) {
  const auto& [backend, flavour] = GetParam();
  if (geteuid() != 0) GTEST_SKIP() << "needs root (ptrace and BPF)";
  if (!file_exists(gotap_binary())) GTEST_SKIP() << gotap_binary() << " is not built";
  const std::string prog = std::string(GOTAP_GCCGO_FIXTURES_DIR) + "/" + flavour + "/structs";
  if (!file_exists(prog)) GTEST_SKIP() << "no gccgo fixture " << prog << " (gccgo-12 absent)";
  RunResult r = run_command({gotap_binary(), "trace", "--backend", backend, "--json", "main.Move",
                             "main.Scale", "main.Area", "main.Greet", "--", prog, "4"},
                            60);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::multiset<std::string> want, got;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("struct ", 0) == 0) want.insert(line.substr(7));
  ASSERT_EQ(want.size(), 16u) << r.out;
  const bool ptrace = backend == "ptrace";
  std::map<int64_t, json> open;  // by goroutine: one call at a time
  for (const json& e : events_in(r.out)) {
    const std::string kind = e.value("event", "");
    const std::string func = e.value("func", "");
    if (kind == "entry") {
      open[e.value("goid", int64_t(-1))] = e;
      continue;
    }
    if (kind != "return") continue;
    const json entry = open[e.value("goid", int64_t(-1))];
    ASSERT_EQ(entry.value("func", ""), func) << e.dump();
    std::string args;
    for (const auto& a : entry["args"]) {
      const json& v = a["value"];
      if (!ptrace && func == "main.Scale") {
        EXPECT_TRUE(v.contains("raw")) << "eBPF reads no float: " << entry.dump();
        continue;
      }
      if (!ptrace && func == "main.Greet") {
        EXPECT_TRUE(v.contains("addr") && !v.contains("elem")) << entry.dump();
        continue;
      }
      args += (args.empty() ? "" : " ") + go_v(v);
    }
    ASSERT_EQ(e["results"].size(), 1u) << e.dump();
    got.insert(func + " " + args + (args.empty() ? "" : " ") + "-> " +
               go_v(e["results"][0]["value"]));
  }
  if (ptrace) {
    EXPECT_EQ(got, want) << r.out;
    return;
  }
  // What eBPF shows of each line: Scale's floats and Greet's Person left out.
  std::multiset<std::string> seen;
  for (std::string w : want) {
    if (w.rfind("main.Scale ", 0) == 0) w = "main.Scale -> {}";
    if (w.rfind("main.Greet ", 0) == 0) w = "main.Greet " + w.substr(w.find("-> "));
    seen.insert(w);
  }
  std::multiset<std::string> got_seen;
  for (std::string g : got)
    got_seen.insert(g.rfind("main.Scale ", 0) == 0 ? "main.Scale -> {}" : g);
  EXPECT_EQ(got_seen, seen) << r.out;
}

INSTANTIATE_TEST_SUITE_P(Backends, GccgoStructs,
                         ::testing::Combine(::testing::Values("ebpf", "ptrace", "trampoline"),
                                            ::testing::Values("static", "default")),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" + std::get<1>(info.param);
                         });

// Interfaces under names of their own (tests/fixtures-gccgo/ifaces: the program's Shape and
// Any, io.Reader): each argument's dynamic type is the one the program printed (%T), read
// through libgo's type descriptors, and its value with it. eBPF names a type whose
// descriptor is in the program's file (libgo's, such as *strings.Reader, only with libgo
// linked in) and copies no pointee.
class GccgoInterfaces : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(GccgoInterfaces, DynamicTypesAreTheProgramsOwn) {
  const std::string& backend = std::get<0>(GetParam());
  const std::string& flavour = std::get<1>(GetParam());
  const std::string prog = std::string(GOTAP_GCCGO_FIXTURES_DIR) + "/" + flavour + "/ifaces";
  if (geteuid() != 0) GTEST_SKIP() << "needs root (ptrace and BPF)";
  if (!file_exists(gotap_binary())) GTEST_SKIP() << gotap_binary() << " is not built";
  if (!file_exists(prog)) GTEST_SKIP() << "no gccgo fixture " << prog << " (gccgo-12 absent)";
  constexpr int kN = 4;
  RunResult r = run_command({gotap_binary(), "trace", "--backend", backend, "--json", "main.Area",
                             "main.Read", "main.Keep", "--", prog, std::to_string(kN)},
                            60);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // "iface main.Area main.Square {3} -> 9", "iface main.Read *strings.Reader 3",
  // "iface main.Keep int 3"
  std::multiset<std::string> want, got;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("iface ", 0) != 0) continue;
    std::istringstream w(line.substr(6));
    std::string func, type, value;
    w >> func >> type >> value;
    if (func == "main.Read" && backend == "ebpf" && flavour == "default") type = "(raw)";
    if (func == "main.Area") value = value.substr(1, value.size() - 2);  // {3}
    if (func == "main.Read") value = "";
    want.insert(func + " " + type + " " + value);
  }
  ASSERT_EQ(want.size(), size_t(3 * kN)) << r.out;
  for (const auto& e : events_in(r.out, "entry")) {
    const json& v = e["args"][0]["value"];
    std::string type = v.value("type", "");
    if (type.empty() && v.contains("raw")) type = "(raw)";
    std::string value;
    const std::string func = e.value("func", "");
    if (func == "main.Area") value = go_text(v["value"]["fields"][0]["value"]);
    if (func == "main.Keep") value = go_text(v["value"]);
    if (func == "main.Read" && backend == "ptrace") {
      // The reader's string: as many x as the round.
      const std::string str = v["value"]["elem"]["fields"][0].value("value", "");
      EXPECT_EQ(str.find_first_not_of('x'), std::string::npos) << e.dump();
    }
    got.insert(func + " " + type + " " + value);
  }
  EXPECT_EQ(got, want) << r.out;
}

INSTANTIATE_TEST_SUITE_P(Backends, GccgoInterfaces,
                         ::testing::Combine(::testing::Values("ebpf", "ptrace"),
                                            ::testing::Values("default", "static")),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" + std::get<1>(info.param);
                         });

// --stack with ptrace: gccgo keeps no frame pointers, and the frames are walked with the
// call frame information (.eh_frame). Every call of main.Add, at its entry and at its return,
// has main.Add, then main.round at the line the program says it called Add from, then the
// function libgo's own traceback says called round: main.main, or the worker goroutine's
// closure (libgo's main.main..func1, main.main.func1 as gotap spells gccgo's nested
// functions, docs/cli.md). With libgo.so and with libgo inside the program.
class GccgoStack : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (ptrace)";
    if (!file_exists(gotap_binary())) GTEST_SKIP() << gotap_binary() << " is not built";
    bin = fixture(GetParam());
    if (!file_exists(bin)) GTEST_SKIP() << "no gccgo fixture " << bin << " (gccgo-12 absent)";
  }
  std::string bin;
};

TEST_P(GccgoStack, FramesAreTheProgramsOwnTraceback) {
  RunResult r = run_command({gotap_binary(), "trace", "--backend", "ptrace", "--json", "--stack",
                             "4", "main.Add", "--", bin, "6"},
                            120);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::map<int64_t, std::pair<int, std::string>> truth;  // round: Add's line, round's caller
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    int64_t round = 0;
    int at = 0;
    char caller[256] = {};
    if (sscanf(line.c_str(), "stack %" SCNd64 " %d %255s", &round, &at, caller) != 3) continue;
    std::string name = caller;
    if (size_t dd = name.find("..func"); dd != std::string::npos) name.erase(dd, 1);
    truth[round] = {at, name};
  }
  ASSERT_EQ(truth.size(), 12u) << r.out;
  std::set<std::string> callers;
  size_t checked = 0;
  for (const char* kind : {"entry", "return"}) {
    for (const json& e : events_in(r.out, kind)) {
      SCOPED_TRACE(e.dump());
      ASSERT_TRUE(e.contains("stack"));
      const json& st = e["stack"];
      ASSERT_GE(st.size(), 3u);
      EXPECT_LE(st.size(), 4u);
      EXPECT_EQ(st[0].value("func", ""), "main.Add");
      EXPECT_EQ(st[1].value("func", ""), "main.round");
      EXPECT_TRUE(st[1].value("file", "").ends_with("main.go"));
      if (std::string(kind) == "entry") {
        const int64_t round = e["args"][0]["value"].get<int64_t>();
        ASSERT_TRUE(truth.count(round)) << round;
        EXPECT_EQ(st[1].value("line", 0), truth[round].first);
        EXPECT_EQ(st[2].value("func", ""), truth[round].second);
        callers.insert(truth[round].second);
      } else {
        EXPECT_EQ(st[1].value("line", 0), truth.begin()->second.first);
      }
      ++checked;
    }
  }
  EXPECT_EQ(checked, 24u) << r.out;
  EXPECT_EQ(callers.size(), 2u) << "main.main and the worker's closure";
}

// Across a split stack's segments: main.Deep's 13,000 levels on a goroutine outgrow its first
// segment, and each new segment is entered through libgcc's __morestack, whose call frame
// information leads back to the segment before. Every level is a frame, between main.Leaf
// and the goroutine's closure.
TEST_P(GccgoStack, EveryLevelOfASplitStack) {
  RunResult r = run_command({gotap_binary(), "trace", "--backend", "ptrace", "--json", "--stack",
                             "14000", "main.Leaf", "--", bin, "13000", "deep"},
                            120);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_NE(r.out.find("deep 13000\n"), std::string::npos) << r.err;
  const auto entries = events_in(r.out, "entry");
  ASSERT_EQ(entries.size(), 1u) << r.err;
  const json& st = entries[0]["stack"];
  size_t deep = 0, morestack = 0;
  std::vector<std::string> others;
  for (const json& f : st) {
    const std::string name = f.value("func", "");
    if (name == "main.Deep")
      ++deep;
    else if (name == "__morestack")
      ++morestack;
    else
      others.push_back(name);
  }
  EXPECT_EQ(deep, 13001u);
  EXPECT_GT(morestack, 0u) << "the recursion stayed in one segment: the walk crossed none";
  ASSERT_GE(others.size(), 2u);
  EXPECT_EQ(others[0], "main.Leaf");
  EXPECT_EQ(others[1], "main.main.func1");
}

INSTANTIATE_TEST_SUITE_P(Flavours, GccgoStack, ::testing::Values("default", "static"));

// What needs libgo's stacks is refused before anything is probed: one line, exit 2. --stack
// is refused on the backends that walk stacks in BPF (auto chooses eBPF).
TEST(GccgoRefusals, WhyAndStack) {
  if (!file_exists(gotap_binary())) GTEST_SKIP() << gotap_binary() << " is not built";
  if (!file_exists(fixture("default"))) GTEST_SKIP() << "no gccgo fixtures (gccgo-12 absent)";
  const std::string bin = fixture("default");
  for (const auto& argv : std::vector<std::vector<std::string>>{
           {gotap_binary(), "trace", "--why", "main.Add", "--", bin, "1"},
           {gotap_binary(), "trace", "--stack", "4", "main.Add", "--", bin, "1"},
           {gotap_binary(), "trace", "--stack", "4", "--backend", "ebpf", "main.Add", "--", bin,
            "1"},
           {gotap_binary(), "trace", "--stack", "4", "--backend", "trampoline", "main.Add", "--",
            bin, "1"}}) {
    RunResult r = run_command(argv, 30);
    SCOPED_TRACE(argv[1] + " " + argv[2]);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_EQ(r.err.rfind("gotap: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find("gccgo"), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_EQ(r.out.find("call "), std::string::npos) << "the program ran: " << r.out;
  }
}

}  // namespace
}  // namespace gotap::testing
