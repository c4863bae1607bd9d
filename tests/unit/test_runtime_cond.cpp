// --if, --slower and --errors on a running program, once per backend, against ground truth:
// tests/fixtures/cond prints each call of main.handle (its arguments, whether it failed and
// with which dynamic type, how long it slept, its goroutine) before it returns. A condition
// must select exactly the calls the same predicate, applied to that ground truth, selects:
// in trace (each selected call's entry and return, nothing else), count and latency. Both
// backends are held to the same ground truth, so they select the same calls (parity).
// The live server test makes chosen requests fail or be slow and checks --errors and
// --slower pick exactly those.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <set>
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
using Pred = std::function<bool(const json&)>;

struct CondCase {
  std::vector<std::string> flags;
  Pred want;
};

// The unstripped builds: conditions need the parameters' names and types.
std::vector<Fixture> cond_fixtures() {
  std::vector<Fixture> out;
  for (auto& fx : all_fixtures("cond"))
    if (fx.flavour.find("stripped") == std::string::npos) out.push_back(fx);
  return out;
}

const std::vector<CondCase>& cases() {
  static const std::vector<CondCase> c = {
      {{"--if", "seq == 5"}, [](const json& g) { return g["seq"] == 5; }},
      {{"--if", "seq >= 3 && seq < 9 && !(seq == 4)"},
       [](const json& g) { return g["seq"] >= 3 && g["seq"] < 9 && g["seq"] != 4; }},
      {{"--if", "name == \"beta\""}, [](const json& g) { return g["name"] == "beta"; }},
      {{"--if", "hasPrefix(name, \"gam\")"},
       [](const json& g) { return g["name"].get<std::string>().rfind("gam", 0) == 0; }},
      {{"--if", "contains(name, \"lt\")"},
       [](const json& g) { return g["name"].get<std::string>().find("lt") != std::string::npos; }},
      {{"--if", "len(name) > 5"},
       [](const json& g) { return g["name"].get<std::string>().size() > 5; }},
      {{"--if", "o == nil"}, [](const json& g) { return g["nil_order"] == true; }},
      {{"--if", "o != nil && o.ID >= 100"},
       [](const json& g) { return g["nil_order"] == false && g["id"] >= 100; }},
      {{"--if", "o.Customer == \"acme\""},
       [](const json& g) { return g["nil_order"] == false && g["customer"] == "acme"; }},
      {{"--if", "goid == 1"}, [](const json& g) { return g["goid"] == 1; }},
      {{"--errors"}, [](const json& g) { return g["err"] != ""; }},
      {{"--if", "~r1 == nil"}, [](const json& g) { return g["err"] == ""; }},
      {{"--if", "type(~r1) == \"*fs.PathError\""},
       [](const json& g) { return g["errtype"] == "*fs.PathError"; }},
      {{"--if", "type(~r1) == \"*errors.errorString\""},
       [](const json& g) { return g["errtype"] == "*errors.errorString"; }},
      {{"--slower", "20ms"}, [](const json& g) { return g["sleep_ms"] > 0; }},
      {{"--if", "seq < 12 || duration > 20ms"},
       [](const json& g) { return g["seq"] < 12 || g["sleep_ms"] > 0; }},
      {{"--errors", "--if", "len(name) < 6"},
       [](const json& g) { return g["err"] != "" && g["name"].get<std::string>().size() < 6; }},
      {{"--if", "o.Customer == name || (seq > 20 && contains(o.Customer, \"ec\"))"},
       [](const json& g) {
         return g["nil_order"] == false && (g["customer"] == g["name"] ||
                                            (g["seq"] > 20 && g["customer"].get<std::string>().find(
                                                                  "ec") != std::string::npos));
       }},
  };
  return c;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : " ") + x;
  return s;
}

class Conditions : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (ptrace and BPF)";
    if (!file_exists(gotap_binary())) GTEST_SKIP() << gotap_binary() << " is not built";
    fixtures_ = cond_fixtures();
    if (fixtures_.empty()) GTEST_SKIP() << "no cond fixture built in " << fixtures_dir();
  }

  RunResult gotap(const std::string& cmd, const std::vector<std::string>& flags, const Fixture& fx,
                  const std::vector<std::string>& extra = {}) {
    std::vector<std::string> argv = {gotap_binary(), cmd, "--backend", GetParam(), "--json"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.insert(argv.end(), extra.begin(), extra.end());
    argv.push_back("main.handle");
    argv.push_back("--");
    argv.push_back(fx.path);
    argv.push_back(std::to_string(kCalls));
    return run_command(argv, 120);
  }

  static constexpr int kCalls = 32;
  std::vector<Fixture> fixtures_;
};

