// End-to-end tests of the ptrace backend, driving the Tracer directly on the Go fixtures:
// values decoded at entry and return equal what the fixture printed (args), traced programs
// print exactly what they print untraced (stress), and an attached process keeps running
// after detach (demo). Root only (ptrace of launched and attached processes).
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "backends/ptrace/tracer.h"
#include "core/plan/go_binary.h"
#include "tests/unit/fixtures.h"

namespace gotap {
namespace {

using nlohmann::json;
using testing::all_fixtures;
using testing::expect_contains;
using testing::Fixture;

class CaptureSink : public EventSink {
 public:
  void emit(const Event& ev) override { events.push_back(ev); }
  std::vector<json> events;
};

struct TraceRun {
  bool ok = false;
  std::string error;
  std::string stdout_text;
  std::vector<json> events;
};

// Runs the tracer with the tracee's stdout captured in a file.
TraceRun trace(const std::string& path, const std::vector<std::string>& patterns,
               TraceOptions opts) {
  TraceRun out;
  auto bin = GoBinary::open(path);
  if (!bin) {
    out.error = bin.error().what();
    return out;
  }
  auto plan = (*bin)->plan(patterns, PlanOptions{});
  if (!plan) {
    out.error = plan.error().what();
    return out;
  }
  char tmpl[] = "/tmp/gotap-ptrace-test-XXXXXX";
  int fd = mkstemp(tmpl);
  std::fflush(stdout);
  int saved = dup(1);
  dup2(fd, 1);
  close(fd);
  CaptureSink sink;
  stop_requested().store(false);
  ptrace::Tracer t(*plan, opts, sink);
  auto r = t.run();
  std::fflush(stdout);
  dup2(saved, 1);
  close(saved);
  out.stdout_text = testing::read_file(tmpl);
  unlink(tmpl);
  out.ok = r.ok();
  if (!r.ok()) out.error = r.error().what();
  out.events = std::move(sink.events);
  return out;
}

std::string run_untraced(const std::vector<std::string>& argv) {
  int p[2];
  if (pipe(p) != 0) return "";
  pid_t c = fork();
  if (c == 0) {
    dup2(p[1], 1);
    close(p[0]);
    std::vector<char*> a;
    for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
    a.push_back(nullptr);
    execv(a[0], a.data());
    _exit(127);
  }
  close(p[1]);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(p[0], buf, sizeof buf)) > 0) out.append(buf, n);
  close(p[0]);
  waitpid(c, nullptr, 0);
  return out;
}

std::vector<json> lines_with(const std::string& text, const char* key) {
  std::vector<json> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] != '{') continue;
    json j = json::parse(line, nullptr, false);
    if (!j.is_discarded() && j.contains(key)) out.push_back(j);
  }
  return out;
}

std::vector<json> events_of(const std::vector<json>& evs, const std::string& kind) {
  std::vector<json> out;
  for (const auto& e : evs)
    if (e.value("event", "") == kind) out.push_back(e);
  return out;
}

// A struct field's value by name, through pointers, whatever shape the struct's JSON has
// (an object of fields, or a list of {"name", "value"}); -1 when it is not there.
int64_t field_of(const json& v, const std::string& name) {
  if (v.is_object()) {
    if (v.contains("elem")) return field_of(v["elem"], name);
    if (v.contains(name) && v[name].is_number_integer()) return v[name].get<int64_t>();
    for (const auto& [k, x] : v.items())
      if (x.is_array() || x.is_object())
        if (int64_t got = field_of(x, name); got >= 0) return got;
  } else if (v.is_array()) {
    for (const auto& x : v) {
      if (x.is_object() && x.value("name", "") == name && x.contains("value") &&
          x["value"].is_number_integer())
        return x["value"].get<int64_t>();
      if (int64_t got = field_of(x, name); got >= 0) return got;
    }
  }
  return -1;
}

