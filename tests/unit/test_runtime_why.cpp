// `gotap trace --why`, once per backend, on the default build of every Go release: the why
// fixture (tests/fixtures/why) calls main.step once per phase, each spending its time one
// known way, and prints each call's wall time. Each call's `why` must put that time in the
// phase's part (within max(3 ms, 15%), plus the time the kernel kept the thread from a CPU
// meanwhile, which the fixture also prints), leave the other parts small, name the wait's
// reason, where it parked and its waker, and its parts must sum to duration_ns (within 10%
// or 1 ms).
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/unit/fixtures.h"

namespace gotap::testing {
namespace {

using nlohmann::json;

constexpr double kMs = 1e6;

struct Phase {
  std::string name;
  double wall = 0;
  // The time the kernel kept the calling thread waiting for a CPU meanwhile (schedstat):
  // on a loaded machine it lands in whatever Go state the goroutine was in (a preempted
  // goroutine's scheduler pass, a system call), and ptrace does not split it out
  // (preempted_ns), so it widens the bounds by as much. 0 on a quiet machine.
  double run_delay = 0;
};

// The fixture's "GT <phase> <ns> <run_delay_ns>" lines, in call order.
std::vector<Phase> truth_of(const std::string& out) {
  std::vector<Phase> t;
  std::regex re(R"(GT (\w+) (\d+) (\d+))");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), re); it != std::sregex_iterator();
       ++it)
    t.push_back({(*it)[1], std::stod((*it)[2]), std::stod((*it)[3])});
  return t;
}

double part(const json& why, const char* key) {
  const auto it = why.find(key);
  return it != why.end() && it->is_number() ? it->get<double>() : 0;
}

// The largest wait of a call.
json main_wait(const json& why) {
  json best;
  for (const auto& w : why.value("waits", json::array()))
    if (best.is_null() || w["ns"].get<double>() > best["ns"].get<double>()) best = w;
  return best;
}

class Why : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (ptrace and BPF)";
    if (!file_exists(gotap_binary())) GTEST_SKIP() << gotap_binary() << " is not built";
    // The default build of every release, then the other builds (stripped, PIE, cgo) of the
    // newest: the offsets of stripped binaries and the load bias of a PIE, a few seconds more.
    const auto all = all_fixtures("why");
    std::string newest;
    for (const Fixture& fx : all)
      if (newest.empty() || std::stoi(fx.go_version.substr(2)) > std::stoi(newest.substr(2)))
        newest = fx.go_version;
    for (const Fixture& fx : all)
      if (fx.flavour == "default") fixtures_.push_back(fx);
    for (const Fixture& fx : all)
      if (fx.flavour != "default" && fx.go_version == newest) others_.push_back(fx);
    if (fixtures_.empty()) GTEST_SKIP() << "no why fixtures (tests/tools/build-fixtures.sh)";
  }
  std::vector<Fixture> fixtures_;  // default builds, oldest release first
  std::vector<Fixture> others_;    // the newest release's other builds
};