// The fixture's {"gt":"call",...} lines.
std::vector<json> events_in_gt(const std::string& out) {
  std::vector<json> v;
  size_t at = 0;
  while (at < out.size()) {
    size_t nl = out.find('\n', at);
    if (nl == std::string::npos) nl = out.size();
    std::string line = out.substr(at, nl - at);
    at = nl + 1;
    if (line.rfind("{\"", 0) != 0) continue;
    json j = json::parse(line, nullptr, false);
    if (!j.is_discarded() && j.value("gt", "") == "call") v.push_back(std::move(j));
  }
  return v;
}

// The seq of each ground-truth call the predicate selects.
std::multiset<int64_t> wanted(const std::string& out, const Pred& p) {
  std::multiset<int64_t> s;
  for (const auto& line : events_in_gt(out))
    if (p(line)) s.insert(line["seq"].get<int64_t>());
  return s;
}

TEST_P(Conditions, TraceSelectsExactlyTheCallsOfTheGroundTruth) {
  int compared = 0;
  for (size_t f = 0; f < fixtures_.size(); ++f) {
    const Fixture& fx = fixtures_[f];
    for (size_t i = 0; i < cases().size(); ++i) {
      // Every case on the first and the last build, every fourth on the builds between.
      if (f != 0 && f + 1 != fixtures_.size() && i % 4 != 0) continue;
      const CondCase& c = cases()[i];
      SCOPED_TRACE(fx.label() + ": " + joined(c.flags));
      RunResult r = gotap("trace", c.flags, fx);
      ASSERT_EQ(r.exit_code, 0) << r.err;
      std::multiset<int64_t> got;
      size_t returns = 0;
      for (const auto& ev : events_in(r.out)) {
        if (ev["event"] == "entry") {
          ASSERT_EQ(ev["func"], "main.handle");
          got.insert(ev["args"][0]["value"].get<int64_t>());
        }
        if (ev["event"] == "return") ++returns;
        ASSERT_NE(ev["event"], "unfinished") << ev.dump();
      }
      auto want = wanted(r.out, c.want);
      ASSERT_EQ(wanted(r.out, [](const json&) { return true; }).size(), size_t(kCalls));
      EXPECT_EQ(got, want);
      EXPECT_EQ(returns, want.size());
      // The trampoline backend decides these on its records: no function goes on uprobes.
      if (GetParam() == "trampoline") {
        const auto sum = events_in(r.out, "summary");
        ASSERT_EQ(sum.size(), 1u) << r.out;
        EXPECT_FALSE(sum[0].contains("uprobes")) << sum[0].dump() << "\n" << r.err;
      }
      ++compared;
    }
  }
  EXPECT_GT(compared, 0);
}

// Each selected call counted, and `failed` the selected calls that returned an error. The
// trampoline backend decides them on its jumps' records (call_tally.h): nothing on uprobes.
TEST_P(Conditions, CountAndLatencyCountTheSelectedCalls) {
  for (size_t f = 0; f < fixtures_.size(); ++f) {
    const Fixture& fx = fixtures_[f];
    for (size_t i : {0, 6, 8, 10, 12, 14, 15, 16, 17}) {
      if (f != 0 && f + 1 != fixtures_.size() && i != 10) continue;
      const CondCase& c = cases()[i];
      for (const std::string cmd : {"count", "latency"}) {
        SCOPED_TRACE(fx.label() + ": " + cmd + " " + joined(c.flags));
        RunResult r = gotap(cmd, c.flags, fx);
        ASSERT_EQ(r.exit_code, 0) << r.err;
        ASSERT_EQ(wanted(r.out, [](const json&) { return true; }).size(), size_t(kCalls));
        const auto want = wanted(r.out, c.want);
        const auto failed =
            wanted(r.out, [&](const json& g) { return c.want(g) && g["err"] != ""; });
        auto ev = events_in(r.out, cmd);
        // No call selected: no row.
        if (want.empty()) {
          EXPECT_TRUE(ev.empty()) << r.out;
        } else {
          ASSERT_EQ(ev.size(), 1u) << r.out;
          EXPECT_EQ(ev[0]["count"].get<size_t>(), want.size());
          ASSERT_TRUE(ev[0].contains("failed")) << ev[0].dump();
          EXPECT_EQ(ev[0]["failed"].get<size_t>(), failed.size()) << ev[0].dump();
        }
        if (GetParam() == "trampoline") {
          const auto sum = events_in(r.out, "summary");
          ASSERT_EQ(sum.size(), 1u) << r.out;
          EXPECT_FALSE(sum[0].contains("uprobes")) << sum[0].dump() << "\n" << r.err;
          EXPECT_EQ(sum[0].value("lost", -1), 0) << sum[0].dump();
        }
      }
    }
  }
}