class PtraceTrace : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (ptrace)";
  }
};

TEST_F(PtraceTrace, AcceptanceValuesEqualGroundTruth) {
  auto fx = all_fixtures("args");
  if (fx.empty()) GTEST_SKIP() << "no args fixtures built (tests/tools/build-fixtures.sh)";
  for (const Fixture& f : fx) {
    SCOPED_TRACE(f.label());
    TraceOptions o;
    o.target.argv = {f.path};
    o.max_str = 256;
    TraceRun r = trace(f.path, {"main.Acceptance"}, o);
    ASSERT_TRUE(r.ok) << r.error;
    auto gt = lines_with(r.stdout_text, "gt");
    auto entries = events_of(r.events, "entry");
    auto returns = events_of(r.events, "return");
    std::vector<json> calls, rets;
    for (auto& g : gt)  // the fixture prints other functions' ground truth too
      if (g.value("func", "") == "main.Acceptance") (g["gt"] == "call" ? calls : rets).push_back(g);
    ASSERT_FALSE(calls.empty()) << r.stdout_text;
    ASSERT_EQ(entries.size(), calls.size());
    ASSERT_EQ(returns.size(), rets.size());
    EXPECT_TRUE(events_of(r.events, "unfinished").empty());
    for (size_t i = 0; i < calls.size(); ++i) {
      EXPECT_EQ(entries[i]["goid"], returns[i]["goid"]);
      EXPECT_TRUE(returns[i].contains("duration_ns"));
      const json& want = calls[i]["args"];
      const json& got = entries[i]["args"];
      if (f.flavour == "stripped") {
        // No DWARF: raw words; the int argument is the first word, and the error's dynamic
        // type comes from the runtime type descriptors.
        ASSERT_FALSE(got.empty());
        EXPECT_EQ(got[0]["value"]["raw"][0], fmt::format("{:#x}", want[0]["value"].get<int64_t>()));
        bool found_err_type = false;
        for (const auto& a : got)
          if (a["value"].value("type", "") == "*errors.errorString") found_err_type = true;
        if (!want[4]["value"].is_null()) EXPECT_TRUE(found_err_type) << got;
        continue;
      }
      ASSERT_EQ(got.size(), want.size());
      for (size_t k = 0; k < want.size(); ++k) {
        EXPECT_EQ(got[k]["name"], want[k]["name"]);
        EXPECT_EQ(got[k]["type"], want[k]["type"]);
        expect_contains(want[k]["value"], got[k]["value"],
                        "call" + std::to_string(i) + "." + want[k]["name"].get<std::string>());
      }
      const json& wr = rets[i]["results"];
      const json& gr = returns[i]["results"];
      ASSERT_EQ(gr.size(), wr.size());
      for (size_t k = 0; k < wr.size(); ++k)
        expect_contains(wr[k]["value"], gr[k]["value"], "ret" + std::to_string(i));
    }
    auto sum = events_of(r.events, "summary");
    ASSERT_EQ(sum.size(), 1u);
    EXPECT_EQ(sum[0]["backend"], "ptrace");
    EXPECT_EQ(sum[0]["lost"], 0);
    EXPECT_EQ(sum[0]["exit_code"], 0);
  }
}

