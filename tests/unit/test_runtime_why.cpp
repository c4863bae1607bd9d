// `gotap trace --why`, once per backend, on the default build of every Go release: the why
// fixture (tests/fixtures/why) calls main.step once per phase, each spending its time one
// known way, and prints each call's wall time. Each call's `why` must put that time in the
// phase's part (within max(3 ms, 15%), plus the time the kernel kept the thread from a CPU
// meanwhile, which the fixture also prints), leave the other parts small, name the wait's
// reason, where it parked and its waker, and its parts must sum to duration_ns (within 10%
// or 1 ms).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/unit/fixtures.h"
#include "tests/unit/loopback.h"

namespace gotap::testing {
namespace {

using nlohmann::json;

constexpr double kMs = 1e6;
constexpr const char* kParts[] = {"running_ns", "runnable_ns", "syscall_ns", "waiting_ns",
                                  "preempted_ns"};

// The part a phase spends its time in.
std::string part_of_phase(const std::string& phase) {
  return phase == "cpu"       ? "running_ns"
         : phase == "yield"   ? "runnable_ns"
         : phase == "syscall" ? "syscall_ns"
                              : "waiting_ns";
}

struct Phase {
  std::string name;
  double wall = 0;
  // The time the kernel kept the calling thread waiting for a CPU meanwhile (schedstat):
  // on a loaded machine it lands in whatever Go state the goroutine was in (a preempted
  // goroutine's scheduler pass, a system call), or in preempted_ns, so it widens the bounds
  // by as much. 0 on a quiet machine.
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
    // The trampoline backend's calls take jumps; only the goroutine probes are uprobes.
    if (GetParam() == "trampoline") {
      EXPECT_EQ(summary.value("not_patched", -1), 0) << summary;
      EXPECT_EQ(summary["uprobes"].value("functions", -1), 0) << summary;
      EXPECT_EQ(summary["uprobes"].value("goroutine_probes", false), true) << summary;
    }
    EXPECT_TRUE(summary.contains("why_unmeasured")) << "the summary says what is null and why";
    for (size_t i = 0; i < returns.size(); ++i) {
      const std::string& phase = truth[i].name;
      const double wall = truth[i].wall;
      const json& ret = returns[i];
      SCOPED_TRACE("phase " + phase + ": " + ret.dump());
      ASSERT_TRUE(ret.contains("why"));
      const json& why = ret["why"];
      // The kernel's scheduler, read on both backends (test_runtime_why_kernel.cpp): ptrace's
      // stop clock attaches its tracepoint.
      EXPECT_TRUE(why["preempted_ns"].is_number()) << "measured from sched_switch";
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
  // The spin's part: first, unless a loaded machine preempted it for longer than it ran
  // (then preempted comes first, measured on both backends).
  EXPECT_TRUE(whys[0].starts_with("running ") || (whys[0].starts_with("preempted ") &&
                                                  whys[0].find(" · running ") != std::string::npos))
      << whys[0];
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

// latency --why's tail: in the fixture's tail mode, 1 of 100 calls waits 40 ms on a channel
// and the others return at once, so the slowest 1% is that call: why_slowest holds it alone,
// its time waiting on "chan receive", woken by main.chanSender. The totals hold all 100.
TEST_P(Why, LatencyTailIsTheSlowCall) {
  const Fixture& fx = fixtures_.back();
  SCOPED_TRACE(fx.label());
  auto r = run_command({gotap_binary(), "latency", "--backend", GetParam(), "--why", "--json",
                        "main.step", "--", fx.path, "tail"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto truth = truth_of(r.out);
  ASSERT_EQ(truth.size(), 100u) << "a why fixture without the tail mode? " << r.out;
  double chan = 0, delay = 0;
  for (const Phase& p : truth) {
    if (p.name == "chan") chan = p.wall;
    delay += p.run_delay;
  }
  ASSERT_GT(chan, 0) << r.out;
  const auto lat = events_in(r.out, "latency");
  ASSERT_EQ(lat.size(), 1u) << r.out;
  EXPECT_EQ(lat[0]["why"]["calls"], 100);
  const json& slow = lat[0]["why_slowest"];
  SCOPED_TRACE(slow.dump());
  EXPECT_EQ(slow["calls"], 1);
  const double tol = std::max(3 * kMs, 0.15 * chan) + delay;
  EXPECT_NEAR(part(slow, "waiting_ns"), chan, tol);
  const json w = main_wait(slow);
  ASSERT_FALSE(w.is_null());
  EXPECT_EQ(w["reason"], "chan receive");
  EXPECT_EQ(w["woken_by"].value("func", ""), "main.chanSender");
  // Shares: each part's fraction of the parts' sum; waiting is nearly all of the tail.
  ASSERT_TRUE(slow["shares"].is_object());
  EXPECT_NEAR(slow["shares"]["waiting"].get<double>(), part(slow, "waiting_ns") / chan, tol / chan);
  // A null part (preempted_ns where BPF cannot be used) has a null share; a measured one a
  // number.
  EXPECT_EQ(slow["shares"]["preempted"].is_null(), slow["preempted_ns"].is_null());
  double sum = 0;
  for (const auto& [k, v] : slow["shares"].items())
    if (v.is_number()) sum += v.get<double>();
  EXPECT_NEAR(sum, 1.0, 0.001);
}

// The issue's check: `latency --why` totals are the sum of `trace --why` over the same calls.
// Two runs of the same workload (one round of the fixture's phases): per part, the latency
// total and the trace's sum agree within the per-call bounds (max(3 ms, 15%) each, plus the
// kernel's run delays of both runs), and the waits by reason too.
TEST_P(Why, LatencyTotalsAreTheSumOfTraces) {
  const Fixture& fx = fixtures_.back();
  SCOPED_TRACE(fx.label());
  auto t = run_command({gotap_binary(), "trace", "--backend", GetParam(), "--why", "--json",
                        "main.step", "--", fx.path});
  ASSERT_EQ(t.exit_code, 0) << t.err;
  auto l = run_command({gotap_binary(), "latency", "--backend", GetParam(), "--why", "--json",
                        "main.step", "--", fx.path});
  ASSERT_EQ(l.exit_code, 0) << l.err;
  const auto truth_t = truth_of(t.out), truth_l = truth_of(l.out);
  ASSERT_EQ(truth_t.size(), 7u) << t.out;
  ASSERT_EQ(truth_l.size(), 7u) << l.out;
  double tol = 0;
  for (size_t i = 0; i < 7; ++i)
    tol += std::max(3 * kMs, 0.15 * std::max(truth_t[i].wall, truth_l[i].wall)) +
           truth_t[i].run_delay + truth_l[i].run_delay;
  std::map<std::string, double> sum;     // part -> summed over the trace's returns
  std::map<std::string, double> by_why;  // wait reason -> ns
  int returns = 0;
  for (const auto& e : events_in(t.out, "return")) {
    ++returns;
    for (const char* k : kParts) sum[k] += part(e["why"], k);
    for (const auto& w : e["why"]["waits"])
      by_why[w["reason"].get<std::string>()] += w["ns"].get<double>();
  }
  ASSERT_EQ(returns, 7);
  const auto lat = events_in(l.out, "latency");
  ASSERT_EQ(lat.size(), 1u) << l.out;
  const json& why = lat[0]["why"];
  SCOPED_TRACE(why.dump());
  EXPECT_EQ(why["calls"], returns);
  for (const char* k : kParts) EXPECT_NEAR(part(why, k), sum[k], tol) << k;
  std::map<std::string, double> lat_why;
  for (const auto& w : why["waits"])
    lat_why[w["reason"].get<std::string>()] += w["ns"].get<double>();
  ASSERT_EQ(lat_why.size(), by_why.size());
  for (const auto& [reason, ns] : by_why) EXPECT_NEAR(lat_why[reason], ns, tol) << reason;
}

// Nested traced calls each get their own split: main.runRounds makes two rounds of main.step
// calls and waits itself, before each mutex phase, for main.mutexHolder to take the lock (a
// channel receive in main.runRounds). The steps' waits are inside runRounds' too; that one
// wait is runRounds' alone. On eBPF the splits are added up in the kernel, and the summary says
// so.
TEST_P(Why, LatencyNestedCallsEachGetTheirSplit) {
  for (const Fixture& fx : {fixtures_.front(), fixtures_.back()}) {
    SCOPED_TRACE(fx.label());
    auto r = run_command({gotap_binary(), "latency", "--backend", GetParam(), "--why", "--json",
                          "main.runRounds", "main.step", "--", fx.path, "2"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto truth = truth_of(r.out);
    ASSERT_EQ(truth.size(), 14u) << r.out;
    double cpu = 0, waits = 0, tol = 0;
    for (const auto& [phase, wall, delay] : truth) {
      if (phase == "cpu") cpu += wall;
      if (phase == "sleep" || phase == "chan" || phase == "mutex" || phase == "net") waits += wall;
      tol += std::max(3 * kMs, 0.15 * wall) + delay;
    }
    std::map<std::string, json> by_func;
    for (const auto& e : events_in(r.out, "latency")) by_func[e["func"]] = e;
    ASSERT_EQ(by_func.size(), 2u) << r.out;
    const json& step = by_func["main.step"]["why"];
    const json& outer = by_func["main.runRounds"]["why"];
    SCOPED_TRACE(outer.dump());
    SCOPED_TRACE(step.dump());
    EXPECT_EQ(step["calls"], 14);
    EXPECT_EQ(outer["calls"], 1);
    EXPECT_NEAR(part(step, "waiting_ns"), waits, tol);
    EXPECT_NEAR(part(step, "running_ns"), cpu, tol);
    // The outer call holds the steps' time and its own.
    EXPECT_GE(part(outer, "waiting_ns") + tol, part(step, "waiting_ns"));
    EXPECT_GE(part(outer, "running_ns") + tol, cpu);
    auto held_wait = [](const json& why) {
      for (const auto& w : why["waits"])
        if (w.value("parked_at", json()) == "main.runRounds") return w;
      return json();
    };
    EXPECT_TRUE(held_wait(step).is_null());
    const json own = held_wait(outer);
    ASSERT_FALSE(own.is_null());
    EXPECT_EQ(own["reason"], "chan receive");
    EXPECT_EQ(own["count"], 2);
    EXPECT_EQ(own["woken_by"].value("func", ""), "main.mutexHolder");
    // The steps' channel waits, twice, in both.
    for (const json* why : {&step, &outer}) {
      bool seen = false;
      for (const auto& w : (*why)["waits"])
        if (w.value("parked_at", json()) == "main.step" && w["reason"] == "chan receive") {
          EXPECT_EQ(w["count"], 2);
          EXPECT_EQ(w["woken_by"].value("func", ""), "main.chanSender");
          seen = true;
        }
      EXPECT_TRUE(seen);
    }
    const auto sum = events_in(r.out, "summary");
    ASSERT_EQ(sum.size(), 1u);
    if (GetParam() == "ebpf") {
      EXPECT_EQ(sum[0].value("why_in_kernel", false), true) << sum[0];
      EXPECT_EQ(sum[0].value("why_unnamed", -1), 0) << sum[0];
      EXPECT_EQ(sum[0].value("why_calls_lost", -1), 0) << sum[0];
    }
  }
}

// A `gotap COMMAND --why --json -o FILE --prometheus` run of the why fixture (three rounds),
// scraped until gotap has served the final values and gone: the last answer holds them.
struct Served {
  std::string fixture_out;
  std::vector<json> events;  // what -o got
  // main.step's gotap_call_seconds_total: part -> reason -> seconds.
  std::map<std::string, std::map<std::string, double>> seconds;
};

void serve_and_scrape(const std::string& command, const std::string& backend, const Fixture& fx,
                      Served& s) {
  const int port = free_port();
  const std::string out =
      "/tmp/gotap-why-" + command + "-prom-" + std::to_string(getpid()) + ".json";
  Child g = spawn({gotap_binary(), command, "--backend", backend, "--why", "--json", "-o", out,
                   "--prometheus", ":" + std::to_string(port), "--prometheus-linger", "30",
                   "main.step", "--", fx.path, "3"});
  ASSERT_GT(g.pid, 0);
  const std::string err = read_until(g.err, "/metrics\n", 30000);
  ASSERT_NE(err.find("serving metrics"), std::string::npos) << err;
  std::string last;
  int scrapes = 0;
  for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
       std::chrono::steady_clock::now() < until;) {
    auto r = http_get(port, "/metrics");
    if (!r) break;
    if (r->rfind("HTTP/1.1 200", 0) == 0) last = *r, ++scrapes;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  // Bounded: a gotap that hangs fails this test, not ctest's 900 s timeout.
  const std::optional<int> reaped = reap_within(g.pid, 60000);
  const int st = reaped.value_or(0);
  if (!reaped) {
    kill(g.pid, SIGKILL);
    waitpid(g.pid, nullptr, 0);
    close(g.out);
    close(g.err);
    FAIL() << "gotap did not exit within 60 s of its last scrape (" << scrapes << " scrapes)";
  }
  s.fixture_out = read_all(g.out);
  close(g.out);
  close(g.err);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
  EXPECT_GT(scrapes, 1) << "scraped while the fixture ran";
  s.events = events_in(read_file(out));
  unlink(out.c_str());
  std::regex line(R"re(gotap_call_seconds_total\{([^}]*)\} ([0-9.e+-]+))re");
  for (auto it = std::sregex_iterator(last.begin(), last.end(), line); it != std::sregex_iterator();
       ++it) {
    const std::string labels = (*it)[1];
    std::smatch m;
    std::string func, part_name, reason;
    if (std::regex_search(labels, m, std::regex(R"re(func="([^"]*)")re"))) func = m[1];
    if (std::regex_search(labels, m, std::regex(R"re(part="([^"]*)")re"))) part_name = m[1];
    if (std::regex_search(labels, m, std::regex(R"re(reason="([^"]*)")re"))) reason = m[1];
    EXPECT_TRUE(labels.find("binary=\"why\"") != std::string::npos) << labels;
    if (func == "main.step") s.seconds[part_name][reason] = std::stod((*it)[2]);
  }
  ASSERT_FALSE(s.seconds.empty()) << last;
}

// The chan phases' wall times summed, and the tolerance of their sum (max(3 ms, 15%) per
// call, plus the kernel's run delays).
std::pair<double, double> chan_truth(const std::string& fixture_out) {
  double chan = 0, tol = 0;
  for (const Phase& p : truth_of(fixture_out))
    if (p.name == "chan") chan += p.wall, tol += std::max(3 * kMs, 0.15 * p.wall) + p.run_delay;
  return {chan, tol};
}

// --prometheus with --why, scraped while the fixture runs (three rounds) until gotap has
// served the final values: gotap_call_seconds_total{func="main.step",part="waiting",
// reason="chan receive"} is the chan phases' time (within max(3 ms, 15%) per call), and every
// part's series is the sum of the same run's `trace --why` returns (written with -o).
TEST_P(Why, PrometheusSecondsByPartAndReason) {
  const Fixture& fx = fixtures_.back();
  SCOPED_TRACE(fx.label());
  Served run;
  ASSERT_NO_FATAL_FAILURE(serve_and_scrape("trace", GetParam(), fx, run));
  auto& served = run.seconds;
  const auto& events = run.events;
  // preempted is measured on both backends (the scheduler's tracepoint, ptrace's through its
  // stop clock): a measured part has its series, 0 included.
  EXPECT_TRUE(served.count("preempted"));

  // The truth: the chan phases' wall times.
  ASSERT_EQ(truth_of(run.fixture_out).size(), 21u) << run.fixture_out;
  const auto [chan, tol] = chan_truth(run.fixture_out);
  EXPECT_NEAR(served["waiting"]["chan receive"] * 1e9, chan, tol);
  for (const auto& [p, reasons] : served)
    if (p != "waiting") EXPECT_EQ(reasons.size(), 1u) << p << ": reason only for waiting";

  // The same calls' trace: every series is the sum of its returns' parts.
  std::map<std::string, std::map<std::string, double>> summed;
  int returns = 0;
  for (const auto& e : events) {
    if (e.value("event", "") != "return") continue;
    ++returns;
    const json& why = e["why"];
    for (const char* k : kParts)
      if (std::string p = std::string(k).substr(0, std::string(k).size() - 3);
          p != "waiting" && why[k].is_number())
        summed[p][""] += why[k].get<double>();
    for (const auto& w : why["waits"])
      summed["waiting"][w["reason"].get<std::string>()] += w["ns"].get<double>();
  }
  EXPECT_EQ(returns, 21);
  for (const auto& [p, reasons] : summed)
    for (const auto& [reason, ns] : reasons)
      EXPECT_NEAR(served[p][reason] * 1e9, ns, 1e3 + ns * 1e-9) << p << " " << reason;
}

// eBPF: under --why alone, the goroutine probes send user space only the status changes of
// goroutines with a traced call open (and creations and ends, which name goroutines); the
// others stop in the kernel at one map lookup. The goroutines fixture's tree has eight
// goroutines; only A1's start function, main.twigA1, is traced. The summary counts the
// goroutine events the backend read: with --goroutines, every change; with --why alone,
// before the filter, as many (173 and 178), after it, 57 against 180. Less than half must be
// read, and A1's call must still wait what A1 measured (its blocking operations' wall time:
// parked, and runnable until it ran again), within max(3 ms, 10%).
TEST(WhyEbpf, ChangesOutsideTracedCallsStayInTheKernel) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (BPF)";
  if (!file_exists(gotap_binary())) GTEST_SKIP() << gotap_binary() << " is not built";
  std::vector<Fixture> fxs;
  for (const Fixture& fx : all_fixtures("goroutines"))
    if (fx.flavour == "default") fxs.push_back(fx);
  if (fxs.empty()) GTEST_SKIP() << "no goroutines fixture (tests/tools/build-fixtures.sh)";
  auto events_read = [](const std::string& out) -> int64_t {
    for (const auto& e : events_in(out, "summary")) return e.value("events", int64_t{-1});
    return -1;
  };
  for (const Fixture& fx : {fxs.front(), fxs.back()}) {
    SCOPED_TRACE(fx.label());
    RunResult why = run_command({gotap_binary(), "trace", "--backend", "ebpf", "--why", "--json",
                                 "main.twigA1", "--", fx.path},
                                120);
    ASSERT_EQ(why.exit_code, 0) << why.err;
    RunResult all = run_command({gotap_binary(), "trace", "--backend", "ebpf", "--why",
                                 "--goroutines", "--json", "main.twigA1", "--", fx.path},
                                120);
    ASSERT_EQ(all.exit_code, 0) << all.err;
    const int64_t n_why = events_read(why.out), n_all = events_read(all.out);
    ASSERT_GT(n_all, 0) << all.out.substr(0, 2000);
    EXPECT_LT(n_why * 2, n_all) << "events read: --why " << n_why << ", with --goroutines "
                                << n_all;
    static const std::regex re(R"(gt name=A1 .*waiting_ns=(\d+))");
    std::smatch m;
    ASSERT_TRUE(std::regex_search(why.out, m, re)) << why.out.substr(0, 2000);
    const double truth = std::stod(m[1]);
    const auto rets = events_in(why.out, "return");
    ASSERT_EQ(rets.size(), 1u) << why.out.substr(0, 2000);
    const json& w = rets[0]["why"];
    ASSERT_TRUE(w.is_object()) << rets[0].dump();
    const double waited = w["waiting_ns"].get<double>() + w["runnable_ns"].get<double>();
    EXPECT_NEAR(waited, truth, std::max(3e6, truth * 0.1)) << rets[0].dump();
  }
}

// latency --why --prometheus (on eBPF, scrapes read the kernel's sums): the last scrape's
// gotap_call_seconds_total series are the function's `why` totals, part by part and wait
// reason by reason, and its chan receive series the chan phases' wall times.
TEST_P(Why, LatencyPrometheusServesTheTotals) {
  const Fixture& fx = fixtures_.back();
  SCOPED_TRACE(fx.label());
  Served run;
  ASSERT_NO_FATAL_FAILURE(serve_and_scrape("latency", GetParam(), fx, run));
  auto& served = run.seconds;
  const auto& events = run.events;
  EXPECT_TRUE(served.count("preempted"));
  ASSERT_EQ(truth_of(run.fixture_out).size(), 21u) << run.fixture_out;
  const auto [chan, tol] = chan_truth(run.fixture_out);
  EXPECT_NEAR(served["waiting"]["chan receive"] * 1e9, chan, tol);
  json why;
  for (const auto& e : events)
    if (e.value("event", "") == "latency") why = e["why"];
  ASSERT_TRUE(why.is_object()) << "no latency event with why";
  SCOPED_TRACE(why.dump());
  EXPECT_EQ(why["calls"], 21);
  for (const char* k : kParts) {
    const std::string p = std::string(k).substr(0, std::string(k).size() - 3);
    if (p == "waiting" || !why[k].is_number()) continue;
    EXPECT_NEAR(served[p][""] * 1e9, why[k].get<double>(), 1e3 + why[k].get<double>() * 1e-9) << p;
  }
  std::map<std::string, double> by_reason;
  for (const auto& w : why["waits"])
    by_reason[w["reason"].get<std::string>()] += w["ns"].get<double>();
  for (const auto& [reason, ns] : by_reason)
    EXPECT_NEAR(served["waiting"][reason] * 1e9, ns, 1e3 + ns * 1e-9) << reason;
  if (GetParam() == "ebpf")
    for (const auto& e : events)
      if (e.value("event", "") == "summary") EXPECT_EQ(e.value("why_in_kernel", false), true);
}

// Scrapes that keep coming while returns with `why` and goroutine events do (four clients
// in a loop, the stress fixture's 11,201 main.grow calls on 400 goroutines): the trace must
// end with the program, every call's entry and return written or counted lost, every return
// with its `why`. A scrape once waited for
// the trampoline's ring while holding the lock a return's `why` needed on its way to the
// metrics, and the ring's reader held the ring: gotap hung (seen in CI once; here at once).
TEST_P(Why, ScrapesDuringABusyTraceNeverStallIt) {
  std::vector<Fixture> fxs;
  for (const Fixture& fx : all_fixtures("stress"))
    if (fx.flavour == "default") fxs.push_back(fx);
  if (fxs.empty()) GTEST_SKIP() << "no stress fixture (tests/tools/build-fixtures.sh)";
  const Fixture& fx = fxs.back();
  SCOPED_TRACE(fx.label());
  const int port = free_port();
  const std::string out = "/tmp/gotap-why-busy-prom-" + std::to_string(getpid()) + ".json";
  // main.grow's calls: depth+1 from main, then g%50+1 in each goroutine g.
  const int goroutines = 400, depth = 1000;
  int want = depth + 1;
  for (int g = 0; g < goroutines; ++g) want += g % 50 + 1;
  Child g = spawn({gotap_binary(), "trace", "--backend", GetParam(), "--why", "--json", "-o", out,
                   "--prometheus", ":" + std::to_string(port), "main.grow", "--", fx.path,
                   "-goroutines", std::to_string(goroutines), "-depth", std::to_string(depth)});
  ASSERT_GT(g.pid, 0);
  const std::string err = read_until(g.err, "/metrics\n", 30000);
  ASSERT_NE(err.find("serving metrics"), std::string::npos) << err;
  std::atomic<bool> done{false};
  std::atomic<int> scrapes{0};
  std::vector<std::thread> clients;
  for (int k = 0; k < 4; ++k)
    clients.emplace_back([&] {
      while (!done) {
        auto r = http_get(port, "/metrics");
        if (r && r->rfind("HTTP/1.1 200", 0) == 0) ++scrapes;
        if (!r) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    });
  const std::optional<int> reaped = reap_within(g.pid, 180000);
  const int st = reaped.value_or(0);
  if (!reaped) {
    kill(g.pid, SIGKILL);
    waitpid(g.pid, nullptr, 0);
  }
  done = true;
  for (auto& c : clients) c.join();
  close(g.err);
  ASSERT_TRUE(reaped) << "gotap did not end within 180 s (" << scrapes << " scrapes)";
  const std::string fixture_out = read_all(g.out);
  close(g.out);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
  EXPECT_NE(fixture_out.find("done"), std::string::npos) << fixture_out;
  EXPECT_GT(scrapes.load(), 4);
  // Each call is an entry and a return, written out or counted lost (the trampoline's ring
  // can fill in the goroutines' burst: its program runs at full speed).
  const auto events = events_in(read_file(out));
  unlink(out.c_str());
  int64_t entries = 0, returns = 0, with_why = 0, lost = -1;
  for (const auto& e : events) {
    const std::string kind = e.value("event", "");
    if (kind == "entry") ++entries;
    if (kind == "return") ++returns, with_why += e.contains("why") && e["why"].is_object();
    if (kind == "summary") lost = e.value("lost", int64_t{-1});
  }
  ASSERT_GE(lost, 0) << "no summary with lost";
  EXPECT_EQ(entries + returns + lost, 2 * want)
      << entries << " entries, " << returns << " returns, " << lost << " lost";
  EXPECT_GT(returns, 0);
  EXPECT_EQ(with_why, returns);
}

INSTANTIATE_TEST_SUITE_P(Backends, Why, ::testing::Values("ebpf", "ptrace", "trampoline"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace gotap::testing