TEST_P(Conditions, ExpressionErrorsExitTwoBeforeLaunching) {
  const Fixture& fx = fixtures_[0];
  struct Bad {
    std::vector<std::string> flags;
    std::string says;
  };
  const std::vector<Bad> bad = {
      {{"--if", "o.ID == \"x\""}, "column 9: o.ID is int: compare it with an integer"},
      {{"--if", "seq =="}, "column 7: expected an operand"},
      {{"--if", "nosuch > 1"},
       "column 1: no probed function has a parameter or result named "
       "nosuch"},
      {{"--if", "o.Nope == 1"}, "has no field Nope"},
      {{"--if", "name == seq"}, "column 9: cannot compare name (string) with seq (int)"},
      {{"--if", "seq[0] == 1"},
       "column 1: seq is int: only slices, arrays and maps can be indexed"},
      {{"--slower", "soon"}, "--slower: bad duration 'soon'"},
  };
  for (const auto& b : bad) {
    SCOPED_TRACE(joined(b.flags));
    RunResult r = gotap("trace", b.flags, fx);
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find(b.says), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    // Nothing ran: the fixture printed no call.
    EXPECT_EQ(r.out.find("\"gt\""), std::string::npos) << r.out;
  }
}

// A live HTTP server: requests whose seq makes main.handle fail, or sleep, are exactly what
// --errors and --slower report, as the requests are made.
TEST_P(Conditions, LiveServerErrorsAndSlowRequests) {
  const Fixture& fx = fixtures_.back();
  for (const std::vector<std::string> flags :
       {std::vector<std::string>{"--errors"}, std::vector<std::string>{"--slower", "20ms"}}) {
    SCOPED_TRACE(joined(flags));
    const int port = free_port();
    const int n = 16;
    std::vector<std::string> argv = {gotap_binary(), "trace", "--backend", GetParam(), "--json"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.insert(argv.end(), {"main.handle", "--", fx.path, "serve",
                             "127.0.0.1:" + std::to_string(port), std::to_string(n)});
    Child g = spawn(argv);
    std::string err = read_until(g.err, "Tracing", 30000);
    ASSERT_NE(err.find("Tracing"), std::string::npos) << err;
    std::string out = read_until(g.out, "listening", 30000);
    std::set<int64_t> failed, slow;
    for (int seq = 0; seq < n; ++seq) {
      auto resp = http_get(port, "/work?seq=" + std::to_string(seq));
      ASSERT_TRUE(resp);
      if (resp->find(" 500 ") != std::string::npos) failed.insert(seq);
      if (seq % 8 == 1) slow.insert(seq);
    }
    out += read_all(g.out);
    int st = 0;
    waitpid(g.pid, &st, 0);
    close(g.out);
    close(g.err);
    ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << out;
    std::set<int64_t> got;
    for (const auto& ev : events_in(out, "entry"))
      got.insert(ev["args"][0]["value"].get<int64_t>());
    EXPECT_FALSE(failed.empty());
    EXPECT_EQ(got, flags[0] == "--errors" ? failed : slow);
    // The trampoline backend decides these itself, on its jumps' records: nothing on uprobes.
    if (GetParam() == "trampoline") {
      const auto sums = events_in(out, "summary");
      ASSERT_EQ(sums.size(), 1u) << out;
      EXPECT_EQ(sums[0].value("not_patched", -1), 0) << sums[0];
      EXPECT_FALSE(sums[0].contains("uprobes")) << sums[0];
    }
  }
}

// What --prometheus serves counts and times only the selected calls.
TEST_P(Conditions, PrometheusCountsOnlyTheSelectedCalls) {
  const Fixture& fx = fixtures_.back();
  const int port = free_port();
  Child g = spawn({gotap_binary(), "trace", "--backend", GetParam(), "--json", "--errors",
                   "--prometheus", "127.0.0.1:" + std::to_string(port), "--prometheus-linger", "5",
                   "main.handle", "--", fx.path, std::to_string(kCalls)});
  std::string out = read_until(g.out, "\"seq\":" + std::to_string(kCalls - 1) + ",", 30000);
  const size_t want = wanted(out, [](const json& gt) { return gt["err"] != ""; }).size();
  const std::string calls = "gotap_calls_total{binary=\"cond\",pid=\"";
  std::string seen;
  // 20 s at most, however slowly a server at that port answers.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  for (int i = 0; i < 200 && std::chrono::steady_clock::now() < until; ++i) {
    auto r = http_get(port, "/metrics");
    size_t at = r ? r->find(calls) : std::string::npos;
    if (at != std::string::npos) {
      size_t sp = r->find("} ", at);
      seen = r->substr(sp + 2, r->find('\n', sp) - sp - 2);
      if (seen == std::to_string(want)) break;
    }
    usleep(100000);
  }
  kill(g.pid, SIGTERM);
  int st = 0;
  waitpid(g.pid, &st, 0);
  close(g.out);
  close(g.err);
  EXPECT_GT(want, 0u);
  EXPECT_EQ(seen, std::to_string(want));
}

