// The views of --why, once per backend, on the newest release's default build of the why
// fixture (tests/fixtures/why), which prints each main.step call's wall time ("GT <phase>
// <ns> <run_delay_ns>") and the goroutine ids of main and of the channel's sender ("GOID
// <func> <goid>"): Perfetto's flow arrow goes from the sender to main at the channel's
// wake-up, the off-CPU flame graph of the slow calls weighs each part as the fixture
// measured it (also from a record, through `gotap report`), and the call graph shows the
// runnable stretch and the waker.
#include <unistd.h>

#include <algorithm>
#include <map>
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

constexpr double kMs = 1e6;

struct Truth {
  std::map<std::string, double> wall, run_delay;  // phase -> ns
  std::map<std::string, int64_t> goid;            // "main", "chanSender" -> goid
};

Truth truth_of(const std::string& out) {
  Truth t;
  std::regex gt(R"(GT (\w+) (\d+) (\d+))"), id(R"(GOID (\w+) (\d+))");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), gt); it != std::sregex_iterator();
       ++it) {
    t.wall[(*it)[1]] = std::stod((*it)[2]);
    t.run_delay[(*it)[1]] = std::stod((*it)[3]);
  }
  for (auto it = std::sregex_iterator(out.begin(), out.end(), id); it != std::sregex_iterator();
       ++it)
    t.goid[(*it)[1]] = std::stoll((*it)[2]);
  return t;
}

// What the fixture's phase put in the time of the call, and its tolerance.
double tolerance(const Truth& t, const std::string& phase) {
  return std::max(3 * kMs, 0.15 * t.wall.at(phase)) + t.run_delay.at(phase);
}

class WhyViews : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (ptrace and BPF)";
    if (!file_exists(gotap_binary())) GTEST_SKIP() << gotap_binary() << " is not built";
    for (const Fixture& fx : all_fixtures("why"))
      if (fx.flavour == "default" &&
          (fx_.path.empty() || std::stoi(fx.go_version.substr(2)) > std::stoi(newest_.substr(2))))
        fx_ = fx, newest_ = fx.go_version;
    if (fx_.path.empty()) GTEST_SKIP() << "no why fixtures (tests/tools/build-fixtures.sh)";
    tmp_ = "/tmp/gotap-why-views-" + std::to_string(getpid());
  }
  void TearDown() override {
    for (const char* ext : {".json", ".rec", ".svg"}) unlink((tmp_ + ext).c_str());
  }
  Fixture fx_;
  std::string newest_, tmp_;
};

