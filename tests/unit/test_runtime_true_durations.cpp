// A call's duration_ns is the program's time, on both backends (issue 36, item 6: under
// ptrace a 1.4 µs call showed 1.5 to 6.7 ms, and --slower picked the wrong calls). Once per
// backend, on the latency fixture of the oldest and newest Go release: two goroutines call
// main.burn(seq, us) 17 times each, alternating calls of well under a microsecond with busy
// spins of 40 to 160 µs; each call measures its own time and prints it ("GT burn goid=..
// seq=.. us=.. ns=.."). Call 0 of each goroutine is a warm-up (a tracer's first hit in a
// process is slow on its own, eBPF's included) and is left out. The events go to a file (-o):
// on the program's stdout they could interleave with its lines.
// - Every call's duration_ns lies within max(2 µs, 20%) of the program's measurement; a
//   preemption between a probe and the program's clock read can move a call on a loaded
//   host, so 75% of the calls must (before the fix, under ptrace, 6 to 8 of 32 did: no short
//   one, they took 11 µs and more).
// - --slower 20us reports every call the program measured above 20 µs (the spins), and at
//   most a quarter of the short calls: under ptrace, a thread that waited for a CPU after its
//   entry stop and was then preempted within the call leaves the scheduler unable to tell the
//   two waits apart, and the resume's wait stays in the call (docs/json.md). CI saw 3 runs in a
//   row pick some short calls with another test running beside it. Before the fix, short
//   calls took 11 to 40 µs under ptrace: most were picked.
// A host busy with other work can make a whole run miss (under ptrace, a thread preempted
// between two hits leaves its resume's wait for a CPU in the call, docs/json.md): each check
// gets three runs of a fixture and must hold in one. Before the fix, no ptrace run came near.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/unit/fixtures.h"