// Count mode across stack growth: main.grow's stack check calls morestack, after which the
// entry probe (when the plan puts it where it re-fires) is hit again for the same call.
// The count must be the number of calls the fixture printed, as eBPF counts them
// (EbpfBackend.CountExactAcrossMorestack).
TEST_F(PtraceTrace, CountExactAcrossMorestack) {
  size_t refiring = 0, checked = 0;
  for (const Fixture& f : all_fixtures("latency")) {
    if (f.flavour != "default" && f.flavour != "stripped" && f.flavour != "pie" &&
        f.flavour != "cgo")
      continue;
    SCOPED_TRACE(f.label());
    auto bin = GoBinary::open(f.path);
    ASSERT_TRUE(bin.ok());
    auto plan = (*bin)->plan({"main.grow"}, PlanOptions{});
    ASSERT_TRUE(plan.ok() && plan->funcs.size() == 1u);
    refiring += plan->funcs[0].entry_refires;
    TraceOptions o;
    o.mode = Mode::Count;
    o.target.argv = {f.path, "grow", "4"};
    TraceRun r = trace(f.path, {"main.grow"}, o);
    ASSERT_TRUE(r.ok) << r.error;
    uint64_t want = 0;
    std::regex gt("GT main.grow depth=(\\d+) -> .*");
    std::istringstream in(r.stdout_text);
    for (std::string l; std::getline(in, l);) {
      std::smatch m;
      if (std::regex_match(l, m, gt)) want += std::stoull(m[1]) + 1;
    }
    ASSERT_GT(want, 0u) << r.stdout_text;
    auto counts = events_of(r.events, "count");
    ASSERT_EQ(counts.size(), 1u);
    EXPECT_EQ(counts[0]["count"].get<uint64_t>(), want);
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "no latency fixtures built";
  // The case this guards needs a plan that probes main.grow where its entry re-fires (Go
  // 1.19's do); the counts above were checked either way.
  if (refiring == 0) GTEST_SKIP() << "no fixture's plan probes main.grow where it re-fires";
}

// Count stops a thread once per call: a function whose returns tell nothing the entry does not
// (no error result, no condition at the return) has no int3 on its RETs. Each stop is the
// program's time (tens of us here); trace still stops at both ends. An entry probe that
// refires after morestack (Go 1.19's stack-check jump) is taken back at the morestack call:
// two more stops for each time the stack grows there, which this loop's shallow stack does
// at most a few times.
TEST_F(PtraceTrace, CountStopsOncePerCall) {
  size_t checked = 0;
  for (const Fixture& f : all_fixtures("latency")) {
    if (f.flavour != "default" && f.flavour != "stripped") continue;
    SCOPED_TRACE(f.label());
    auto bin = GoBinary::open(f.path);
    ASSERT_TRUE(bin.ok());
    auto plan = (*bin)->plan({"main.work"}, PlanOptions{});
    ASSERT_TRUE(plan.ok() && plan->funcs.size() == 1u);
    const FuncPlan& fp = plan->funcs[0];
    if (fp.ret_sites.empty() || !fp.entry_probe) continue;
    if (fp.entry_refires) {
      ASSERT_NE(fp.morestack_call, 0u);
    }
    const uint64_t regrowths = fp.entry_refires ? 4 : 0;
    constexpr uint64_t kCalls = 300;
    for (Mode mode : {Mode::Count, Mode::Trace}) {
      TraceOptions o;
      o.mode = mode;
      o.target.argv = {f.path, "bench", std::to_string(kCalls)};
      TraceRun r = trace(f.path, {"main.work"}, o);
      ASSERT_TRUE(r.ok) << r.error;
      auto sum = events_of(r.events, "summary");
      ASSERT_EQ(sum.size(), 1u);
      if (mode == Mode::Count) {
        auto counts = events_of(r.events, "count");
        ASSERT_EQ(counts.size(), 1u);
        EXPECT_EQ(counts[0]["count"].get<uint64_t>(), kCalls);
        EXPECT_GE(sum[0]["hits"].get<uint64_t>(), kCalls);
        EXPECT_LE(sum[0]["hits"].get<uint64_t>(), kCalls + 2 * regrowths);
      } else {
        EXPECT_EQ(events_of(r.events, "return").size(), kCalls);
        EXPECT_GE(sum[0]["hits"].get<uint64_t>(), 2 * kCalls);
        EXPECT_LE(sum[0]["hits"].get<uint64_t>(), 2 * kCalls + regrowths);
      }
    }
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "no latency fixtures built";
}

// A site that two functions share (a wrapper's RET that is also its target's, one inlined copy
// that starts where another does) is one int3 with two roles. It is placed; it was reported as
// "N of M probe sites not placed (first: )", a warning with no reason and nothing wrong.
TEST_F(PtraceTrace, SharedSitesAreNotReportedUnplaced) {
  size_t runs = 0;
  for (const Fixture& f : all_fixtures("args")) {
    if (f.flavour != "default") continue;
    SCOPED_TRACE(f.path);
    // These packages share sites in the args fixture (inlined copies that start where
    // another function's code does, reflect's among them).
    const std::string pattern = "re:^(main|strings|strconv|fmt|reflect)\\.";
    auto bin = GoBinary::open(f.path);
    ASSERT_TRUE(bin);
    auto plan = (*bin)->plan({pattern}, PlanOptions{});
    ASSERT_TRUE(plan);
    std::map<uint64_t, int> uses;
    for (const auto& fn : plan->funcs) {
      std::set<uint64_t> sites(fn.ret_sites.begin(), fn.ret_sites.end());
      if (fn.entry_probe) sites.insert(fn.entry_probe);
      if (fn.inline_probed)
        for (const auto& in : fn.inline_sites) sites.insert(in.pc);
      for (uint64_t s : sites) ++uses[s];
    }
    size_t shared = 0;
    for (const auto& [pc, n] : uses) shared += n > 1;
    if (shared == 0) continue;  // nothing shared in this build: nothing to show
    testing::RunResult r = testing::run_command(
        {testing::gotap_binary(), "count", "--backend=ptrace", pattern, "--", f.path}, 180);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.err.find("not placed"), std::string::npos) << shared << " shared sites\n" << r.err;
    EXPECT_NE(r.out.find("main.Acceptance"), std::string::npos) << r.out;
    ++runs;
  }
  if (runs == 0) GTEST_SKIP() << "no args fixture with shared sites built";
}

TEST_F(PtraceTrace, StressOutputUnchanged) {
  auto fx = all_fixtures("stress");
  if (fx.empty()) GTEST_SKIP() << "no stress fixtures built";
  for (const Fixture& f : fx) {
    if (f.flavour != "default" && f.flavour != "cgo") continue;
    SCOPED_TRACE(f.label());
    std::vector<std::string> argv = {f.path, "-goroutines", "300", "-depth", "1500"};
    std::string want = run_untraced(argv);
    ASSERT_NE(want.find("done"), std::string::npos) << want;
    TraceOptions o;
    o.target.argv = argv;
    TraceRun r = trace(f.path, {"main.grow", "main.leaf", "main.mayPanic", "main.onSignal"}, o);
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.stdout_text, want);
    auto entries = events_of(r.events, "entry");
    auto returns = events_of(r.events, "return");
    // Exact calls, from tests/fixtures/stress/main.go with these flags: grow(1500) is 1501
    // calls, and goroutine g calls grow(g%50) (g%50+1 calls) and leaf once; mayPanic runs
    // for i = 1..30 and calls leaf when i%3 != 0; onSignal handles 5 signals.
    const int goroutines = 300, depth = 1500;
    uint64_t grows = depth + 1, leaves = goroutines, panics = 30;
    for (int g = 0; g < goroutines; ++g) grows += g % 50 + 1;
    for (int i = 1; i <= 30; ++i) leaves += i % 3 != 0;
    std::map<std::string, uint64_t> per_func;
    for (const auto& e : entries) ++per_func[e["func"]];
    EXPECT_EQ(per_func["main.grow"], grows);
    EXPECT_EQ(per_func["main.leaf"], leaves);
    EXPECT_EQ(per_func["main.mayPanic"], panics);
    EXPECT_EQ(per_func["main.onSignal"], 5u);
    EXPECT_EQ(entries.size(), grows + leaves + panics + 5);
    EXPECT_EQ(entries.size(), returns.size());
    for (const auto& ret : returns) {
      // Every return found its entry, across stack copies and thread migrations.
      ASSERT_TRUE(ret.contains("duration_ns")) << ret;
    }
  }
}

