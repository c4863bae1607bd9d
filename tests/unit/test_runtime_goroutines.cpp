// `gotap goroutines`, once per backend, on every Go version and build (DWARF, stripped, PIE,
// cgo): the tree of goroutines tests/fixtures/goroutines starts (it prints each one's id,
// parent, start function, creating function and measured blocking time) must come out with
// the right parents and creation sites, every creation and exit, and waiting times within
// 10% of what the program measured. The record reports the same events, the same table, and
// Perfetto state tracks whose slices are ordered and do not overlap. (The --under and --goid
// filters are declarative cases: tests/cases/goroutines-*.json.)
#include <unistd.h>

#include <cmath>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/unit/fixtures.h"

namespace gotap::testing {
namespace {

using nlohmann::json;

struct Truth {
  std::string name, start, created_by;
  int64_t parent = 0;
  double waiting_ns = 0;
};

// The fixture's "gt name=A1 goid=8 parent=6 start=... created_by=... waiting_ns=..." lines.
std::map<int64_t, Truth> truth_of(const std::string& out) {
  std::map<int64_t, Truth> t;
  std::regex re(
      R"(gt name=(\S+) goid=(\d+) parent=(\d+) start=(\S+) created_by=(\S+) waiting_ns=(\d+))");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), re); it != std::sregex_iterator();
       ++it) {
    const auto& m = *it;
    t[std::stoll(m[2])] = {m[1], m[4], m[5], std::stoll(m[3]), std::stod(m[6])};
  }
  return t;
}

std::vector<json> json_lines(const std::string& out) {
  std::vector<json> v;
  std::istringstream in(out);
  for (std::string l; std::getline(in, l);)
    if (!l.empty() && l[0] == '{') v.push_back(json::parse(l));
  return v;
}

struct Seen {
  bool created = false, exited = false;
  int64_t parent = -1;
  std::string func, created_by;
  double waiting_ns = 0;
};

// Per goroutine, from the gcreate, gstate and gexit events; also checks that each
// goroutine's events are in time order.
std::map<int64_t, Seen> seen_of(const std::vector<json>& events) {
  std::map<int64_t, Seen> s;
  std::map<int64_t, std::pair<std::string, uint64_t>> state;  // current state, since
  std::map<int64_t, uint64_t> last_ts;
  for (const auto& e : events) {
    const std::string kind = e.value("event", "");
    if (kind != "gcreate" && kind != "gstate" && kind != "gexit") continue;
    const int64_t goid = e["goid"].get<int64_t>();
    const uint64_t ts = e["ts_ns"].get<uint64_t>();
    EXPECT_GE(ts, last_ts[goid]) << "goroutine " << goid << "'s events out of order: " << e;
    last_ts[goid] = ts;
    Seen& g = s[goid];
    if (kind == "gcreate") {
      g.created = true;
      g.parent = e["parent_goid"].get<int64_t>();
      g.func = e.value("func", "");
      g.created_by = e.value("created_by", "");
    } else if (kind == "gexit") {
      g.exited = true;
    } else {
      auto it = state.find(goid);
      if (it != state.end() && it->second.first == "waiting")
        g.waiting_ns += ts - it->second.second;
      state[goid] = {e["to"].get<std::string>(), ts};
    }
  }
  return s;
}

// "168ms", "2.17ms", "394us", "0" (the table's durations) in ns.
double table_ns(const std::string& t) {
  if (t == "0") return 0;
  size_t i = 0;
  double v = std::stod(t, &i);
  const std::string unit = t.substr(i);
  return unit == "s" ? v * 1e9 : unit == "ms" ? v * 1e6 : unit == "us" ? v * 1e3 : v;
}

void expect_near_truth(double got, double want, const std::string& what) {
  EXPECT_LE(std::fabs(got - want), 0.10 * want)
      << what << ": " << got / 1e6 << " ms traced, " << want / 1e6 << " ms measured";
}

