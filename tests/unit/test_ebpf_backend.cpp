// The eBPF backend against the latency fixture (tests/fixtures/latency), driven directly
// through gotap::ebpf::run_session with plans from GoBinary. Ground truth is what the fixture
// prints about itself. Needs root and BPF; skips with the reason otherwise.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <map>
#include <regex>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "backends/ebpf/ebpf_backend.h"
#include "backends/ebpf/event_decoder.h"
#include "backends/ebpf/probe_config.h"
#include "core/plan/go_binary.h"
#include "tests/unit/fixtures.h"
#include "tests/unit/loopback.h"

namespace gotap::ebpf {
namespace {

using gotap::testing::all_fixtures;
using gotap::testing::Fixture;

class CollectSink : public EventSink {
 public:
  void emit(const Event& ev) override {
    // A reader held up (a slow terminal, a full pipe) while the program runs on.
    if (events.empty() && stall_first_ms)
      std::this_thread::sleep_for(std::chrono::milliseconds(stall_first_ms));
    events.push_back(ev);
  }
  int stall_first_ms = 0;
  std::vector<Event> events;
  std::vector<Event> of(const std::string& kind) const {
    std::vector<Event> out;
    for (const auto& e : events)
      if (e["event"] == kind) out.push_back(e);
    return out;
  }
  Event summary() const {
    auto s = of("summary");
    return s.empty() ? Event() : s.back();
  }
};

// Runs the fixture under the backend with its stdout captured in a file.
struct Traced {
  Result<void> status;
  CollectSink sink;
  std::string out;  // the fixture's stdout
};

Traced run_traced(const Fixture& fx, const std::vector<std::string>& patterns, Mode mode,
                  const std::vector<std::string>& args, EbpfOptions eo = {},
                  int stall_first_ms = 0) {
  Traced t{Result<void>(), {}, {}};
  t.sink.stall_first_ms = stall_first_ms;
  auto bin = GoBinary::open(fx.path);
  if (!bin) {
    t.status = bin.error();
    return t;
  }
  auto plan = (*bin)->plan(patterns, {});
  if (!plan) {
    t.status = plan.error();
    return t;
  }
  TraceOptions opts;
  opts.mode = mode;
  opts.target.argv = {fx.path};
  opts.target.argv.insert(opts.target.argv.end(), args.begin(), args.end());
  opts.duration_s = 120;  // a safety net; the fixture exits long before
  eo.quiet = true;

  char path[] = "/tmp/gotap-ebpf-out-XXXXXX";
  int fd = mkstemp(path);
  fflush(stdout);
  int saved = dup(1);
  dup2(fd, 1);
  t.status = run_session(*plan, opts, t.sink, eo);
  fflush(stdout);
  dup2(saved, 1);
  close(saved);
  close(fd);
  t.out = gotap::testing::read_file(path);
  unlink(path);
  return t;
}

std::string untraced_output(const Fixture& fx, const std::string& args) {
  std::string cmd = fx.path + " " + args;
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  pclose(p);
  return out;
}

std::vector<std::string> sorted_lines(const std::string& s) {
  std::vector<std::string> lines;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  std::sort(lines.begin(), lines.end());
  return lines;
}

std::vector<Fixture> latency_fixtures() {
  std::vector<Fixture> out;
  for (auto& f : all_fixtures("latency"))
    if (f.flavour == "default" || f.flavour == "stripped" || f.flavour == "pie" ||
        f.flavour == "cgo")
      out.push_back(f);
  return out;
}

#define REQUIRE_EBPF()                                                     \
  do {                                                                     \
    std::string why = unavailable_reason();                                \
    if (!why.empty()) GTEST_SKIP() << "eBPF backend unavailable: " << why; \
  } while (0)

#define REQUIRE_FIXTURES(v)                                                          \
  do {                                                                               \
    if ((v).empty())                                                                 \
      GTEST_SKIP() << "no latency fixtures under " << gotap::testing::fixtures_dir() \
                   << " (tests/tools/build-fixtures.sh)";                            \
  } while (0)

TEST(EbpfBackend, AvailableWhenRoot) {
  if (geteuid() != 0) GTEST_SKIP() << "not root";
  EXPECT_EQ(unavailable_reason(), "");
}

// Counts are exact and every call lands at or above its duration class: goroutines park on
// timers and resume on other threads, so entry and return pair by (goid, frame), not by thread.
TEST(EbpfBackend, LatencyClassesExact) {
  REQUIRE_EBPF();
  auto fixtures = latency_fixtures();
  REQUIRE_FIXTURES(fixtures);
  for (const auto& fx : fixtures) {
    SCOPED_TRACE(fx.label());
    auto t = run_traced(fx, {"main.park"}, Mode::Latency, {"park", "6", "3"});
    ASSERT_TRUE(t.status.ok()) << t.status.error().what();
    std::map<int, uint64_t> want;
    std::regex gt("GT park (\\d+) (\\d+)");
    for (const auto& l : sorted_lines(t.out)) {
      std::smatch m;
      if (std::regex_match(l, m, gt)) want[std::stoi(m[1])] = std::stoull(m[2]);
    }
    ASSERT_EQ(want.size(), 3u) << t.out;
    auto lat = t.sink.of("latency");
    ASSERT_EQ(lat.size(), 1u);
    // A sleep never ends early but may overshoot by any amount under load, so the histogram
    // must hold at least as many calls at or above each class's duration as the program made
    // of that class and longer. A bucket counts as "at or above d" when it reaches past d.
    auto reaching_past = [&](uint64_t d) {
      uint64_t n = 0;
      for (const auto& b : lat[0]["fine_buckets"])
        if (b["hi_ns"].get<uint64_t>() > d) n += b["count"].get<uint64_t>();
      return n;
    };
    EXPECT_GE(reaching_past(8'000'000), want[8] + want[30]);
    EXPECT_GE(reaching_past(30'000'000), want[30]);
    uint64_t total = 0;
    for (const auto& b : lat[0]["fine_buckets"]) total += b["count"].get<uint64_t>();
    EXPECT_EQ(total, want[1] + want[8] + want[30]);
    EXPECT_EQ(lat[0]["count"].get<uint64_t>(), want[1] + want[8] + want[30]);
    EXPECT_GE(lat[0]["min_ns"].get<uint64_t>(), 1'000'000u);
    EXPECT_GE(lat[0]["max_ns"].get<uint64_t>(), 30'000'000u);
    auto s = t.sink.summary();
    EXPECT_EQ(s["lost"], 0);
    EXPECT_EQ(s["unmatched_returns"], 0);
    EXPECT_EQ(s["backend"], "ebpf");
  }
}

TEST(EbpfBackend, CountExact) {
  REQUIRE_EBPF();
  auto fixtures = latency_fixtures();
  REQUIRE_FIXTURES(fixtures);
  for (const auto& fx : fixtures) {
    SCOPED_TRACE(fx.label());
    auto t = run_traced(fx, {"main.park", "main.grow"}, Mode::Count, {"park", "5", "2"});
    ASSERT_TRUE(t.status.ok()) << t.status.error().what();
    std::smatch m;
    ASSERT_TRUE(std::regex_search(t.out, m, std::regex("done (\\d+)")));
    auto counts = t.sink.of("count");
    ASSERT_EQ(counts.size(), 1u);  // grow is never called: no count event
    EXPECT_EQ(counts[0]["func"], "main.park");
    EXPECT_EQ(counts[0]["count"].get<uint64_t>(), std::stoull(m[1]));
  }
}

// grow() re-enters through morestack: an entry probe that refires (Go 1.19's stack-check
// probe) is corrected by the probe on the morestack call. Counts stay exact.
TEST(EbpfBackend, CountExactAcrossMorestack) {
  REQUIRE_EBPF();
  auto fixtures = latency_fixtures();
  REQUIRE_FIXTURES(fixtures);
  for (const auto& fx : fixtures) {
    SCOPED_TRACE(fx.label());
    auto t = run_traced(fx, {"main.grow"}, Mode::Count, {"grow", "4"});
    ASSERT_TRUE(t.status.ok()) << t.status.error().what();
    uint64_t want = 0;
    std::regex gt("GT main.grow depth=(\\d+) -> .*");
    for (const auto& l : sorted_lines(t.out)) {
      std::smatch m;
      if (std::regex_match(l, m, gt)) want += std::stoull(m[1]) + 1;
    }
    ASSERT_GT(want, 0u);
    auto counts = t.sink.of("count");
    ASSERT_EQ(counts.size(), 1u);
    EXPECT_EQ(counts[0]["count"].get<uint64_t>(), want);
  }
}

// Thousands of sites (every function of the binary, the runtime included) attach and detach
// in well under two seconds each, and the program still runs to completion.
TEST(EbpfBackend, ThousandsOfProbes) {
  REQUIRE_EBPF();
  auto fixtures = latency_fixtures();
  REQUIRE_FIXTURES(fixtures);
  const Fixture& fx = fixtures.back();
  auto t = run_traced(fx, {"*"}, Mode::Count, {"park", "2", "1"});
  ASSERT_TRUE(t.status.ok()) << t.status.error().what();
  auto s = t.sink.summary();
  EXPECT_GE(s["probes"].get<uint64_t>(), 5000u);
  EXPECT_LT(s["attach_ms"].get<double>(), 2000);
  EXPECT_LT(s["detach_ms"].get<double>(), 2000);
  EXPECT_EQ(s["exit_code"], 0);
  EXPECT_NE(t.out.find("done 6"), std::string::npos);
  // The counts of the fixture's own functions are exact: main.park as often as its ground
  // truth says, main.main once, and the functions "park" mode never calls not at all.
  uint64_t parks = 0;
  std::regex gt("GT park (\\d+) (\\d+)");
  for (const auto& l : sorted_lines(t.out)) {
    std::smatch m;
    if (std::regex_match(l, m, gt)) parks += std::stoull(m[2]);
  }
  ASSERT_GT(parks, 0u) << t.out;
  std::map<std::string, uint64_t> counts;
  for (const auto& c : t.sink.of("count")) counts[c["func"]] = c["count"].get<uint64_t>();
  EXPECT_EQ(counts["main.park"], parks);
  EXPECT_EQ(counts["main.main"], 1u);
  for (const char* f : {"main.grow", "main.describe", "main.work"})
    EXPECT_EQ(counts.count(f), 0u) << f << " is never called in park mode";
}

// grow() copies its goroutine's stack several times and runs the GC at the bottom while
// every frame is probed: the program's output must not change, and every entry returns.
TEST(EbpfBackend, StackGrowthAndGcSafe) {
  REQUIRE_EBPF();
  auto fixtures = latency_fixtures();
  REQUIRE_FIXTURES(fixtures);
  for (const auto& fx : fixtures) {
    SCOPED_TRACE(fx.label());
    auto t = run_traced(fx, {"main.grow"}, Mode::Trace, {"grow", "4"});
    ASSERT_TRUE(t.status.ok()) << t.status.error().what();
    EXPECT_EQ(sorted_lines(t.out), sorted_lines(untraced_output(fx, "grow 4")));
    std::regex gt("GT main.grow depth=(\\d+) -> (-?\\d+)");
    uint64_t want_calls = 0;
    std::map<int64_t, int64_t> results;  // depth -> result, from the fixture
    for (const auto& l : sorted_lines(t.out)) {
      std::smatch m;
      if (std::regex_match(l, m, gt)) {
        want_calls += std::stoull(m[1]) + 1;
        results[std::stoll(m[1])] = std::stoll(m[2]);
      }
    }
    ASSERT_EQ(results.size(), 4u);
    auto entries = t.sink.of("entry");
    auto returns = t.sink.of("return");
    EXPECT_EQ(entries.size(), want_calls);
    EXPECT_EQ(returns.size(), want_calls);
    // Pair by goroutine (LIFO per goid): each outermost call returns the printed result.
    std::map<uint64_t, std::vector<int64_t>> stacks;
    size_t matched = 0;
    for (const auto& e : t.sink.events) {
      if (e["event"] == "entry") {
        // DWARF: a typed int; stripped: the ArgInfo word, raw in hex.
        const auto& v = e["args"][0]["value"];
        stacks[e["goid"]].push_back(v.is_number()
                                        ? v.get<int64_t>()
                                        : static_cast<int64_t>(std::stoull(
                                              v.at("raw").at(0).get<std::string>(), nullptr, 16)));
      } else if (e["event"] == "return") {
        auto& st = stacks[e["goid"]];
        ASSERT_FALSE(st.empty());
        int64_t depth = st.back();
        st.pop_back();
        ASSERT_TRUE(e.contains("duration_ns"));
        if (results.count(depth) && st.empty()) {
          // Without DWARF the plan knows no results (ArgInfo describes arguments only); with
          // it, the result is there and is what the program printed.
          const bool dwarf = fx.flavour.find("stripped") == std::string::npos;
          if (dwarf) {
            ASSERT_FALSE(e["results"].empty()) << e;
            EXPECT_EQ(e["results"].at(0).at("value").get<int64_t>(), results[depth]);
          } else {
            EXPECT_TRUE(e["results"].empty()) << e;
          }
          ++matched;
        }
      }
    }
    EXPECT_EQ(matched, 4u);
    EXPECT_TRUE(t.sink.of("unfinished").empty());
    EXPECT_EQ(t.sink.summary()["unmatched_returns"], 0);
    EXPECT_EQ(t.sink.summary()["lost"], 0);
  }
}

// Scalars and strings match what the fixture printed for each call.
TEST(EbpfBackend, TraceArgsMatchGroundTruth) {
  REQUIRE_EBPF();
  auto fixtures = latency_fixtures();
  REQUIRE_FIXTURES(fixtures);
  for (const auto& fx : fixtures) {
    SCOPED_TRACE(fx.label());
    auto t = run_traced(fx, {"main.describe"}, Mode::Trace, {"args", "5"});
    ASSERT_TRUE(t.status.ok()) << t.status.error().what();
    std::vector<std::string> want_entries, want_results;
    std::istringstream in(t.out);
    std::regex ent("GT main.describe (id=.*)"), ret("GT main.describe -> (.*)");
    for (std::string l; std::getline(in, l);) {
      std::smatch m;
      if (std::regex_match(l, m, ret))
        want_results.push_back(m[1]);
      else if (std::regex_match(l, m, ent))
        want_entries.push_back(m[1]);
    }
    ASSERT_EQ(want_entries.size(), 5u);
    // Go's %q of these strings is a JSON string (ASCII escapes only, UTF-8 kept).
    auto q = [](const nlohmann::json& v) { return v.dump(-1, ' ', false); };
    auto entries = t.sink.of("entry");
    auto returns = t.sink.of("return");
    ASSERT_EQ(entries.size(), 5u);
    ASSERT_EQ(returns.size(), 5u);
    std::regex fields("id=(-?\\d+) name=(\".*\") ok=(true|false) k=(-?\\d+)");
    for (size_t i = 0; i < 5; ++i) {
      const auto& a = entries[i]["args"];
      ASSERT_EQ(a.size(), 4u);
      EXPECT_EQ(entries[i]["goid"], returns[i]["goid"]);
      std::smatch m;
      ASSERT_TRUE(std::regex_match(want_entries[i], m, fields)) << want_entries[i];
      const int64_t id = std::stoll(m[1]), k = std::stoll(m[4]);
      const bool ok = m[3] == "true";
      const std::string name = nlohmann::json::parse(m[2].str()).get<std::string>();
      if (a[0]["type"] == "int") {
        // DWARF: typed values.
        EXPECT_EQ(a[0]["value"].get<int64_t>(), id);
        EXPECT_EQ(q(a[1]["value"]), m[2].str());
        EXPECT_EQ(a[2]["value"].get<bool>(), ok);
        EXPECT_EQ(a[3]["value"].get<int64_t>(), k);
        ASSERT_FALSE(returns[i]["results"].empty());
        EXPECT_EQ(q(returns[i]["results"].at(0).at("value")), want_results[i]);
      } else {
        // Stripped: ArgInfo words of the argument's size, as raw hex words (as the ptrace
        // backend shows them); a string is its two words.
        auto word = [](const nlohmann::json& v, size_t i) {
          return std::stoull(v.at("raw").at(i).get<std::string>(), nullptr, 16);
        };
        ASSERT_EQ(a[0]["value"]["raw"].size(), 1u);
        EXPECT_EQ(word(a[0]["value"], 0), static_cast<uint64_t>(id));
        ASSERT_EQ(a[1]["value"]["raw"].size(), 2u);
        EXPECT_EQ(word(a[1]["value"], 1), name.size());
        EXPECT_EQ(word(a[2]["value"], 0), ok ? 1u : 0u);
        EXPECT_EQ(word(a[3]["value"], 0), static_cast<uint8_t>(k));
      }
    }
  }
}

// The event decoder renders captured words and copies through core's ValueDecoder, with the
// eBPF backend's shapes for what was not captured. Synthetic events for main.Acceptance of the
// args fixture (DWARF builds; a PIE at a made-up load bias): no root needed.
TEST(EventDecoder, CapturedValuesThroughCoresDecoder) {
  size_t tested = 0;
  for (const auto& fx : all_fixtures("args")) {
    if (fx.flavour != "default" && fx.flavour != "pie") continue;
    SCOPED_TRACE(fx.label());
    auto bin = GoBinary::open(fx.path);
    ASSERT_TRUE(bin) << bin.error().what();
    auto plan = (*bin)->plan({"main.Acceptance"}, {});
    ASSERT_TRUE(plan) << plan.error().what();
    const BinaryView& view = plan->binary_view;
    ASSERT_TRUE(view.types && view.elf && view.rt.types);
    ProbeConfig cfg = build_probe_config(*plan, Mode::Trace, 8, view.types);
    const SiteConfig* site = nullptr;
    for (const auto& s : cfg.sites)
      if (!(s.flags & GOTAP_PROBE_RET) && !s.params.empty()) site = &s;
    ASSERT_NE(site, nullptr);
    const uint64_t bias = fx.flavour == "pie" ? 0x555555000000 : 0;
    EventDecoder dec(cfg, view.types, view.elf, view.rt, bias, 8);

    gotap_event ev{};
    ev.probe = static_cast<uint32_t>(site - cfg.sites.data());
    ev.kind = GOTAP_EV_ENTRY;
    ev.nwords = cfg.record(ev.probe).nwords;
    ev.ncaps = cfg.record(ev.probe).ncaps;
    std::map<int, std::string> caps;  // by cap index; appended to data in that order
    auto param = [&](const std::string& name) -> const ParamCapture& {
      for (const auto& pc : site->params)
        if (pc.param->name == name) return pc;
      ADD_FAILURE() << "no parameter " << name;
      return site->params.front();
    };
    auto set = [&](const std::string& name, std::vector<uint64_t> words) {
      const auto& pc = param(name);
      for (size_t i = 0; i < words.size() && i < pc.words.size(); ++i)
        if (pc.words[i] >= 0) ev.words[pc.words[i]] = words[i];
    };
    auto rtype_of = [&](const std::string& type) {
      const GoType* t = view.types->by_name(type);
      return t && t->runtime_type ? view.rt.types + t->runtime_type + bias : 0;
    };
    set("i", {42});
    set("s", {0xc000100000, 100});
    caps[param("s").string_cap] = "abcdef";  // cut short by the event's data budget
    set("sl", {0xc000200000, 3, 4});
    set("m", {0});
    set("err", {0, 0});
    uint64_t int_type = rtype_of("int");
    ASSERT_NE(int_type, 0u);
    set("anyInt", {int_type, 0xc000300000});
    caps[param("anyInt").payload_cap] = std::string("\x07\0\0\0\0\0\0\0", 8);
    set("anyStr", {int_type, 0xc000400000});  // payload not copied
    set("p", {0xc000500000});
    set("b", {1});
    int off = 0;
    for (auto& [c, bytes] : caps) {
      ASSERT_GE(c, 0);
      std::memcpy(ev.data + off, bytes.data(), bytes.size());
      ev.cap_len[c] = static_cast<uint16_t>(bytes.size());
      ev.cap_ok |= 1u << c;
      off += static_cast<int>(bytes.size());
    }
    ev.data_len = static_cast<uint16_t>(off);

    Event e = dec.decode(&ev, sizeof ev);
    std::map<std::string, nlohmann::json> v;
    for (const auto& a : e.at("args")) v[a["name"]] = a["value"];
    EXPECT_EQ(v["i"], 42);
    EXPECT_EQ(v["s"], nlohmann::json::parse(R"({"str":"abcdef","len":100,"truncated":true})"));
    EXPECT_EQ(v["sl"], nlohmann::json::parse(R"({"len":3,"cap":4,"elems":[],"truncated":true})"));
    EXPECT_TRUE(v["m"].is_null());
    EXPECT_TRUE(v["err"].is_null());
    EXPECT_EQ(v["anyInt"], nlohmann::json::parse(R"({"type":"int","value":7})"));
    EXPECT_EQ(v["anyStr"],
              nlohmann::json::parse(R"({"type":"int","value":{"raw":["0xc000400000"]}})"));
    EXPECT_EQ(v["p"], nlohmann::json::parse(R"({"addr":"0xc000500000"})"));
    EXPECT_EQ(v["b"], true);
    EXPECT_EQ(v["f"], nlohmann::json::parse(R"({"raw":[]})"));  // an X register
    // The decoder reuses its last call's objects: a return (with and without its entry), and
    // a malformed record, in between leave nothing in the next entry.
    gotap_event r = ev;
    r.kind = GOTAP_EV_RETURN;
    r.duration_ns = 5;
    EXPECT_EQ(dec.decode(&r, sizeof r).value("duration_ns", 0), 5);
    r.flags = GOTAP_EVF_UNMATCHED;
    EXPECT_FALSE(dec.decode(&r, sizeof r).contains("duration_ns"));
    EXPECT_TRUE(dec.decode(&ev, 8).is_null());
    EXPECT_EQ(dec.decode(&ev, sizeof ev), e);
    ++tested;
  }
  if (!tested) GTEST_SKIP() << "no args fixtures under " << gotap::testing::fixtures_dir();
}

// The per-site perf-event fallback (kernels before 6.6) gives the same exact counts.
// A whole binary's sites are kept for the whole trace: count and latency keep no capture
// record per site (248 bytes each: 29 MB for caddy's 116,521 sites), and the record the map
// gets still says which function and kind of site it is. Trace keeps the records.
TEST(EbpfProbeConfig, CountKeepsNoCaptureRecords) {
  auto fx = all_fixtures("args");
  ASSERT_FALSE(fx.empty());
  auto bin = GoBinary::open(fx[0].path);
  ASSERT_TRUE(bin) << bin.error().what();
  auto plan = (*bin)->plan({"re:^main\\."}, {});
  ASSERT_TRUE(plan) << plan.error().what();
  const BinaryView& view = plan->binary_view;
  static_assert(sizeof(SiteConfig) <= 128, "SiteConfig holds no gotap_probe");
  for (Mode mode : {Mode::Count, Mode::Latency}) {
    ProbeConfig cfg = build_probe_config(*plan, mode, 8, view.types);
    ASSERT_GT(cfg.sites.size(), 2u);
    EXPECT_TRUE(cfg.records.empty());
    for (size_t i = 0; i < cfg.sites.size(); ++i) {
      gotap_probe p = cfg.record(i);
      EXPECT_EQ(p.func_id, cfg.sites[i].func_id);
      EXPECT_EQ(p.flags, cfg.sites[i].flags);
      EXPECT_EQ(p.nwords, 0);
    }
  }
  ProbeConfig trace = build_probe_config(*plan, Mode::Trace, 8, view.types);
  size_t with_words = 0;
  for (size_t i = 0; i < trace.sites.size(); ++i) {
    gotap_probe p = trace.record(i);
    EXPECT_EQ(p.func_id, trace.sites[i].func_id);
    if (p.nwords) ++with_words;
  }
  EXPECT_GT(with_words, 0u);
  EXPECT_EQ(with_words, trace.records.size());
}

// A function whose body is one RET: its entry and its RET are one address. The kernel runs
// two uprobes there in an order of its own (the RET's first, on 6.18), so the RET's site alone
// takes a uprobe and the BPF program runs the entry before it (GOTAP_PROBE_ALSO_ENTRY); the
// entry keeps its record (the arguments) and cookie. Other functions are left as they were.
TEST(EbpfProbeConfig, OneRetFunctionTakesOneUprobe) {
  ProbePlan plan;
  FuncPlan one;
  one.name = "main.nop";
  one.entry = one.entry_probe = 0x401000;
  one.end = 0x401001;
  one.ret_sites = {0x401000};
  one.abi = "internal";
  FuncPlan two = one;
  two.name = "main.two";
  two.entry = 0x401020;
  two.entry_probe = 0x401024;
  two.ret_sites = {0x401030, 0x401040};
  plan.funcs = {one, two};
  for (Mode mode : {Mode::Trace, Mode::Latency, Mode::Count}) {
    SCOPED_TRACE(static_cast<int>(mode));
    ProbeConfig cfg = build_probe_config(plan, mode, 8);
    if (mode == Mode::Count) {
      // Count probes no RET here: nothing to fold.
      EXPECT_EQ(cfg.folded_sites, 0);
      EXPECT_EQ(cfg.probe_count(), cfg.sites.size());
      continue;
    }
    ASSERT_EQ(cfg.sites.size(), 5u);
    EXPECT_EQ(cfg.probe_count(), 4u);
    const SiteConfig& entry = cfg.sites[0];
    const SiteConfig& ret = cfg.sites[1];
    EXPECT_TRUE(entry.folded);
    EXPECT_FALSE(entry.flags & GOTAP_PROBE_RET);
    EXPECT_TRUE(ret.flags & GOTAP_PROBE_RET);
    EXPECT_TRUE(ret.flags & GOTAP_PROBE_ALSO_ENTRY);
    EXPECT_FALSE(ret.folded);
    EXPECT_EQ(gotap_folded_entry(gotap_cookie(1, ret.flags, ret.func_id)),
              gotap_cookie(0, entry.flags, entry.func_id));
    for (size_t i = 2; i < cfg.sites.size(); ++i) {
      EXPECT_FALSE(cfg.sites[i].folded) << i;
      EXPECT_FALSE(cfg.sites[i].flags & GOTAP_PROBE_ALSO_ENTRY) << i;
    }
  }
}

// newproc1's entry probe reads fn, callergp and callerpc into words 0 to 2 from the
// registers the plan names: RBX and RCX (Go 1.18+), RDI and RSI (Go 1.17); for a signature
// gotap does not know, none, and no parent goid is read.
TEST(EbpfGoroutineSites, NewprocArgumentsFromThePlan) {
  auto create_site = [](uint8_t gp, uint8_t pc) {
    ProbePlan plan;
    plan.offsets.g_goid = 152;
    plan.goroutines.create = 0x401000;
    plan.goroutines.created = {0x401100};
    plan.goroutines.create_gp_arg = gp;
    plan.goroutines.create_pc_arg = pc;
    ProbeConfig cfg;
    add_goroutine_sites(cfg, plan);
    for (const auto& s : cfg.sites)
      if (s.func_id == GOTAP_FUNC_GCREATE) return cfg.record(&s - cfg.sites.data());
    ADD_FAILURE() << "no newproc1 entry site";
    return gotap_probe{};
  };
  auto regs = [](const gotap_probe& p) {
    std::vector<int> r;
    for (int i = 0; i < p.nwords; ++i)
      r.push_back(p.words[i].src == GOTAP_SRC_REG ? p.words[i].reg : -1);
    return r;
  };
  gotap_probe modern = create_site(1, 2), go117 = create_site(3, 4),
              unknown = create_site(GoroutineProbes::kNoArg, GoroutineProbes::kNoArg);
  EXPECT_EQ(regs(modern), (std::vector<int>{GOTAP_RAX, GOTAP_RBX, GOTAP_RCX}));
  EXPECT_EQ(regs(go117), (std::vector<int>{GOTAP_RAX, GOTAP_RDI, GOTAP_RSI}));
  for (const gotap_probe* p : {&modern, &go117}) {
    ASSERT_GE(p->ncaps, 2);
    EXPECT_EQ(p->caps[1].kind, GOTAP_CAP_DEREF);
    EXPECT_EQ(p->caps[1].word, 1);   // callergp
    EXPECT_EQ(p->caps[1].off, 152);  // its goid
  }
  EXPECT_EQ(unknown.ncaps, 1);  // fn's code pointer only
}

TEST(EbpfBackend, PerSiteFallback) {
  REQUIRE_EBPF();
  auto fixtures = latency_fixtures();
  REQUIRE_FIXTURES(fixtures);
  const Fixture& fx = fixtures.back();
  EbpfOptions eo;
  eo.force_per_site = true;
  auto t = run_traced(fx, {"main.park"}, Mode::Latency, {"park", "3", "2"}, eo);
  ASSERT_TRUE(t.status.ok()) << t.status.error().what();
  EXPECT_EQ(t.sink.summary()["attach"], "perf_event");
  // The fixture prints "GT park <ms> <calls>" per class: as many calls must be counted.
  uint64_t want = 0;
  std::regex gt("GT park (\\d+) (\\d+)");
  for (const auto& l : sorted_lines(t.out)) {
    std::smatch m;
    if (std::regex_match(l, m, gt)) want += std::stoull(m[2]);
  }
  ASSERT_GT(want, 0u) << t.out;
  auto lat = t.sink.of("latency");
  ASSERT_EQ(lat.size(), 1u);
  EXPECT_EQ(lat[0]["count"].get<uint64_t>(), want);
}

// A ring buffer that overflows drops events, and says how many: with a 4 KiB ring (about 15
// events) and the reader held up for 300 ms at its first event, the program's calls
// overflow it; the summary's `lost` is then exactly the events the program's calls made
// (an entry and a return each) that did not arrive.
TEST(EbpfBackend, LostEventsAreCountedWhenTheRingOverflows) {
  REQUIRE_EBPF();
  auto fixtures = latency_fixtures();
  REQUIRE_FIXTURES(fixtures);
  const Fixture& fx = fixtures.front();
  EbpfOptions eo;
  eo.ringbuf_bytes = 4096;
  const uint64_t calls = 20000;
  auto t = run_traced(fx, {"main.work"}, Mode::Trace, {"bench", std::to_string(calls)}, eo, 300);
  ASSERT_TRUE(t.status.ok()) << t.status.error().what();
  ASSERT_NE(t.out.find("ns_per_call"), std::string::npos) << t.out;
  const uint64_t seen = t.sink.of("entry").size() + t.sink.of("return").size();
  const Event sum = t.sink.summary();
  ASSERT_TRUE(sum.contains("lost")) << sum;
  const uint64_t lost = sum["lost"].get<uint64_t>();
  EXPECT_GT(lost, 0u) << "seen " << seen;
  EXPECT_EQ(seen + lost, 2 * calls) << "seen " << seen << ", lost " << lost;
}

// Attach to a running process by pid, stop on request: the count is exactly the calls the
// program made while attached, and the process keeps running after the probes go.
TEST(EbpfBackend, AttachByPidAndStop) {
  REQUIRE_EBPF();
  if (!gotap::testing::file_exists(gotap::testing::gotap_binary()))
    GTEST_SKIP() << gotap::testing::gotap_binary() << " is not built";
  auto fixtures = latency_fixtures();
  REQUIRE_FIXTURES(fixtures);
  const Fixture& fx = fixtures.back();
  int in[2], out[2];
  ASSERT_EQ(pipe(in), 0);
  ASSERT_EQ(pipe(out), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    close(in[1]);
    close(out[0]);
    execl(fx.path.c_str(), fx.path.c_str(), "spin", nullptr);
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  auto ask = [&](int n) {
    std::string line = std::to_string(n) + "\n";
    EXPECT_EQ(write(in[1], line.data(), line.size()), static_cast<ssize_t>(line.size()));
    const std::string did = "did " + std::to_string(n) + "\n";
    std::string got = gotap::testing::read_until(out[0], did, 30000);
    EXPECT_NE(got.find(did), std::string::npos) << got;
  };
  ask(1000);  // calls before the attach are not counted
  const std::string outfile = "/tmp/gotap-attach-" + std::to_string(getpid()) + ".json";
  gotap::testing::Child tap =
      gotap::testing::spawn({gotap::testing::gotap_binary(), "count", "--backend", "ebpf", "--json",
                             "-o", outfile, "-p", std::to_string(pid), "main.work"});
  ASSERT_GT(tap.pid, 0);
  std::string err = gotap::testing::read_until(tap.err, "Tracing ", 60000);
  ASSERT_NE(err.find("Tracing "), std::string::npos) << err;
  ask(5000);
  ask(2345);
  kill(tap.pid, SIGINT);
  int st = 0;
  ASSERT_EQ(waitpid(tap.pid, &st, 0), tap.pid);
  err += gotap::testing::read_all(tap.err);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st << "\n" << err;
  close(tap.out);
  close(tap.err);
  auto counts = gotap::testing::events_in(gotap::testing::read_file(outfile), "count");
  std::remove(outfile.c_str());
  ASSERT_EQ(counts.size(), 1u) << err;
  EXPECT_EQ(counts[0]["count"].get<uint64_t>(), 5000u + 2345u);
  // Still alive and well: it serves one more batch, and ends normally when stdin closes.
  ask(10);
  close(in[1]);
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  close(out[0]);
}

TEST(EbpfBackend, LaunchFailureIsOneClearError) {
  REQUIRE_EBPF();
  auto fixtures = latency_fixtures();
  REQUIRE_FIXTURES(fixtures);
  auto bin = GoBinary::open(fixtures.back().path);
  ASSERT_TRUE(bin.ok());
  auto plan = (*bin)->plan({"main.park"}, {});
  ASSERT_TRUE(plan.ok());
  TraceOptions opts;
  opts.target.argv = {"/nonexistent/gotap-test-binary"};
  CollectSink sink;
  auto r = run_session(*plan, opts, sink);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().what().find("/nonexistent/gotap-test-binary"), std::string::npos);
  EXPECT_EQ(r.error().what().find('\n'), std::string::npos);
}

}  // namespace
}  // namespace gotap::ebpf