// An inlined call's probe sits on its call-site mark, in the caller's frame, so the stack of
// its entry must still name the inlined function first, then the function it ran in, then
// the caller of that: main.notFound in main.stripPrefix.func1, called from main.main.
TEST_F(PtraceTrace, InlinedEntryStackStartsWithTheInlinedFunction) {
  auto fx = all_fixtures("inlbranch");
  if (fx.empty()) GTEST_SKIP() << "no inlbranch fixtures built";
  for (const Fixture& f : fx) {
    if (f.flavour != "default" && f.flavour != "stripped") continue;
    SCOPED_TRACE(f.label());
    TraceOptions o;
    o.target.argv = {f.path, "2", "1"};  // one request answered by notFound
    o.stack_depth = 4;
    TraceRun r = trace(f.path, {"main.notFound"}, o);
    ASSERT_TRUE(r.ok) << r.error;
    auto entries = events_of(r.events, "entry");
    ASSERT_EQ(entries.size(), 1u);
    const json& st = entries[0]["stack"];
    ASSERT_GE(st.size(), 3u) << st;
    EXPECT_EQ(st[0]["func"], "main.notFound");
    EXPECT_EQ(st[0].value("inlined", false), true);
    EXPECT_EQ(st[1]["func"], "main.stripPrefix.func1");
    EXPECT_EQ(st[2]["func"], "main.main");
    EXPECT_LE(st.size(), 4u);
  }
}