// Perfetto: the goroutine-state tracks hold ordered, non-overlapping complete slices, one
// track per goroutine in `goids`.
void check_perfetto_states(const std::string& doc, const std::map<int64_t, Truth>& truth) {
  json d = json::parse(doc);
  ASSERT_TRUE(d.contains("traceEvents"));
  int64_t states_pid = -1;
  for (const auto& e : d["traceEvents"])
    if (e.value("ph", "") == "M" && e.value("name", "") == "process_name" &&
        e["args"].value("name", "") == "goroutine states")
      states_pid = e["pid"].get<int64_t>();
  ASSERT_NE(states_pid, -1) << "no goroutine-state process";
  std::map<int64_t, double> end_of;  // per track: the end of its last slice
  std::map<int64_t, double> waiting_us;
  for (const auto& e : d["traceEvents"]) {
    if (e.value("ph", "") != "X" || e["pid"].get<int64_t>() != states_pid) continue;
    const int64_t tid = e["tid"].get<int64_t>();
    const double ts = e["ts"].get<double>(), dur = e["dur"].get<double>();
    EXPECT_GE(dur, 0);
    if (end_of.count(tid)) {
      EXPECT_GE(ts + 1e-3, end_of[tid]) << "overlap on goroutine " << tid;
    }
    end_of[tid] = ts + dur;
    if (e.value("name", "") == "waiting") waiting_us[tid] += dur;
  }
  for (const auto& [goid, t] : truth) {
    EXPECT_TRUE(end_of.count(goid)) << "no state track for goroutine " << goid;
    expect_near_truth(waiting_us[goid] * 1e3, t.waiting_ns, "perfetto waiting of " + t.name);
  }
}

class Goroutines : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (ptrace and BPF)";
    if (!file_exists(gotap_binary())) GTEST_SKIP() << gotap_binary() << " is not built";
    fixtures_ = all_fixtures("goroutines");
    if (fixtures_.empty()) GTEST_SKIP() << "no goroutines fixtures (tests/tools/build-fixtures.sh)";
  }
  std::vector<Fixture> fixtures_;
};