TEST_P(Why, EachPhaseLandsInItsPart) {
  std::vector<Fixture> runs = fixtures_;
  runs.insert(runs.end(), others_.begin(), others_.end());
  for (const Fixture& fx : runs) {
    SCOPED_TRACE(fx.label());
    const std::string out = "/tmp/gotap-why-" + std::to_string(getpid()) + ".json";
    auto r = run_command({gotap_binary(), "trace", "--backend", GetParam(), "--why", "--json", "-o",
                          out, "main.step", "--", fx.path});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto truth = truth_of(r.out);
    ASSERT_EQ(truth.size(), 7u) << r.out;
    const auto events = events_in(read_file(out));
    unlink(out.c_str());
    std::vector<json> returns;
    for (const auto& e : events)
      if (e.value("event", "") == "return") returns.push_back(e);
    ASSERT_EQ(returns.size(), truth.size()) << "one return per phase";
    ASSERT_FALSE(events.empty());
    const json& summary = events.back();
    EXPECT_EQ(summary.value("event", ""), "summary");
    EXPECT_EQ(summary.value("lost", -1), 0) << summary;
    EXPECT_TRUE(summary.contains("why_unmeasured")) << "the summary says what is null and why";
    for (size_t i = 0; i < returns.size(); ++i) {
      const std::string& phase = truth[i].name;
      const double wall = truth[i].wall;
      const json& ret = returns[i];
      SCOPED_TRACE("phase " + phase + ": " + ret.dump());
      ASSERT_TRUE(ret.contains("why"));
      const json& why = ret["why"];
      // The kernel's scheduler, read on eBPF only (test_runtime_why_kernel.cpp).
      if (GetParam() == "ebpf")
        EXPECT_TRUE(why["preempted_ns"].is_number()) << "measured from sched_switch";
      else
        EXPECT_TRUE(why["preempted_ns"].is_null()) << "not measured: null, never 0";
      // Go 1.26+ leaves casgstatus out of system calls: --why probes them apart.
      EXPECT_TRUE(why["syscall_ns"].is_number()) << "syscall_ns on every release";
      // Which part holds the phase's time.
      std::string want = phase == "cpu"       ? "running_ns"
                         : phase == "yield"   ? "runnable_ns"
                         : phase == "syscall" ? "syscall_ns"
                                              : "waiting_ns";
      const double tol = std::max(3 * kMs, 0.15 * wall) + truth[i].run_delay;
      EXPECT_NEAR(part(why, want.c_str()), wall, tol)
          << want << " of a " << wall / kMs << " ms call";
      double sum = 0;
      for (const char* k :
           {"running_ns", "runnable_ns", "syscall_ns", "waiting_ns", "preempted_ns"}) {
        sum += part(why, k);
        if (k != want) {
          EXPECT_LE(part(why, k), tol) << k << " should be small";
        }
      }
      const double d = ret["duration_ns"].get<double>();
      EXPECT_NEAR(sum, d, std::max(1 * kMs, 0.10 * d)) << "the parts sum to duration_ns";
      // The wait: its reason as the release names it, and who ended it.
      const json w = main_wait(why);
      if (want != "waiting_ns") {
        if (!w.is_null()) {
          EXPECT_LE(w["ns"].get<double>(), tol);
        }
        continue;
      }
      ASSERT_FALSE(w.is_null()) << "no wait";
      EXPECT_NEAR(w["ns"].get<double>(), wall, tol);
      EXPECT_GE(w["count"].get<int>(), 1);
      const json& by = w["woken_by"];
      // Where it parked: the innermost frame outside the runtime, sync and internal/.
      const std::string parked =
          w["parked_at"].is_string() ? w["parked_at"].get<std::string>() : "";
      EXPECT_EQ(parked, phase == "sleep" ? "time.Sleep"
                        : phase == "net" ? "net.(*netFD).Read"
                                         : "main.step");
      if (phase == "sleep") {
        EXPECT_EQ(w["reason"], "sleep");
        EXPECT_EQ(by, json({{"by", "timer"}}));
      } else if (phase == "chan") {
        EXPECT_EQ(w["reason"], "chan receive");
        EXPECT_EQ(by.value("func", ""), "main.chanSender");
        EXPECT_GT(by.value("goid", 0), 0);
      } else if (phase == "mutex") {
        EXPECT_TRUE(w["reason"] == "semacquire" || w["reason"] == "sync.Mutex.Lock") << w;
        EXPECT_EQ(by.value("func", ""), "main.mutexHolder");
      } else if (phase == "net") {
        EXPECT_EQ(w["reason"], "IO wait");
        EXPECT_EQ(by, json({{"by", "netpoll"}}));
      }
    }
  }
}