// The channel phase: main parks on the channel until main.chanSender sends. The arrow
// leaves the sender's track and ends on main's, at the same instant, where main's wait
// ends; the wait lasts as long as the call. The same from the record, via report.
TEST_P(WhyViews, PerfettoFlowsFromTheSenderToTheReceiver) {
  SCOPED_TRACE(fx_.label());
  auto r = run_command({gotap_binary(), "trace", "--backend", GetParam(), "--why", "--format",
                        "perfetto", "-o", tmp_ + ".json", "--record", tmp_ + ".rec", "main.step",
                        "--", fx_.path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Truth t = truth_of(r.out);
  ASSERT_EQ(t.wall.size(), 7u) << r.out;
  ASSERT_TRUE(t.goid.count("main") && t.goid.count("chanSender"))
      << "the fixture prints its goroutine ids: " << r.out;
  auto rep = run_command({gotap_binary(), "report", "--format", "perfetto", tmp_ + ".rec"});
  ASSERT_EQ(rep.exit_code, 0) << rep.err;
  for (const auto& [what, text] :
       {std::pair{"live", read_file(tmp_ + ".json")}, std::pair{"report", rep.out}}) {
    SCOPED_TRACE(what);
    const json doc = json::parse(text);
    std::map<int64_t, json> out, in;  // bind_id -> slice
    json wait;
    for (const json& e : doc["traceEvents"]) {
      if (e.value("flow_out", false)) out[e["bind_id"].get<int64_t>()] = e;
      if (e.value("flow_in", false)) in[e["bind_id"].get<int64_t>()] = e;
      if (e.value("name", "") == "(waiting: chan receive)") wait = e;
    }
    ASSERT_FALSE(wait.is_null()) << "main's channel wait is a slice";
    EXPECT_EQ(wait["tid"], t.goid.at("main"));
    EXPECT_NEAR(wait["dur"].get<double>() * 1e3, t.wall.at("chan"), tolerance(t, "chan"));
    EXPECT_EQ(wait["args"]["woken_by"]["goid"], t.goid.at("chanSender")) << wait;
    const double wake_us = wait["ts"].get<double>() + wait["dur"].get<double>();
    bool found = false;
    for (const auto& [id, from] : out) {
      if (from["tid"] != t.goid.at("chanSender")) continue;
      ASSERT_TRUE(in.count(id)) << "a flow with no end: " << from;
      const json& to = in[id];
      EXPECT_EQ(to["tid"], t.goid.at("main")) << to;
      EXPECT_EQ(to["ts"], from["ts"]) << "the arrow is the wake-up: one instant";
      EXPECT_NEAR(to["ts"].get<double>(), wake_us, 1) << "where main's wait ends";
      EXPECT_EQ(from["pid"], to["pid"]);
      found = true;
    }
    EXPECT_TRUE(found) << "no flow from the sender, goroutine " << t.goid.at("chanSender");
  }
  // The record's text view is the live text view: the status changes it carries for the
  // views are not printed.
  auto text = run_command({gotap_binary(), "report", tmp_ + ".rec"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_EQ(text.out.find("running -> waiting"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("why: waiting "), std::string::npos) << text.out;
}

// Parses the SVG's frames: "<title>NAME (12.345 ms, 6.78%)</title>" -> ns, summed by name.
std::map<std::string, double> svg_frames(const std::string& svg) {
  std::map<std::string, double> f;
  std::regex re(R"(<title>(.*?) \(([0-9.]+) ms, [0-9.]+%\)</title>)");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), re); it != std::sregex_iterator();
       ++it)
    f[(*it)[1]] += std::stod((*it)[2]) * kMs;
  return f;
}

// `trace --why --slower 12ms --format svg`: the slow calls' off-CPU flame graph. The
// fixture's phases of 15 ms and more are each one part beneath main.step, weighed by the
// phase's wall time; the 8 ms yield is not a slow call, so its runnable time is not there
// (unless the machine made it slow). The record's folded stacks say the same.
TEST_P(WhyViews, SlowCallsFlameGraphWeighsEachPart) {
  SCOPED_TRACE(fx_.label());
  auto r = run_command({gotap_binary(), "trace", "--backend", GetParam(), "--why", "--slower",
                        "12ms", "--format", "svg", "-o", tmp_ + ".svg", "--record", tmp_ + ".rec",
                        "main.step", "--", fx_.path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Truth t = truth_of(r.out);
  ASSERT_EQ(t.wall.size(), 7u) << r.out;
  auto folded = run_command({gotap_binary(), "report", "--format", "folded", tmp_ + ".rec"});
  ASSERT_EQ(folded.exit_code, 0) << folded.err;
  std::map<std::string, double> stacks;  // the leaf frame beneath main.step -> ns
  std::istringstream in(folded.out);
  for (std::string l; std::getline(in, l);) {
    const auto sp = l.rfind(' ');
    ASSERT_NE(sp, std::string::npos) << l;
    std::string stack = l.substr(0, sp);
    const std::string prefix = "main.step;";
    if (stack.starts_with(prefix)) stack = stack.substr(prefix.size());
    stacks[stack] += std::stod(l.substr(sp + 1));
  }
  const auto svg = svg_frames(read_file(tmp_ + ".svg"));
  std::string mutex = stacks.count("(waiting: semacquire)") ? "(waiting: semacquire)"
                                                            : "(waiting: sync.Mutex.Lock)";
  // Both backends name the system call (the fixture's raw nanosleep).
  const std::string syscall = "(syscall nanosleep)";
  const std::vector<std::pair<std::string, std::string>> parts = {
      {"(waiting: sleep)", "sleep"}, {"(waiting: chan receive)", "chan"}, {mutex, "mutex"},
      {syscall, "syscall"},          {"(waiting: IO wait)", "net"},       {"main.step", "cpu"}};
  for (const auto& [frame, phase] : parts) {
    SCOPED_TRACE(frame);
    ASSERT_GT(t.wall.at(phase), 12 * kMs) << "the fixture's phase is a slow call";
    // main.step's own frame holds its running time: the spin, and a little of each call.
    EXPECT_NEAR(stacks[frame], t.wall.at(phase), tolerance(t, phase)) << folded.out;
    // The SVG's main.step frame is the whole of the calls; its parts are as folded says.
    if (frame != "main.step")
      EXPECT_NEAR(svg.count(frame) ? svg.at(frame) : 0, t.wall.at(phase), tolerance(t, phase));
  }
  // Runnable time in the slow calls is small: what the kernel kept main's thread waiting
  // for a CPU meanwhile (the fixture's run delay), which lands in any Go state, and a little.
  double delays = 0;
  for (const auto& [phase, wall] : t.wall)
    if (wall > 12 * kMs) delays += t.run_delay.at(phase);
  if (t.wall.at("yield") <= 12 * kMs) {
    EXPECT_LT(stacks["(runnable)"], 3 * kMs + delays)
        << "the yield is not a slow call: " << folded.out;
  }
  double total = 0;
  for (const auto& [phase, wall] : t.wall)
    if (wall > 12 * kMs) total += wall;
  EXPECT_NEAR(svg.count("main.step") ? svg.at("main.step") : 0, total,
              std::max(3 * kMs, 0.15 * total));
}

// graph --why: the yield's runnable stretch is a line of its own under the call, as long as
// the spinner ran, and the channel's wait names the sender by its goroutine id.
TEST_P(WhyViews, GraphShowsTheRunnableStretchAndTheWaker) {
  SCOPED_TRACE(fx_.label());
  auto r = run_command({gotap_binary(), "graph", "--backend", GetParam(), "--why", "main.step",
                        "main.step", "--", fx_.path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Truth t = truth_of(r.out);
  ASSERT_EQ(t.wall.size(), 7u) << r.out;
  std::regex line(R"( *([0-9.]+) (us|ms|ns) \[ *(\d+)\] \|   (\(.*?\));(.*))");
  double runnable = 0;
  std::string chan;
  std::istringstream in(r.out);
  for (std::string l; std::getline(in, l);) {
    std::smatch m;
    if (!std::regex_match(l, m, line)) continue;
    const double unit = m[2] == "ms" ? kMs : m[2] == "us" ? 1e3 : 1;
    EXPECT_EQ(std::stoll(m[3]), t.goid.at("main")) << l;
    if (m[4] == "(runnable)") runnable = std::max(runnable, std::stod(m[1]) * unit);
    if (m[4] == "(waiting: chan receive)") chan = m[5];
  }
  EXPECT_NEAR(runnable, t.wall.at("yield"), tolerance(t, "yield")) << r.out;
  EXPECT_NE(
      chan.find("woken by main.chanSender [g " + std::to_string(t.goid.at("chanSender")) + "]"),
      std::string::npos)
      << r.out;
}

// The same slow calls with --goroutines too: their entries, held by --slower until their
// returns, come after their goroutine's changes went by with the other goroutine events;
// the flame graph still weighs each part (it once drew none of them), and names the system
// call from the kernel's intervals (once left out with --goroutines). `report` of the run's
// record draws the same (it once drew none: the record had each change once, before the
// entry), and its json view, like the live one, has no replayed change.
TEST_P(WhyViews, HeldCallsWithGoroutineEventsKeepTheirParts) {
  SCOPED_TRACE(fx_.label());
  const std::string rec = tmp_ + ".rec";
  auto r = run_command({gotap_binary(), "trace", "--backend", GetParam(), "--why", "--goroutines",
                        "--slower", "12ms", "--format", "folded", "-o", tmp_ + ".json", "--record",
                        rec, "main.step", "--", fx_.path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Truth t = truth_of(r.out);
  ASSERT_EQ(t.wall.size(), 7u) << r.out;
  const auto check = [&](const std::string& folded) {
    std::map<std::string, double> stacks;  // the leaf frame beneath main.step -> ns
    std::istringstream in(folded);
    for (std::string l; std::getline(in, l);) {
      const auto sp = l.rfind(' ');
      ASSERT_NE(sp, std::string::npos) << l;
      std::string stack = l.substr(0, sp);
      if (stack.starts_with("main.step;")) stack = stack.substr(10);
      stacks[stack] += std::stod(l.substr(sp + 1));
    }
    const std::string mutex = stacks.count("(waiting: semacquire)") ? "(waiting: semacquire)"
                                                                    : "(waiting: sync.Mutex.Lock)";
    for (const auto& [frame, phase] :
         std::vector<std::pair<std::string, std::string>>{{"(waiting: sleep)", "sleep"},
                                                          {"(waiting: chan receive)", "chan"},
                                                          {mutex, "mutex"},
                                                          {"(syscall nanosleep)", "syscall"},
                                                          {"(waiting: IO wait)", "net"}}) {
      SCOPED_TRACE(frame);
      EXPECT_NEAR(stacks[frame], t.wall.at(phase), tolerance(t, phase)) << folded;
    }
  };
  {
    SCOPED_TRACE("live");
    check(read_file(tmp_ + ".json"));
  }
  {
    SCOPED_TRACE("report");
    auto rep = run_command({gotap_binary(), "report", "--format", "folded", rec});
    ASSERT_EQ(rep.exit_code, 0) << rep.err;
    check(rep.out);
  }
  auto json = run_command({gotap_binary(), "report", "--json", rec});
  unlink(rec.c_str());
  ASSERT_EQ(json.exit_code, 0) << json.err;
  int states = 0;
  for (const auto& ev : events_in(json.out)) {
    EXPECT_FALSE(ev.contains("replayed")) << ev.dump();
    EXPECT_NE(ev.value("event", ""), "kwhy");
    if (ev.value("event", "") == "gstate") ++states;
  }
  EXPECT_GT(states, 0) << "a --goroutines record's json view has its status changes";
}

INSTANTIATE_TEST_SUITE_P(Backends, WhyViews, ::testing::Values("ebpf", "ptrace", "trampoline"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace gotap::testing