TEST_F(PtraceTrace, AttachedProcessKeepsRunningAfterDetach) {
  auto fx = all_fixtures("demo");
  if (fx.empty()) GTEST_SKIP() << "no demo fixtures built";
  for (const Fixture& f : fx) {
    if (f.flavour != "default") continue;
    SCOPED_TRACE(f.label());
    std::vector<std::string> argv = {f.path, "-n", "400", "-sleep", "2ms"};
    std::string want = run_untraced(argv);
    int p[2];
    ASSERT_EQ(pipe(p), 0);
    pid_t c = fork();
    if (c == 0) {
      dup2(p[1], 1);
      close(p[0]);
      std::vector<char*> a;
      for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
      a.push_back(nullptr);
      execv(a[0], a.data());
      _exit(127);
    }
    close(p[1]);
    usleep(100 * 1000);
    TraceOptions o;
    o.target.pid = c;
    o.duration_s = 0.3;
    TraceRun r = trace(f.path, {"main.processOrder"}, o);
    ASSERT_TRUE(r.ok) << r.error;
    auto entries = events_of(r.events, "entry");
    // 0.3 s of a 2 ms loop: far more than a handful of calls were traced.
    EXPECT_GE(entries.size(), 20u);
    std::vector<int64_t> ids;
    for (const auto& e : entries) ids.push_back(field_of(e["args"][0]["value"], "ID"));
    auto sum = events_of(r.events, "summary");
    ASSERT_EQ(sum.size(), 1u);
    EXPECT_EQ(sum[0]["ended_by"], "stop");
    std::string got;
    char buf[4096];
    ssize_t n;
    while ((n = read(p[0], buf, sizeof buf)) > 0) got.append(buf, n);
    close(p[0]);
    int st = 0;
    ASSERT_EQ(waitpid(c, &st, 0), c);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "status " << st;
    EXPECT_EQ(got, want);
    // The traced calls are the orders the program printed, one after another, each once.
    for (size_t i = 0; i < ids.size(); ++i) {
      EXPECT_NE(got.find("order id=" + std::to_string(ids[i]) + " "), std::string::npos) << ids[i];
      if (i) EXPECT_EQ(ids[i], ids[i - 1] + 1) << "calls traced out of order or twice";
    }
  }
}

}  // namespace
}  // namespace gotap