TEST_P(Goroutines, TreeParentsExitsAndWaitingMatchTheProgram) {
  const std::string backend = GetParam();
  int checked = 0;
  for (const Fixture& fx : fixtures_) {  // DWARF, stripped, PIE and cgo builds
    SCOPED_TRACE(fx.label());
    const std::string rec = "/tmp/gotap-goroutines-" + std::to_string(getpid()) + ".rec";
    const std::string out = rec + ".json";  // not stdout, which the program writes too
    auto r = run_command({gotap_binary(), "goroutines", "--backend", backend, "--json", "-o", out,
                          "--record", rec, "--", fx.path});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto truth = truth_of(r.out);
    ASSERT_EQ(truth.size(), 7u) << r.out;
    auto events = json_lines(read_file(out));
    unlink(out.c_str());
    ASSERT_FALSE(events.empty());
    EXPECT_EQ(events.back().value("event", ""), "summary");
    EXPECT_EQ(events.back().value("lost", -1), 0) << events.back();
    auto seen = seen_of(events);
    // The tree parks only in time.Sleep, channel receives and WaitGroup.Wait, which the
    // runtime names by release.
    const std::set<std::string> reasons = {"sleep", "chan receive", "semacquire",
                                           "sync.WaitGroup.Wait"};
    int parked = 0;
    for (const auto& e : events) {
      if (e.value("event", "") != "gstate" || e.value("to", "") != "waiting" ||
          !truth.count(e["goid"].get<int64_t>()))
        continue;
      ++parked;
      EXPECT_TRUE(reasons.count(e.value("reason", ""))) << e;
    }
    EXPECT_GT(parked, 0);
    for (const auto& [goid, t] : truth) {
      SCOPED_TRACE(t.name);
      ASSERT_TRUE(seen.count(goid)) << "goroutine " << goid << " never seen";
      const Seen& g = seen[goid];
      EXPECT_TRUE(g.created);
      EXPECT_TRUE(g.exited);
      EXPECT_EQ(g.parent, t.parent);
      EXPECT_EQ(g.func, t.start);
      EXPECT_EQ(g.created_by, t.created_by);
      expect_near_truth(g.waiting_ns, t.waiting_ns, "waiting of " + t.name);
    }

    // The record gives the same events again, and the same goroutines in the table.
    auto rep = run_command({gotap_binary(), "report", "--json", rec});
    ASSERT_EQ(rep.exit_code, 0) << rep.err;
    EXPECT_EQ(json_lines(rep.out), events);
    auto table = run_command({gotap_binary(), "report", rec});
    ASSERT_EQ(table.exit_code, 0) << table.err;
    std::regex row(
        R"(^\s*(\d+)\s+(\d+)\s+exited\s+-\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+) \[(\S+)\]$)");
    std::set<int64_t> rows;
    std::istringstream in(table.out);
    for (std::string l; std::getline(in, l);) {
      std::smatch m;
      if (!std::regex_match(l, m, row)) continue;
      auto it = truth.find(std::stoll(m[1]));
      if (it == truth.end()) continue;
      rows.insert(it->first);
      EXPECT_EQ(std::stoll(m[2]), it->second.parent) << l;
      EXPECT_EQ(m[8], it->second.start) << l;
      EXPECT_EQ(m[9], it->second.created_by) << l;
      expect_near_truth(table_ns(m[5]), it->second.waiting_ns, "table waiting: " + l);
    }
    EXPECT_EQ(rows.size(), truth.size()) << table.out;

    auto perfetto = run_command({gotap_binary(), "report", "--format", "perfetto", rec});
    unlink(rec.c_str());
    ASSERT_EQ(perfetto.exit_code, 0) << perfetto.err;
    check_perfetto_states(perfetto.out, truth);
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

// graph --goroutines: the time a goroutine spent parked inside the traced calls shows as
// "(waiting: REASON)" lines beneath them, and adds up to what the program measured.
TEST_P(Goroutines, GraphShowsWaitsInsideCalls) {
  const Fixture& fx = fixtures_.back();
  SCOPED_TRACE(fx.label());
  const std::string out = "/tmp/gotap-goroutines-" + std::to_string(getpid()) + ".graph";
  auto r = run_command({gotap_binary(), "graph", "--backend", GetParam(), "--goroutines", "-o", out,
                        "main.twigA2", "--", fx.path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto truth = truth_of(r.out);
  ASSERT_EQ(truth.size(), 7u) << r.out;
  int64_t a2 = -1;
  for (const auto& [goid, t] : truth)
    if (t.name == "A2") a2 = goid;
  const std::string graph = read_file(out);
  unlink(out.c_str());
  // "   40.710 ms [    18] |       (waiting: sleep);"
  std::regex wait_line(R"(^\s*([0-9.]+) (ns|us|ms|s) \[\s*(\d+)\] \|\s*\(waiting: ([^)]*)\);$)");
  double waited = 0;
  std::set<std::string> reasons;
  std::istringstream in(graph);
  for (std::string l; std::getline(in, l);) {
    std::smatch m;
    if (!std::regex_match(l, m, wait_line)) continue;
    EXPECT_EQ(std::stoll(m[3]), a2) << "a wait outside main.twigA2's goroutine: " << l;
    const double v = std::stod(m[1]);
    const std::string unit = m[2];
    waited += unit == "s" ? v * 1e9 : unit == "ms" ? v * 1e6 : unit == "us" ? v * 1e3 : v;
    reasons.insert(m[4]);
  }
  EXPECT_EQ(reasons, (std::set<std::string>{"sleep", "chan receive"})) << graph;
  expect_near_truth(waited, truth[a2].waiting_ns, "waits in the graph of A2");
}

// A goroutine blocked in a raw read(2) (the fixture's `syscall` mode) goes running ->
// syscall, and its time in syscall is what it measured around the call. Parity compares
// only which goroutines change state, and the tree above never enters a system call for
// long: this is what shows a backend losing its syscall transitions. Go 1.26 and later
// enter and leave a system call without runtime.casgstatus (docs/cli.md, known limits), so
// those releases have no syscall state to check.
TEST_P(Goroutines, BlockingReadShowsAsSyscallForItsTime) {
  int checked = 0;
  for (const Fixture& fx : fixtures_) {
    if (fx.flavour != "default" || std::stoi(fx.go_version.substr(2)) >= 26) continue;
    SCOPED_TRACE(fx.label());
    const std::string out = "/tmp/gotap-goroutines-syscall-" + std::to_string(getpid()) + ".json";
    auto r = run_command({gotap_binary(), "goroutines", "--backend", GetParam(), "--json", "-o",
                          out, "--", fx.path, "syscall"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::smatch m;
    ASSERT_TRUE(
        std::regex_search(r.out, m, std::regex(R"(gt syscall goid=(\d+) syscall_ns=(\d+))")))
        << "no syscall ground truth (fixture older than its syscall mode?): " << r.out;
    const int64_t goid = std::stoll(m[1]);
    const double truth_ns = std::stod(m[2]);
    auto events = json_lines(read_file(out));
    unlink(out.c_str());
    ASSERT_FALSE(events.empty());
    EXPECT_EQ(events.back().value("lost", -1), 0) << events.back();
    bool entered = false;
    double in_syscall = 0;
    std::optional<uint64_t> since;
    for (const auto& e : events) {
      if (e.value("event", "") != "gstate" || e["goid"].get<int64_t>() != goid) continue;
      const uint64_t ts = e["ts_ns"].get<uint64_t>();
      if (since) in_syscall += static_cast<double>(ts - *since);
      since.reset();
      if (e.value("to", "") != "syscall") continue;
      if (e.value("from", "") == "running") entered = true;
      since = ts;
    }
    EXPECT_TRUE(entered) << "no running -> syscall change of goroutine " << goid;
    expect_near_truth(in_syscall, truth_ns, "syscall time of goroutine " + std::to_string(goid));
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "no default build of goroutines before Go 1.26";
}

INSTANTIATE_TEST_SUITE_P(Backends, Goroutines, ::testing::Values("ebpf", "ptrace", "trampoline"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace gotap::testing
