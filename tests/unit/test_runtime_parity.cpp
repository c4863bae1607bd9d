// Parity: the same case, run once per backend, must give the same events (docs/json.md):
// the same fields for every kind of event, the same calls, the same values wherever both
// backends capture them, latency in the same buckets' scheme, `unfinished` and `summary` with
// the same meaning. Over every Go version, DWARF and stripped builds.
#include <unistd.h>

#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/unit/fixtures.h"

namespace gotap::testing {
namespace {

using json = nlohmann::json;

// A value both backends should show identically: the eBPF backend captured all of it, and
// it holds no address (addresses differ from run to run).
bool comparable(const json& v) {
  if (v.is_object()) {
    for (const char* k : {"raw", "unreadable", "truncated", "addr"})
      if (v.contains(k)) return false;
    for (const auto& [k, e] : v.items())
      if (!comparable(e)) return false;
  }
  if (v.is_array())
    for (const auto& e : v)
      if (!comparable(e)) return false;
  return true;
}

struct Runs {
  std::map<std::string, std::vector<json>> by_backend;
};

class Parity : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (ptrace and BPF)";
    if (!file_exists(gotap_binary())) GTEST_SKIP() << gotap_binary() << " is not built";
  }
  // `gotap ARGS` once per backend; the events of each.
  std::map<std::string, std::vector<json>> run_both(std::vector<std::string> args) {
    std::map<std::string, std::vector<json>> out;
    for (const char* be : {"ebpf", "ptrace"}) {
      std::vector<std::string> argv = {gotap_binary(), args[0], "--backend", be, "--json"};
      argv.insert(argv.end(), args.begin() + 1, args.end());
      RunResult r = run_command(argv, 120);
      EXPECT_EQ(r.exit_code, 0) << be << ": " << r.err;
      out[be] = events_in(r.out);
    }
    return out;
  }
  static std::vector<json> of_kind(const std::vector<json>& evs, const std::string& kind) {
    std::vector<json> v;
    for (const auto& e : evs)
      if (e["event"] == kind) v.push_back(e);
    return v;
  }
  // Both summaries carry the contract's fields, with the same meaning.
  static void expect_summaries_agree(std::map<std::string, std::vector<json>>& runs,
                                     const std::string& ended_by) {
    for (auto& [be, evs] : runs) {
      auto s = of_kind(evs, "summary");
      ASSERT_EQ(s.size(), 1u) << be;
      for (const char* k :
           {"backend", "probes", "events", "lost", "ts_ns", "functions", "ended_by", "pid"})
        EXPECT_TRUE(s[0].contains(k)) << be << " summary lacks " << k << ": " << s[0];
      EXPECT_EQ(s[0]["backend"], be);
      EXPECT_EQ(s[0]["lost"], 0) << be;
      EXPECT_EQ(s[0]["ended_by"], ended_by) << be << ": " << s[0];
      // ts_ns ends the trace: no event comes after it.
      for (const auto& e : evs)
        if (e.contains("ts_ns")) EXPECT_LE(e["ts_ns"], s[0]["ts_ns"]) << be << ": " << e;
    }
  }
};

TEST_F(Parity, CallsArgsAndResults) {
  auto fixtures = all_fixtures("args");
  if (fixtures.empty()) GTEST_SKIP() << "no args fixtures built";
  size_t compared = 0;
  for (const auto& fx : fixtures) {
    if (fx.flavour != "default" && fx.flavour != "stripped") continue;
    SCOPED_TRACE(fx.label());
    auto runs = run_both({"trace", "main.Acceptance", "--", fx.path});
    auto entries_e = of_kind(runs["ebpf"], "entry"), entries_p = of_kind(runs["ptrace"], "entry");
    auto rets_e = of_kind(runs["ebpf"], "return"), rets_p = of_kind(runs["ptrace"], "return");
    ASSERT_EQ(entries_e.size(), 3u);
    ASSERT_EQ(entries_p.size(), 3u);
    ASSERT_EQ(rets_e.size(), 3u);
    ASSERT_EQ(rets_p.size(), 3u);
    for (size_t k = 0; k < 3; ++k) {
      EXPECT_EQ(keys_of(entries_e[k]), keys_of(entries_p[k])) << entries_e[k] << "\n"
                                                              << entries_p[k];
      EXPECT_EQ(keys_of(rets_e[k]), keys_of(rets_p[k])) << rets_e[k] << "\n" << rets_p[k];
      for (const char* list : {"args", "results"}) {
        const json& a = (list[0] == 'a' ? entries_e : rets_e)[k][list];
        const json& b = (list[0] == 'a' ? entries_p : rets_p)[k][list];
        ASSERT_EQ(a.size(), b.size()) << list;
        for (size_t i = 0; i < a.size(); ++i) {
          EXPECT_EQ(a[i]["name"], b[i]["name"]);
          EXPECT_EQ(a[i]["type"], b[i]["type"]);
          if (comparable(a[i]["value"]) && comparable(b[i]["value"])) {
            EXPECT_EQ(a[i]["value"], b[i]["value"]) << a[i]["name"];
            ++compared;
          }
        }
      }
    }
    expect_summaries_agree(runs, "exit");
  }
  EXPECT_GT(compared, 0u) << "no value was captured by both backends";
}