// Parity: every expression both backends can evaluate selects the same calls (by seq) on
// both, on the oldest and the newest build. Ground truth is what TraceSelectsExactly... holds
// each backend to; this compares the two directly, over more forms.
TEST(ConditionParity, BothBackendsSelectTheSameCalls) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (ptrace and BPF)";
  auto fixtures = cond_fixtures();
  ASSERT_FALSE(fixtures.empty()) << "no cond fixture built in " << fixtures_dir();
  const std::vector<std::string> exprs = {
      "seq == 5 || seq > 28",
      "name == \"beta\" || o.Customer == \"acme\"",
      "o != nil && name == o.Customer",
      "o != nil && o.Customer == o.Customer",
      "name == name",
      "o != nil && o.Customer != name && len(o.Customer) == 4",
      "len(name) > seq",
      "~r0 > seq",
      "~r0 >= seq && sleepMs == 0",
      "~r1 != nil && type(~r1) != \"*fs.PathError\"",
      "goid != 1 && !(seq < 10)",
      "duration > 20ms || o == nil",
  };
  for (const Fixture* fx : {&fixtures.front(), &fixtures.back()}) {
    for (const auto& e : exprs) {
      SCOPED_TRACE(fx->label() + ": " + e);
      std::map<std::string, std::multiset<int64_t>> sel;
      for (const char* backend : {"ebpf", "ptrace"}) {
        RunResult r = run_command({gotap_binary(), "trace", "--backend", backend, "--json", "--if",
                                   e, "main.handle", "--", fx->path, "32"},
                                  120);
        ASSERT_EQ(r.exit_code, 0) << backend << ": " << r.err;
        for (const auto& ev : events_in(r.out))
          if (ev["event"] == "entry") sel[backend].insert(ev["args"][0]["value"].get<int64_t>());
      }
      EXPECT_EQ(sel["ebpf"], sel["ptrace"]);
    }
  }
}

// What only ptrace evaluates, on a real program's values: slice and map elements (both map
// layouts across the Go versions) and floats, against tests/fixtures/args' ground truth of
// main.Acceptance. On eBPF each is an exit-2 error before anything runs.
json gt_arg(const json& call, const std::string& name) {
  for (const auto& a : call["args"])
    if (a["name"] == name) return a["value"];
  return json();
}
std::optional<int64_t> gt_map(const json& call, const std::string& key) {
  json m = gt_arg(call, "m");
  if (!m.is_object()) return std::nullopt;
  for (const auto& e : m["entries"])
    if (e[0] == key) return e[1].get<int64_t>();
  return std::nullopt;
}
std::optional<int64_t> gt_elem(const json& call, int64_t i) {
  json sl = gt_arg(call, "sl");
  if (!sl.is_object() || i < 0 || i >= static_cast<int64_t>(sl["elems"].size()))
    return std::nullopt;
  return sl["elems"][i].get<int64_t>();
}