// The text view: one why line under each return, naming the waker.
TEST_P(Why, TextShowsOneWhyLinePerReturn) {
  const Fixture& fx = fixtures_.back();
  SCOPED_TRACE(fx.label());
  auto r = run_command(
      {gotap_binary(), "trace", "--backend", GetParam(), "--why", "main.step", "--", fx.path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(truth_of(r.out).size(), 7u) << r.out;
  std::regex why_line(R"(^ +why: (.*)$)");
  std::vector<std::string> whys;
  std::istringstream in(r.out);
  bool after_return = false;
  for (std::string l; std::getline(in, l);) {
    std::smatch m;
    if (std::regex_match(l, m, why_line)) {
      EXPECT_TRUE(after_return) << "a why line not under a return: " << l;
      whys.push_back(m[1]);
    }
    after_return = l.find("<- main.step") != std::string::npos;
  }
  ASSERT_EQ(whys.size(), 7u) << r.out;
  EXPECT_TRUE(whys[0].starts_with("running ")) << whys[0];
  EXPECT_TRUE(whys[1].starts_with("waiting ")) << whys[1];
  EXPECT_NE(whys[2].find("chan receive at main.step, woken by main.chanSender [g "),
            std::string::npos)
      << whys[2];
  EXPECT_TRUE(whys[6].starts_with("runnable ")) << whys[6];
}

// latency --why: the function's totals hold each part's share of all its calls (the
// fixture's phases summed), and why_slowest the slowest call alone.
TEST_P(Why, LatencyTotalsHoldEveryPhase) {
  const Fixture& fx = fixtures_.back();
  SCOPED_TRACE(fx.label());
  auto r = run_command({gotap_binary(), "latency", "--backend", GetParam(), "--why", "--json",
                        "main.step", "--", fx.path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto truth = truth_of(r.out);
  ASSERT_EQ(truth.size(), 7u) << r.out;
  const auto lat = events_in(r.out, "latency");
  ASSERT_EQ(lat.size(), 1u) << r.out;
  EXPECT_EQ(lat[0]["count"], 7);
  const json& why = lat[0]["why"];
  std::map<std::string, double> want;  // part -> the phases' truth summed
  double slowest = 0;
  std::string slowest_part;
  double run_delay = 0;
  for (const auto& [phase, wall, delay] : truth) {
    run_delay += delay;
    const std::string p = phase == "cpu"       ? "running_ns"
                          : phase == "yield"   ? "runnable_ns"
                          : phase == "syscall" ? "syscall_ns"
                                               : "waiting_ns";
    want[p] += wall;
    if (wall > slowest) slowest = wall, slowest_part = p;
  }
  for (const auto& [p, ns] : want)
    EXPECT_NEAR(part(why, p.c_str()), ns, std::max(3 * kMs * 4, 0.15 * ns) + run_delay)
        << p << ": " << why;
  EXPECT_EQ(why["calls"], 7);
  // Four waits, by four reasons.
  EXPECT_EQ(why["waits"].size(), 4u) << why;
  const json& slow = lat[0]["why_slowest"];
  EXPECT_EQ(slow["calls"], 1);
  EXPECT_NEAR(part(slow, slowest_part.c_str()), slowest,
              std::max(3 * kMs, 0.15 * slowest) + run_delay)
      << slowest_part << ": " << slow;

  // The text view: both lines under the function's latency line.
  auto t = run_command(
      {gotap_binary(), "latency", "--backend", GetParam(), "--why", "main.step", "--", fx.path});
  ASSERT_EQ(t.exit_code, 0) << t.err;
  std::smatch m;
  EXPECT_TRUE(std::regex_search(
      t.out, m,
      std::regex(R"(\n  why: waiting [^\n]*chan receive [^\n]*woken by main\.chanSender[;)])")))
      << t.out;
  EXPECT_NE(t.out.find("\n  why (slowest 1%): "), std::string::npos) << t.out;
}

INSTANTIATE_TEST_SUITE_P(Backends, Why, ::testing::Values("ebpf", "ptrace"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace gotap::testing