TEST_F(Parity, LatencyBucketsAndCounts) {
  auto fixtures = all_fixtures("args");
  if (fixtures.empty()) GTEST_SKIP() << "no args fixtures built";
  for (const auto& fx : fixtures) {
    if (fx.flavour != "default" && fx.flavour != "stripped") continue;
    SCOPED_TRACE(fx.label());
    auto runs = run_both({"latency", "main.Acceptance", "--", fx.path});
    std::set<std::string> keys;
    for (auto& [be, evs] : runs) {
      auto lat = of_kind(evs, "latency");
      ASSERT_EQ(lat.size(), 1u) << be;
      EXPECT_EQ(lat[0]["count"], 3) << be;
      if (keys.empty()) keys = keys_of(lat[0]);
      EXPECT_EQ(keys_of(lat[0]), keys) << be;
      uint64_t total = 0;
      for (const auto& b : lat[0]["buckets"]) {
        uint64_t lo = b["lo_ns"], hi = b["hi_ns"];
        // Half-open log2 buckets: [0, 2), [2^k, 2^(k+1)).
        EXPECT_EQ(hi, lo ? 2 * lo : 2) << be << ": " << b;
        total += b["count"].get<uint64_t>();
      }
      EXPECT_EQ(total, 3u) << be;
      EXPECT_LE(lat[0]["min_ns"], lat[0]["p50_ns"]) << be;
      EXPECT_LE(lat[0]["p99_ns"], lat[0]["max_ns"]) << be;
    }
  }
}

// A call that never returns while traced: `unfinished`, ending when the trace ends.
TEST_F(Parity, UnfinishedCalls) {
  auto fixtures = all_fixtures("demo");
  if (fixtures.empty()) GTEST_SKIP() << "no demo fixtures built";
  for (const auto& fx : fixtures) {
    if (fx.flavour != "default" && fx.flavour != "stripped") continue;
    SCOPED_TRACE(fx.label());
    auto runs =
        run_both({"trace", "-d", "1", "main.main", "--", fx.path, "-n", "200", "-sleep", "10ms"});
    std::set<std::string> keys;
    for (auto& [be, evs] : runs) {
      auto un = of_kind(evs, "unfinished");
      ASSERT_EQ(un.size(), 1u) << be;
      const json& u = un[0];
      if (keys.empty()) keys = keys_of(u);
      EXPECT_EQ(keys_of(u), keys) << be << ": " << u;
      for (const char* k : {"ts_ns", "entry_ts_ns", "pid", "tid", "goid", "func"})
        EXPECT_TRUE(u.contains(k)) << be << " lacks " << k << ": " << u;
      EXPECT_EQ(u["func"], "main.main");
      EXPECT_EQ(u["goid"], 1);
      auto entry = of_kind(evs, "entry");
      ASSERT_EQ(entry.size(), 1u) << be;
      EXPECT_EQ(u["entry_ts_ns"], entry[0]["ts_ns"]) << be;
      // It lasted about the second the trace ran.
      uint64_t len = u["ts_ns"].get<uint64_t>() - u["entry_ts_ns"].get<uint64_t>();
      EXPECT_GT(len, 500'000'000u) << be;
    }
    expect_summaries_agree(runs, "stop");
  }
}

}  // namespace
}  // namespace gotap::testing
