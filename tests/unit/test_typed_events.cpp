// The typed events and their one JSON writer: what both backends emit (docs/json.md).
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "core/events/typed_events.h"
#include "core/why/why_tracker.h"

namespace gotap {
namespace {

CallSite site(const std::string& func, uint64_t ts) {
  return {ts, 10, 11, 7, func};
}

// Every event kind, with every optional field set.
std::vector<TypedEvent> every_kind() {
  CallEntry e{site("main.f", 1)};
  e.args.push_back({"x", "int", 3});
  e.inlined = true;
  e.inlined_in = "main.g";
  e.stack = Event::array();
  CallReturn r{site("main.f", 2)};
  r.duration_ns = 1;
  r.wall_ns = 2;
  r.results.push_back({"~r0", "error", nullptr});
  r.stack = Event::array();
  why::WhySplit w;
  w.waits.push_back({"chan receive", 1, 1, {why::WokenBy::Goroutine, 8, "main.g"}, "main.f"});
  w.preempted_ns = 0;
  w.syscalls_named = true;
  w.syscalls = {{"read", 1, 1}};
  r.why = why::why_json(w);
  LatencySummary l;
  l.add(5);
  RunSummary s;
  s.backend = "ptrace";
  s.pid = 10;
  s.exit_code = 0;
  s.exit_signal = 9;
  FuncCount c{"main.f", 2, 1};  // count --all's: with its processes
  c.processes = std::vector<ProcessCount>{{10, "prog", 2}};
  GoroutineState g{3, 10, 11, 7, "running", "waiting", "chan receive", GoroutineSource{}};
  g.source->parent_goid = 1;
  g.source->func = "main.worker";
  g.source->created_by = "main.main";
  return {e,
          r,
          CallUnfinished{site("main.f", 4), 1},
          c,
          FuncLatency{"main.f", l},
          s,
          GoroutineCreate{3, 10, 11, 7, GoroutineSource{1, "main.worker", "main.main"}},
          g,
          GoroutineExit{4, 10, 7}};
}

// The keys docs/json.md's example lines give each event kind.
std::map<std::string, std::set<std::string>> documented_keys() {
  std::ifstream in(std::string(GOTAP_SOURCE_DIR) + "/docs/json.md");
  std::stringstream ss;
  ss << in.rdbuf();
  std::string doc = ss.str();
  std::map<std::string, std::set<std::string>> keys;
  std::regex line(R"re(\{"event":"(\w+)"[^\n]*(\n [^\n]*)*)re");
  std::regex key(R"re("(\w+)":)re");
  for (std::sregex_iterator m(doc.begin(), doc.end(), line), end; m != end; ++m) {
    std::string text = (*m)[0];
    auto& k = keys[(*m)[1]];
    for (std::sregex_iterator q(text.begin(), text.end(), key); q != end; ++q) k.insert((*q)[1]);
  }
  return keys;
}

TEST(TypedEvents, JsonCarriesEveryDocumentedField) {
  auto docs = documented_keys();
  std::set<std::string> kinds;
  for (const auto& te : every_kind()) {
    Event ev = to_event(te);
    std::string kind = ev.at("event");
    kinds.insert(kind);
    ASSERT_TRUE(docs.count(kind)) << kind << " has no example in docs/json.md";
    for (const auto& k : docs[kind]) {
      // Nested keys of the examples (a bucket's lo_ns) are checked one level down.
      bool nested = k == "lo_ns" || k == "hi_ns" || (kind == "latency" && k == "count");
      if (kind == "count" && (k == "pid" || k == "comm"))
        nested = ev.at("processes").at(0).contains(k);
      // -i's keys are the interval printer's (frontends/interval_printer.h, Interval.*),
      // added to the backends' count and latency events, not fields of their own.
      bool interval = k == "interval" || k == "start_ts_ns" || k == "end_ts_ns";
      // --why's keys are the why object's, its waits' and its system calls' (checked there).
      if (kind == "return" && !ev.contains(k)) {
        const Event& why = ev.at("why");
        const Event& wait = why.at("waits").at(0);
        nested = why.contains(k) || wait.contains(k) || wait.at("woken_by").contains(k) ||
                 why.at("syscalls").at(0).contains(k);
      }
      if (!nested && !interval) {
        EXPECT_TRUE(ev.contains(k)) << kind << " lacks documented field " << k;
      }
    }
  }
  EXPECT_EQ(kinds.size(), std::variant_size_v<TypedEvent>);
}

TEST(TypedEvents, OptionalFieldsOnlyWhenKnown) {
  Event e = to_event(CallEntry{site("main.f", 1)});
  EXPECT_FALSE(e.contains("inlined"));
  EXPECT_FALSE(e.contains("stack"));
  EXPECT_TRUE(e.at("args").is_array());
  Event r = to_event(CallReturn{site("main.f", 1)});
  EXPECT_FALSE(r.contains("duration_ns"));
  EXPECT_TRUE(r.at("results").is_array());
  RunSummary s;
  s.extra = {{"lost", 99}, {"hits", 3}};  // a backend counter never replaces a contract field
  Event se = to_event(s);
  EXPECT_EQ(se.at("lost"), 0);
  EXPECT_EQ(se.at("hits"), 3);
  EXPECT_FALSE(se.contains("pid"));
  Event g = to_event(GoroutineState{1, 2, 3, 4, "running", "runnable", "", std::nullopt});
  EXPECT_FALSE(g.contains("reason"));
  EXPECT_FALSE(g.contains("parent_goid"));
}

TEST(TypedEvents, EndOfRunEventsInOneOrder) {
  auto counts = count_events({{"main.b", 2}, {"main.z", 0}, {"main.a", 1}});
  ASSERT_EQ(counts.size(), 2u);
  EXPECT_EQ(counts[0].at("func"), "main.a");
  EXPECT_EQ(counts[1].at("func"), "main.b");

  LatencySummary one;
  one.add(100);
  auto lat = latency_events({{"main.y", one}, {"main.x", LatencySummary{}}, {"main.c", one}});
  ASSERT_EQ(lat.size(), 2u);
  EXPECT_EQ(lat[0].at("func"), "main.c");

  auto open = unfinished_events(
      {CallUnfinished{site("main.late", 9), 5}, CallUnfinished{site("main.early", 9), 2}});
  ASSERT_EQ(open.size(), 2u);
  EXPECT_EQ(open[0].at("func"), "main.early");
  EXPECT_EQ(open[0].at("entry_ts_ns"), 2);
  EXPECT_EQ(open[0].at("ts_ns"), 9);
}

TEST(TypedEvents, LatencyBucketsAddUp) {
  LatencySummary s;
  for (uint64_t v : {0, 1, 7, 8, 1000, 1023, 1024, 5'000'000}) s.add(v);
  Event e = to_event(FuncLatency{"f", s});
  for (const char* field : {"buckets", "fine_buckets"}) {
    uint64_t total = 0, prev_hi = 0;
    for (const auto& b : e.at(field)) {
      EXPECT_LT(b.at("lo_ns").get<uint64_t>(), b.at("hi_ns").get<uint64_t>());
      EXPECT_GE(b.at("lo_ns").get<uint64_t>(), prev_hi) << field;
      prev_hi = b.at("hi_ns");
      total += b.at("count").get<uint64_t>();
    }
    EXPECT_EQ(total, s.count) << field;
  }
  EXPECT_EQ(e.at("min_ns"), 0);
  EXPECT_EQ(e.at("max_ns"), 5'000'000);
}

}  // namespace
}  // namespace gotap