namespace gotap::testing {
namespace {

constexpr int kWorkers = 2, kCalls = 17, kAttempts = 3;
// Between the short calls (30 ns; under ptrace, 0.4 to 12 µs corrected on a loaded 2-CPU
// guest, 11 to 40 µs before the correction) and the spins (40 to 160 µs): with another test
// running beside it (ctest -j2), 5 µs picked short calls in all three runs.
constexpr uint64_t kSlowerNs = 20'000;

struct Truth {
  int us = 0;
  uint64_t ns = 0;
};
using CallId = std::pair<int64_t, int>;  // goid, seq

// The program's account of every call: (goid, seq) -> what it measured.
std::map<CallId, Truth> truth_of(const std::string& out) {
  std::map<CallId, Truth> t;
  static const std::regex re(R"(GT burn goid=(\d+) seq=(\d+) us=(\d+) ns=(\d+))");
  for (std::sregex_iterator it(out.begin(), out.end(), re), end; it != end; ++it)
    t[{std::stoll((*it)[1]), std::stoi((*it)[2])}] = {std::stoi((*it)[3]), std::stoull((*it)[4])};
  return t;
}

// The oldest and the newest release built (default flavour): how long a call takes does not
// depend on the release, and eBPF's start takes ~2 s a run.
std::vector<Fixture> default_fixtures() {
  std::vector<Fixture> all;
  for (const auto& fx : all_fixtures("latency"))
    if (fx.flavour == "default") all.push_back(fx);
  auto minor = [](const Fixture& f) {
    auto dot = f.go_version.find('.');
    return dot == std::string::npos ? 0 : std::atoi(f.go_version.c_str() + dot + 1);
  };
  std::sort(all.begin(), all.end(),
            [&](const Fixture& a, const Fixture& b) { return minor(a) < minor(b); });
  if (all.size() > 2) all = {all.front(), all.back()};
  return all;
}

struct Traced {
  std::map<CallId, Truth> truth;
  std::string events;
};

// The fixture traced (extra: more options), with the program's account and gotap's events
// (written to a file: on the program's stdout they could interleave with its lines).
Traced traced(const Fixture& fx, const std::string& backend, std::vector<std::string> extra) {
  const std::string out = ::testing::TempDir() + "gotap_true_durations_" + backend + "_" +
                          std::to_string(getpid()) + ".json";
  std::vector<std::string> argv = {gotap_binary(), "trace", "--backend", backend,
                                   "--json",       "-o",    out};
  argv.insert(argv.end(), extra.begin(), extra.end());
  for (std::string a : {"main.burn", "--", fx.path.c_str(), "burn"}) argv.push_back(a);
  argv.push_back(std::to_string(kWorkers));
  argv.push_back(std::to_string(kCalls));
  RunResult r = run_command(argv, 60);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  Traced run{truth_of(r.out), read_file(out)};
  std::remove(out.c_str());
  EXPECT_EQ(run.truth.size(), size_t(kWorkers * kCalls)) << r.out.substr(0, 2000);
  return run;
}

std::string call_name(const CallId& id) {
  return "goid " + std::to_string(id.first) + " seq " + std::to_string(id.second);
}

// Empty when 75% of the calls (the warm-ups left out) are within max(2 µs, 20%) of the
// program's time; else what was not.
std::string off_calls(const Traced& run) {
  int calls = 0, within = 0;
  std::string off;
  // Each goroutine calls burn one call after the other: its returns come in seq order.
  std::map<int64_t, int> next_seq;
  for (const auto& ev : events_in(run.events, "return")) {
    if (ev.value("func", "") != "main.burn") continue;
    const int64_t goid = ev.value("goid", int64_t(-1));
    const CallId id{goid, next_seq[goid]++};
    auto t = run.truth.find(id);
    if (t == run.truth.end()) return "a return the program did not make: " + call_name(id);
    if (!ev.contains("duration_ns")) return "no duration_ns: " + ev.dump();
    if (id.second == 0) continue;  // the warm-up
    const uint64_t d = ev["duration_ns"].get<uint64_t>(), want = t->second.ns;
    const uint64_t tol = std::max<uint64_t>(2'000, want / 5);
    ++calls;
    if (d + tol >= want && d <= want + tol)
      ++within;
    else
      off += "\n  " + call_name(id) + ": program " + std::to_string(want) + " ns, duration_ns " +
             std::to_string(d);
  }
  for (const auto& [goid, n] : next_seq)
    if (n != kCalls) return std::to_string(n) + " returns of goroutine " + std::to_string(goid);
  if (calls != kWorkers * (kCalls - 1)) return std::to_string(calls) + " calls traced";
  if (within * 4 >= calls * 3) return "";
  return std::to_string(within) + " of " + std::to_string(calls) +
         " calls within max(2 us, 20%) of the program's time:" + off;
}

// Empty when --slower selected every call the program measured slower and at most a quarter
// of the others.
std::string slower_diff(const Traced& run) {
  std::set<CallId> want, got;
  for (const auto& [id, t] : run.truth)
    if (id.second > 0 && t.ns > kSlowerNs) want.insert(id);
  if (want.size() != size_t(kWorkers * (kCalls / 2)))  // the spins
    return std::to_string(want.size()) + " calls measured slower by the program";
  // A selected call is printed whole: its entry (with seq, the first argument), then its
  // return.
  for (const auto& ev : events_in(run.events, "entry")) {
    if (ev.value("func", "") != "main.burn") continue;
    if (!ev.contains("args") || ev["args"].size() != 2) return "args: " + ev.dump();
    const int seq = ev["args"][0].value("value", -1);
    if (seq > 0) got.insert({ev.value("goid", int64_t(-1)), seq});
  }
  std::string missed, picked;
  for (const auto& id : want)
    if (!got.count(id)) missed += "\n  missed " + call_name(id);
  size_t short_picked = 0;
  bool unknown = false;
  for (const auto& id : got) {
    if (want.count(id)) continue;
    auto t = run.truth.find(id);
    if (t == run.truth.end())
      unknown = true;
    else
      ++short_picked;
    picked += "\n  picked " + call_name(id) + " (the program measured " +
              (t == run.truth.end() ? std::string("nothing") : std::to_string(t->second.ns)) +
              " ns)";
  }
  const size_t shorts = run.truth.size() - kWorkers - want.size();  // the warm-ups left out
  if (!missed.empty() || unknown || short_picked * 4 > shorts) return missed + picked;
  return "";
}

// Each fixture: up to kAttempts runs, until `check` finds nothing wrong.
void each_fixture(const std::string& backend, const std::vector<std::string>& extra,
                  const std::function<std::string(const Traced&)>& check) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (ptrace and BPF)";
  if (!file_exists(gotap_binary())) GTEST_SKIP() << gotap_binary() << " is not built";
  const auto fixtures = default_fixtures();
  if (fixtures.empty()) GTEST_SKIP() << "no latency fixture built in " << fixtures_dir();
  for (const auto& fx : fixtures) {
    SCOPED_TRACE(fx.label());
    std::string misses;
    for (int i = 0; i < kAttempts; ++i) {
      const std::string miss = check(traced(fx, backend, extra));
      if (::testing::Test::HasFailure()) return;
      if (miss.empty()) break;
      misses += "\nrun " + std::to_string(i + 1) + ": " + miss;
      if (i + 1 == kAttempts) ADD_FAILURE() << misses;
    }
  }
}

class TrueDurations : public ::testing::TestWithParam<std::string> {};

TEST_P(TrueDurations, MatchTheProgramsOwnClock) {
  each_fixture(GetParam(), {}, off_calls);
}

TEST_P(TrueDurations, SlowerPicksTheCallsTheProgramMeasuredSlower) {
  each_fixture(GetParam(), {"--slower", std::to_string(kSlowerNs / 1000) + "us"}, slower_diff);
}

// main.tick traced too: a spin's call of it stops the thread twice under ptrace, which the
// program's clock leaves out (the fixture's burn) and so must duration_ns. ptrace only: eBPF
// holds nothing and corrects nothing, so its two probes' own time stays in the call (about
// 20 µs for tick's on a KVM guest, where the program's clock sees them too).
TEST(TrueDurationsPtrace, NestedHitsAreLeftOut) {
  each_fixture("ptrace", {"main.tick"}, off_calls);
}

// Stops gotap takes late are dated when they happened (ptrace): four goroutines call
// main.nap, which sleeps 1, 5 or 9 ms and returns the time it took by its own clock, read
// inside the call; every hit holds its thread 1 ms longer (GOTAP_TEST_HOLD_US), so a stop
// often waits while gotap is busy with another thread's. Dated from the thread's schedstat, a
// return after a sleep was dated when gotap took it: 60% to 76% of the calls were within
// 50 us of the program's time (median 24 to 37 us over, one in ten over 0.1 ms;
// GOTAP_PTRACE_STOP_BPF=0 still does that). From the int3's SIGTRAP and the scheduler's
// switches, 97% were (median 2 us over, none more than 1 us under). 90% must be, in
// one of three runs; each goroutine's first call is left out (a tracer's first hit in a
// process is slow on its own). The rest is Go's: a goroutine that gotap held long may be
// preempted as it resumes, before its clock starts, and that wait is the call's.
std::string off_naps(const std::string& out, int nappers, int naps) {
  std::map<CallId, uint64_t> truth;
  static const std::regex re(R"(GT nap goid=(\d+) seq=(\d+) ms=\d+ ns=(\d+))");
  for (std::sregex_iterator it(out.begin(), out.end(), re), end; it != end; ++it)
    truth[{std::stoll((*it)[1]), std::stoi((*it)[2])}] = std::stoull((*it)[3]);
  if (truth.size() != size_t(nappers * naps)) return "the program's lines:\n" + out.substr(0, 2000);
  // Each goroutine naps one call after the other: its returns come in seq order.
  std::map<int64_t, int> next_seq;
  std::string off;
  int calls = 0, within = 0;
  for (const auto& ev : events_in(out, "return")) {
    if (ev.value("func", "") != "main.nap") continue;
    const int64_t goid = ev.value("goid", int64_t(-1));
    const CallId id{goid, next_seq[goid]++};
    auto t = truth.find(id);
    if (t == truth.end()) return "a return the program did not make: " + call_name(id);
    if (!ev.contains("duration_ns")) return "no duration_ns: " + ev.dump();
    if (id.second == 0) continue;
    const uint64_t d = ev["duration_ns"].get<uint64_t>(), want = t->second;
    ++calls;
    if (d + 50'000 >= want && d <= want + 50'000)
      ++within;
    else
      off += "\n  " + call_name(id) + ": program " + std::to_string(want) + " ns, duration_ns " +
             std::to_string(d);
  }
  if (calls != nappers * (naps - 1)) return std::to_string(calls) + " calls traced";
  if (within * 10 >= calls * 9) return "";
  return std::to_string(within) + " of " + std::to_string(calls) +
         " calls within 50 us of the program's time:" + off;
}

TEST(TrueDurationsPtrace, StopsTakenLateAreDatedWhenTheyHappened) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (ptrace and BPF)";
  if (!file_exists(gotap_binary())) GTEST_SKIP() << gotap_binary() << " is not built";
  const auto fixtures = default_fixtures();
  if (fixtures.empty()) GTEST_SKIP() << "no latency fixture built in " << fixtures_dir();
  constexpr int kNappers = 4, kNaps = 6;
  setenv("GOTAP_TEST_HOLD_US", "1000", 1);
  for (const auto& fx : fixtures) {
    SCOPED_TRACE(fx.label());
    std::string misses;
    for (int i = 0; i < kAttempts; ++i) {
      RunResult r =
          run_command({gotap_binary(), "trace", "--backend", "ptrace", "--json", "main.nap", "--",
                       fx.path, "nap", std::to_string(kNappers), std::to_string(kNaps)},
                      120);
      ASSERT_EQ(r.exit_code, 0) << r.err;
      const std::string miss = off_naps(r.out, kNappers, kNaps);
      if (miss.empty()) break;
      misses += "\nrun " + std::to_string(i + 1) + ": " + miss;
      if (i + 1 == kAttempts) ADD_FAILURE() << misses;
    }
  }
  unsetenv("GOTAP_TEST_HOLD_US");
}

// A goroutine that parks (1, 8 and 30 ms sleeps, the latency fixture's `park`) keeps its
// sleep in its call. About one run in 40 of 180 calls, a thread's first run after gotap
// resumed it went unseen by the stop clock's scheduler program; its next wake-up, at the end
// of the park, passed for that first run, and the whole sleep was taken off the call as the
// resume's wait for a CPU (a 30 ms park measured 1.1 ms; CI's Interval.*ptrace_latency
// failures). The program's own window around each call bounds it from above (ptrace's stops
// are in it); the call must keep at least 80% of its sleep. 25 runs: before the fix about
// half of such sets of runs had a call off (in 100 runs, 5 were).
TEST(TrueDurationsPtrace, ParksKeepTheirSleepRunAfterRun) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (ptrace and BPF)";
  if (!file_exists(gotap_binary())) GTEST_SKIP() << gotap_binary() << " is not built";
  const auto fixtures = default_fixtures();
  if (fixtures.empty()) GTEST_SKIP() << "no latency fixture built in " << fixtures_dir();
  const auto& fx = fixtures.back();
  std::string off;
  size_t calls = 0;
  for (int run = 0; run < 25; ++run) {
    RunResult r = run_command({gotap_binary(), "trace", "--backend", "ptrace", "--json",
                               "main.park", "--", fx.path, "park", "1", "60"},
                              120);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    // The program's windows, in order: "gt window func=main.park goid=G ms=M start=S end=E".
    std::vector<std::pair<int, uint64_t>> windows;  // ms, end
    std::istringstream in(r.out);
    for (std::string l; std::getline(in, l);) {
      int ms = 0;
      unsigned long long g = 0, start = 0, end = 0;
      if (sscanf(l.c_str(), "gt window func=main.park goid=%llu ms=%d start=%llu end=%llu", &g, &ms,
                 &start, &end) == 4)
        windows.emplace_back(ms, end);
    }
    // Each return belongs to the first window that ends after it.
    for (const nlohmann::json& e : events_in(r.out, "return")) {
      const uint64_t ts = e["ts_ns"].get<uint64_t>();
      auto w = std::find_if(windows.begin(), windows.end(),
                            [&](const auto& w) { return w.second >= ts; });
      if (w == windows.end() || w->first < 8 || !e.contains("duration_ns")) continue;
      ++calls;
      const double d = e["duration_ns"].get<double>();
      if (d < 0.8 * w->first * 1e6)
        off += "\nrun " + std::to_string(run) + ": a " + std::to_string(w->first) +
               " ms park measured " + std::to_string(d / 1e6) + " ms";
    }
  }
  EXPECT_GT(calls, 25u * 100);
  EXPECT_EQ(off, "");
}

INSTANTIATE_TEST_SUITE_P(Backends, TrueDurations, ::testing::Values("ebpf", "ptrace"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace gotap::testing