TEST(ConditionsPtraceOnly, IndexingAndFloatsSelectTheGroundTruthCalls) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (ptrace and BPF)";
  std::vector<Fixture> fixtures;
  for (auto& fx : all_fixtures("args"))
    if (fx.flavour == "default") fixtures.push_back(fx);
  ASSERT_FALSE(fixtures.empty()) << "no args fixture built in " << fixtures_dir();
  const std::vector<std::pair<std::string, Pred>> cases = {
      {"sl[1] == 20", [](const json& g) { return gt_elem(g, 1) == 20; }},
      {"sl[i] >= 40",
       [](const json& g) {
         auto e = gt_elem(g, gt_arg(g, "i").get<int64_t>());
         return e && *e >= 40;
       }},
      {"sl[7] == 0 || sl[7] != 0", [](const json&) { return false; }},
      {"m[\"y\"] < 0",
       [](const json& g) {
         auto y = gt_map(g, "y");
         return y && *y < 0;
       }},
      {"m[\"a\"] == 1 || m[\"z\"] == 300",
       [](const json& g) { return gt_map(g, "a") == 1 || gt_map(g, "z") == 300; }},
      {"m[\"nope\"] == 0 || m[\"nope\"] != 0", [](const json&) { return false; }},
      {"f < 0", [](const json& g) { return gt_arg(g, "f").get<double>() < 0; }},
      {"f > 1e9 && f == 10000000000",
       [](const json& g) { return gt_arg(g, "f").get<double>() == 1e10; }},
      {"f == 1.5 && len(m) < len(sl)",
       [](const json& g) {
         return gt_arg(g, "f").get<double>() == 1.5 &&
                gt_arg(g, "m")["len"].get<int64_t>() < gt_arg(g, "sl")["len"].get<int64_t>();
       }},
  };
  int compared = 0;
  for (const auto& fx : fixtures) {
    for (const auto& [expr, pred] : cases) {
      SCOPED_TRACE(fx.label() + ": " + expr);
      RunResult r = run_command({gotap_binary(), "trace", "--backend", "ptrace", "--json", "--if",
                                 expr, "main.Acceptance", "--", fx.path},
                                120);
      ASSERT_EQ(r.exit_code, 0) << r.err;
      std::multiset<int64_t> got, want;
      for (const auto& ev : events_in(r.out))
        if (ev["event"] == "entry") got.insert(ev["args"][0]["value"].get<int64_t>());
      size_t calls = 0;
      for (const auto& line : events_in_gt(r.out)) {
        if (line.value("func", "") != "main.Acceptance") continue;
        ++calls;
        if (pred(line)) want.insert(gt_arg(line, "i").get<int64_t>());
      }
      ASSERT_EQ(calls, 3u) << r.out.substr(0, 2000);
      EXPECT_EQ(got, want);
      ++compared;
    }
    // eBPF (and the trampoline backend, whose conditions run on eBPF): the part it cannot
    // evaluate, named, and nothing launched.
    for (const auto& [expr, col, what] : std::vector<std::tuple<std::string, int, std::string>>{
             {"i == 1 || sl[0] == 10", 11, "sl[..] indexes a slice"},
             {"m[\"a\"] == 1", 1, "m[..] looks up a map"},
             {"f > 0", 1, "f is a float"}}) {
      for (const char* backend : {"ebpf", "trampoline"}) {
        SCOPED_TRACE(fx.label() + ": " + backend + ": " + expr);
        RunResult r = run_command({gotap_binary(), "trace", "--backend", backend, "--json", "--if",
                                   expr, "main.Acceptance", "--", fx.path},
                                  120);
        EXPECT_EQ(r.exit_code, 2);
        EXPECT_NE(r.err.find("column " + std::to_string(col) + ": " + what +
                             ", which eBPF cannot read; use --backend=ptrace"),
                  std::string::npos)
            << r.err;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
        EXPECT_EQ(r.out.find("\"gt\""), std::string::npos) << r.out;
      }
    }
  }
  EXPECT_GT(compared, 0);
}

INSTANTIATE_TEST_SUITE_P(Backends, Conditions, ::testing::Values("ebpf", "ptrace", "trampoline"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace gotap::testing
