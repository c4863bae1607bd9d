// Goroutine life cycles without a tracee: GoroutineEvents fed with synthetic probe
// observations, and the `gotap goroutines` views (table and filter) fed with synthetic events.
// Everything here is deterministic, so the events and the table cells are compared exactly.
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/events/events.h"
#include "core/events/goroutine_events.h"
#include "core/output/goroutine_views.h"

namespace gotap {
namespace {

constexpr int kPid = 4242;
constexpr uint64_t kMs = 1000000;

class CollectingSink : public EventSink {
 public:
  void emit(const Event& ev) override { events.push_back(ev); }
  std::vector<Event> events;
};

// Fake text layout: main.main spans [0x2000, 0x2010) and main.next starts right after it, so
// a go statement whose call is main.main's last instruction has its return address (0x2010)
// in main.next; only caller_pc - 1 names the right function.
std::string fake_func_of(uint64_t pc) {
  if (pc >= 0x1000 && pc < 0x1100) return "main.worker";
  if (pc >= 0x2000 && pc < 0x2010) return "main.main";
  if (pc >= 0x2010 && pc < 0x2100) return "main.next";
  return "";
}
constexpr uint64_t kWorkerPc = 0x1000;
constexpr uint64_t kCallerPc = 0x2010;  // return address of the go statement's call

Event gstate(uint64_t ts, int tid, uint64_t goid, const std::string& from, const std::string& to) {
  return {{"event", "gstate"}, {"ts_ns", ts},  {"pid", kPid}, {"tid", tid},
          {"goid", goid},      {"from", from}, {"to", to}};
}
Event gexit(uint64_t ts, uint64_t goid) {
  return {{"event", "gexit"}, {"ts_ns", ts}, {"pid", kPid}, {"goid", goid}};
}

struct GoroutineEventsTest : ::testing::Test {
  CollectingSink sink;
  std::vector<uint64_t> looked_up;  // every pc func_of was asked about
  GoroutineEvents ge{sink, kPid, [this](uint64_t pc) {
                       looked_up.push_back(pc);
                       return fake_func_of(pc);
                     }};
};

TEST(GStatusName, KnownAndUnknown) {
  EXPECT_EQ(gstatus_name(kGIdle), "idle");
  EXPECT_EQ(gstatus_name(kGRunnable), "runnable");
  EXPECT_EQ(gstatus_name(kGRunning), "running");
  EXPECT_EQ(gstatus_name(kGSyscall), "syscall");
  EXPECT_EQ(gstatus_name(kGWaiting), "waiting");
  EXPECT_EQ(gstatus_name(kGDead), "dead");
  EXPECT_EQ(gstatus_name(kGCopystack), "copystack");
  EXPECT_EQ(gstatus_name(kGPreempted), "preempted");
  EXPECT_EQ(gstatus_name(kGLeaked), "leaked");
  EXPECT_EQ(gstatus_name(kGDeadExtra), "deadextra");
  // 5 and 7 are the runtime's unused _Gmoribund_unused and _Genqueue_unused.
  EXPECT_EQ(gstatus_name(5), "status_5");
  EXPECT_EQ(gstatus_name(7), "status_7");
  EXPECT_EQ(gstatus_name(12), "status_12");
  EXPECT_EQ(gstatus_name(0x1002), "status_4098");  // a _Gscan bit is not decoded either
}

// Up to Go 1.23 newproc1 changes the status of a reused g before it assigns the new goid, so
// the status probe reads the goid of the g's previous life: the events must use the goid that
// newproc1 returns, and the time of the status change.
TEST_F(GoroutineEventsTest, CreationWithStaleGoid) {
  ge.on_create(100, 11, 1, kWorkerPc, kCallerPc);
  ge.on_status(150, 11, 3, kGDead, kGRunnable);
  EXPECT_TRUE(sink.events.empty()) << "the status change waits for the real goid";
  ge.on_created(200, 11, 42);

  const std::vector<Event> want = {
      {{"event", "gcreate"},
       {"ts_ns", 150},
       {"pid", kPid},
       {"tid", 11},
       {"goid", 42},
       {"parent_goid", 1},
       {"func", "main.worker"},
       {"created_by", "main.main"}},
      gstate(150, 11, 42, "dead", "runnable"),
  };
  EXPECT_EQ(sink.events, want);
  EXPECT_EQ(ge.events(), 2u);
  // The go statement is found from the call instruction, before the return address.
  EXPECT_EQ(looked_up, (std::vector<uint64_t>{kWorkerPc, kCallerPc - 1}));
}

// A fresh g (malg) goes idle -> dead on the creating thread before dead -> runnable: that is
// not the creation, and must neither be emitted nor take the creation's place.
TEST_F(GoroutineEventsTest, FreshGoroutineIdleToDeadIsNotTheCreation) {
  ge.on_create(100, 11, 1, kWorkerPc, kCallerPc);
  ge.on_status(110, 11, 0, kGIdle, kGDead);
  ge.on_status(120, 11, 0, kGDead, kGRunnable);
  ge.on_created(130, 11, 43);

  ASSERT_EQ(sink.events.size(), 2u);
  EXPECT_EQ(sink.events[0]["event"], "gcreate");
  EXPECT_EQ(sink.events[0]["ts_ns"], 120);
  EXPECT_EQ(sink.events[0]["goid"], 43);
  EXPECT_EQ(sink.events[1], gstate(120, 11, 43, "dead", "runnable"));
}

TEST_F(GoroutineEventsTest, StatusOnAnotherThreadIsEmittedAtOnce) {
  ge.on_create(100, 11, 1, kWorkerPc, kCallerPc);
  ge.on_status(110, 12, 5, kGRunning, kGWaiting);
  // Emitted while the creation on thread 11 is pending, not held back with it.
  ASSERT_EQ(sink.events.size(), 1u);
  EXPECT_EQ(sink.events[0], gstate(110, 12, 5, "running", "waiting"));

  ge.on_status(120, 11, 3, kGDead, kGRunnable);
  EXPECT_EQ(sink.events.size(), 1u);
  ge.on_created(130, 11, 42);

  ASSERT_EQ(sink.events.size(), 3u);
  EXPECT_EQ(sink.events[1]["event"], "gcreate");
  EXPECT_EQ(sink.events[1]["goid"], 42);
  EXPECT_EQ(sink.events[1]["parent_goid"], 1);
  EXPECT_EQ(sink.events[1]["ts_ns"], 120);
  EXPECT_EQ(sink.events[2], gstate(120, 11, 42, "dead", "runnable"));
  EXPECT_EQ(ge.events(), 3u);
}

// A creation on one thread does not hold back a goroutine leaving dead on another one.
// A dead -> runnable change with no newproc1 entry on its thread (the creation began before
// the attach) may carry the g's previous goid (Go <= 1.23): it is dropped, and the
// goroutine shows up at its next change. It is not taken for the other thread's creation.
TEST_F(GoroutineEventsTest, DeadOnAnotherThreadIsNotTheCreation) {
  ge.on_create(100, 11, 1, kWorkerPc, kCallerPc);
  ge.on_status(110, 12, 9, kGDead, kGRunnable);
  EXPECT_TRUE(sink.events.empty());
  EXPECT_FALSE(ge.known(9));
  ge.on_status(120, 12, 10, kGRunnable, kGRunning);
  ASSERT_EQ(sink.events.size(), 1u);
  EXPECT_EQ(sink.events[0], gstate(120, 12, 10, "runnable", "running"));
  // The creation on thread 11 is still paired with its own change.
  ge.on_status(130, 11, 0, kGDead, kGRunnable);
  ge.on_created(140, 11, 11);
  ASSERT_EQ(sink.events.size(), 3u);
  EXPECT_EQ(sink.events[1]["event"], "gcreate");
  EXPECT_EQ(sink.events[1]["goid"], 11);
}

// Before Go 1.20 only runtime.park_m sets g.waitreason before the change to waiting; from
// any other caller the value read is stale, and no reason is given.
TEST(GoroutineEventsReason, BeforeGo120OnlyParkMNamesIt) {
  CollectingSink sink;
  auto func_of = [](uint64_t pc) -> std::string {
    if (pc >= 0x3000 && pc < 0x3100) return "runtime.park_m";
    if (pc >= 0x4000 && pc < 0x4100) return "runtime.gcAssistAlloc1";
    return "";
  };
  GoroutineEvents ge{sink, kPid, func_of, {"", "GC assist marking", "chan receive"}, true};
  ge.on_status(100, 11, 7, kGRunning, kGWaiting, 2, nullptr, 0x3010);
  ge.on_status(200, 11, 7, kGRunning, kGWaiting, 2, nullptr, 0x4010);  // stale
  ge.on_status(300, 11, 7, kGRunning, kGWaiting, 2, nullptr, 0);       // caller unknown
  ASSERT_EQ(sink.events.size(), 3u);
  EXPECT_EQ(sink.events[0].value("reason", ""), "chan receive");
  EXPECT_FALSE(sink.events[1].contains("reason"));
  EXPECT_FALSE(sink.events[2].contains("reason"));
}

// Go 1.24+ sets the goid first: the status change already has it, the result is the same.
TEST_F(GoroutineEventsTest, CreationWithGoidAlreadySet) {
  ge.on_create(100, 11, 1, kWorkerPc, kCallerPc);
  ge.on_status(150, 11, 42, kGDead, kGRunnable);
  ge.on_created(200, 11, 42);
  ASSERT_EQ(sink.events.size(), 2u);
  EXPECT_EQ(sink.events[0]["ts_ns"], 150);
  EXPECT_EQ(sink.events[0]["goid"], 42);
  EXPECT_EQ(sink.events[1], gstate(150, 11, 42, "dead", "runnable"));
}

// Only the first change from dead belongs to the creation; a later one on the same thread
// has no newproc1 entry of its own, so its goid may be stale: it is dropped.
TEST_F(GoroutineEventsTest, OnlyOneStatusChangeIsHeldPerCreation) {
  ge.on_create(100, 11, 1, kWorkerPc, kCallerPc);
  ge.on_status(110, 11, 3, kGDead, kGRunnable);
  ge.on_status(120, 11, 8, kGDead, kGRunnable);
  EXPECT_TRUE(sink.events.empty());
  ge.on_created(130, 11, 42);
  ASSERT_EQ(sink.events.size(), 2u);
  EXPECT_EQ(sink.events[1], gstate(110, 11, 42, "dead", "runnable"));
}

// Without a status change seen, the creation is dated by newproc1's return and stands alone.
TEST_F(GoroutineEventsTest, CreationWithoutStatusChange) {
  ge.on_create(100, 11, 1, kWorkerPc, kCallerPc);
  ge.on_created(200, 11, 42);
  const std::vector<Event> want = {{{"event", "gcreate"},
                                    {"ts_ns", 200},
                                    {"pid", kPid},
                                    {"tid", 11},
                                    {"goid", 42},
                                    {"parent_goid", 1},
                                    {"func", "main.worker"},
                                    {"created_by", "main.main"}}};
  EXPECT_EQ(sink.events, want);
  // The creation is consumed: a second return on that thread has nothing to complete.
  ge.on_created(300, 11, 43);
  EXPECT_EQ(sink.events.size(), 1u);
}

// Names that func_of does not know are left out rather than emitted empty; a caller pc of 0
// is not looked up at all (0 - 1 would wrap).
TEST_F(GoroutineEventsTest, UnknownFunctionsAreOmitted) {
  ge.on_create(100, 11, 1, 0x9999, 0);
  ge.on_created(200, 11, 42);
  ASSERT_EQ(sink.events.size(), 1u);
  EXPECT_FALSE(sink.events[0].contains("func"));
  EXPECT_FALSE(sink.events[0].contains("created_by"));
  EXPECT_EQ(looked_up, (std::vector<uint64_t>{0x9999}));
}

TEST_F(GoroutineEventsTest, CreatedWithoutCreateIsIgnored) {
  ge.on_created(200, 11, 42);
  EXPECT_TRUE(sink.events.empty());
  EXPECT_EQ(ge.events(), 0u);
}

TEST_F(GoroutineEventsTest, RunningToDeadExits) {
  ge.on_status(300, 11, 42, kGRunning, kGDead);
  const std::vector<Event> want = {gstate(300, 11, 42, "running", "dead"), gexit(300, 42)};
  EXPECT_EQ(sink.events, want);
  EXPECT_EQ(ge.events(), 2u);
}

// g.waitreason names why a goroutine parks: only on the way to waiting, and only a value
// the release's table has.
TEST(GoroutineEventsReason, NamedOnTheWayToWaiting) {
  CollectingSink sink;
  GoroutineEvents ge{sink, kPid, fake_func_of, {"", "GC assist marking", "chan receive"}};
  ge.on_status(100, 11, 7, kGRunning, kGWaiting, 2);
  ge.on_status(200, 11, 7, kGWaiting, kGRunnable, 2);  // a stale reason: not waiting
  ge.on_status(300, 11, 7, kGRunning, kGWaiting, 9);   // past the table
  ge.on_status(400, 11, 7, kGRunning, kGWaiting, -1);  // not read
  ge.on_status(500, 11, 7, kGRunning, kGWaiting, 0);   // waitReasonZero: none given
  ASSERT_EQ(sink.events.size(), 5u);
  Event want = gstate(100, 11, 7, "running", "waiting");
  want["reason"] = "chan receive";
  EXPECT_EQ(sink.events[0], want);
  EXPECT_EQ(sink.events[1], gstate(200, 11, 7, "waiting", "runnable"));
  for (size_t i = 2; i < 5; ++i) EXPECT_FALSE(sink.events[i].contains("reason")) << i;
}

// A goroutine created before the trace says where it came from on its first change only;
// one created while traced never needs to.
TEST_F(GoroutineEventsTest, FirstSightOfAnOlderGoroutineCarriesItsOrigin) {
  GoroutineOrigin o;
  o.has_parent = true;
  o.parent_goid = 3;
  o.gopc = kCallerPc;
  o.startpc = kWorkerPc;
  EXPECT_FALSE(ge.known(9));
  ge.on_status(100, 11, 9, kGWaiting, kGRunnable, -1, &o);
  ge.on_status(200, 11, 9, kGRunnable, kGRunning, -1, &o);
  EXPECT_TRUE(ge.known(9));
  ASSERT_EQ(sink.events.size(), 2u);
  Event want = gstate(100, 11, 9, "waiting", "runnable");
  want["parent_goid"] = 3;
  want["func"] = "main.worker";
  want["created_by"] = "main.main";
  EXPECT_EQ(sink.events[0], want);
  EXPECT_EQ(sink.events[1], gstate(200, 11, 9, "runnable", "running"));
  // Exited, it is forgotten (goids are never reused).
  ge.on_status(300, 11, 9, kGRunning, kGDead);
  EXPECT_FALSE(ge.known(9));
  // Before Go 1.21 there is no parentGoid: no parent_goid either.
  o.has_parent = false;
  ge.on_status(400, 11, 10, kGWaiting, kGRunnable, -1, &o);
  EXPECT_FALSE(sink.events.back().contains("parent_goid"));
  EXPECT_EQ(sink.events.back().value("func", ""), "main.worker");
}

// origin_span covers parentGoid (when the release has it) to startpc; parse_origin reads
// the words back from their offsets.
TEST(GoroutineOrigin, SpanAndParse) {
  RuntimeOffsets o;
  o.g_parent_goid = 272;
  o.g_gopc = 280;
  o.g_startpc = 296;
  OriginSpan span = origin_span(o);
  EXPECT_EQ(span.offset, 272u);
  EXPECT_EQ(span.size, 32u);
  uint8_t bytes[32] = {};
  const uint64_t parent = 7, gopc = 0x401234, startpc = 0x405678;
  std::memcpy(bytes, &parent, 8);
  std::memcpy(bytes + 8, &gopc, 8);
  std::memcpy(bytes + 24, &startpc, 8);
  auto g = parse_origin(o, bytes, sizeof bytes);
  ASSERT_TRUE(g);
  EXPECT_TRUE(g->has_parent);
  EXPECT_EQ(g->parent_goid, parent);
  EXPECT_EQ(g->gopc, gopc);
  EXPECT_EQ(g->startpc, startpc);
  EXPECT_FALSE(parse_origin(o, bytes, 31));  // short read

  o.g_parent_goid = 0;  // Go 1.19: gopc, ancestors, startpc
  o.g_gopc = 296;
  o.g_startpc = 312;
  span = origin_span(o);
  EXPECT_EQ(span.offset, 296u);
  EXPECT_EQ(span.size, 24u);
  g = parse_origin(o, bytes + 8, 24);
  ASSERT_TRUE(g);
  EXPECT_FALSE(g->has_parent);
  EXPECT_EQ(g->gopc, gopc);
  EXPECT_EQ(g->startpc, startpc);

  o.g_gopc = 0;  // unknown release
  EXPECT_EQ(origin_span(o).size, 0u);
}

TEST_F(GoroutineEventsTest, IdleTransitionsEmitNothing) {
  ge.on_status(100, 11, 0, kGIdle, kGDead);
  ge.on_status(110, 11, 0, kGDead, kGIdle);
  EXPECT_TRUE(sink.events.empty());
  EXPECT_EQ(ge.events(), 0u);
}

TEST_F(GoroutineEventsTest, UnknownStatusesAreNamedByNumber) {
  ge.on_status(100, 11, 42, kGRunning, 5);
  ge.on_status(110, 11, 42, 12, kGRunnable);
  const std::vector<Event> want = {gstate(100, 11, 42, "running", "status_5"),
                                   gstate(110, 11, 42, "status_12", "runnable")};
  EXPECT_EQ(sink.events, want);
}

// Go 1.26: a cgo callback borrows the extra M's g from deadextra and gives it back. These are
// state changes, not a goroutine ending.
TEST_F(GoroutineEventsTest, CgoCallbackGo126DoesNotExit) {
  ge.on_status(100, 11, 17, kGDeadExtra, kGSyscall);
  ge.on_status(200, 11, 17, kGSyscall, kGDeadExtra);
  const std::vector<Event> want = {gstate(100, 11, 17, "deadextra", "syscall"),
                                   gstate(200, 11, 17, "syscall", "deadextra")};
  EXPECT_EQ(sink.events, want);
}

// Up to Go 1.25 the same callback is needm's casgstatus(dead, syscall) and dropm's
// casgstatus(syscall, dead) on the extra M's g, which keeps its goid between callbacks.
TEST_F(GoroutineEventsTest, CgoCallbackGo125DoesNotExit) {
  ge.on_status(100, 11, 17, kGDead, kGSyscall);
  ge.on_status(200, 11, 17, kGSyscall, kGDead);
  // Exactly the two state changes, as on Go 1.26: no gexit, and not nothing at all.
  const std::vector<Event> want = {gstate(100, 11, 17, "dead", "syscall"),
                                   gstate(200, 11, 17, "syscall", "dead")};
  EXPECT_EQ(sink.events, want);
}

TEST_F(GoroutineEventsTest, EventsCountsEverythingEmitted) {
  ge.on_create(100, 11, 1, kWorkerPc, kCallerPc);
  ge.on_status(110, 11, 0, kGIdle, kGDead);          // nothing
  ge.on_status(120, 11, 3, kGDead, kGRunnable);      // held
  ge.on_status(125, 12, 5, kGRunning, kGWaiting);    // 1
  ge.on_created(130, 11, 42);                        // 2
  ge.on_status(140, 12, 42, kGRunnable, kGRunning);  // 1
  ge.on_status(150, 12, 42, kGRunning, kGDead);      // 2
  EXPECT_EQ(ge.events(), 6u);
  EXPECT_EQ(ge.events(), sink.events.size());
}

// ---- the table ----

struct TableRow {
  std::string goid, parent, state, reason, running, runnable, waiting, syscall, lifetime, who;
};

struct Table {
  std::string text;
  std::vector<std::string> lines;
  std::map<std::string, TableRow> rows;  // by goid
  std::vector<std::string> order;        // goids as printed
  std::vector<std::string> totals;       // RUNNING RUNNABLE WAITING SYSCALL
};

std::string render_table(const std::vector<Event>& events) {
  std::FILE* f = std::tmpfile();
  EXPECT_NE(f, nullptr);
  if (!f) return "";
  {
    auto table = make_goroutine_table(f, false);
    for (const auto& ev : events) table->emit(ev);
    table->flush();
  }
  std::rewind(f);
  std::string text;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
  std::fclose(f);
  return text;
}

// The table's columns are whitespace-separated up to LIFETIME, except WAITING ON (18
// characters from column 29, a reason may have spaces); FUNC [CREATED BY] is the rest.
Table parse_table(const std::string& text) {
  Table t;
  t.text = text;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    t.lines.push_back(line);
    std::istringstream ls(line);
    std::string first;
    ls >> first;
    if (first.empty() || first[0] == '#' || first == "GOID") continue;
    if (first == "TOTAL") {
      for (std::string w; ls >> w;) t.totals.push_back(w);
      continue;
    }
    TableRow r;
    r.goid = first;
    ls >> r.parent >> r.state;
    if (line.size() > 48) {
      r.reason = line.substr(29, 18);
      r.reason.erase(r.reason.find_last_not_of(' ') + 1);
      ls.str(line.substr(48));
      ls.clear();
    }
    ls >> r.running >> r.runnable >> r.waiting >> r.syscall >> r.lifetime;
    std::getline(ls, r.who);
    r.who.erase(0, r.who.find_first_not_of(' '));
    t.order.push_back(r.goid);
    t.rows[r.goid] = r;
  }
  return t;
}

Event gcreate_ev(uint64_t ts, uint64_t goid, uint64_t parent, const std::string& func,
                 const std::string& by) {
  Event ev = {{"event", "gcreate"}, {"ts_ns", ts},  {"pid", kPid},
              {"tid", 11},          {"goid", goid}, {"parent_goid", parent}};
  if (!func.empty()) ev["func"] = func;
  if (!by.empty()) ev["created_by"] = by;
  return ev;
}
Event gstate_ev(uint64_t ts, uint64_t goid, const std::string& from, const std::string& to) {
  return gstate(ts, 11, goid, from, to);
}
const Event kSummary = {
    {"event", "summary"}, {"backend", "test"}, {"probes", 2}, {"events", 17}, {"lost", 0}};

// Goroutine 7 is created by goroutine 1 and lives through a whole cycle; goroutine 1 existed
// before the trace and is still alive when it ends.
std::vector<Event> life_cycle_events() {
  return {
      gcreate_ev(0, 7, 1, "main.worker", "main.main"),
      gstate_ev(0, 7, "dead", "runnable"),
      gstate_ev(1 * kMs, 7, "runnable", "running"),
      gstate_ev(2 * kMs, 7, "running", "waiting"),
      gstate_ev(3 * kMs, 1, "waiting", "runnable"),  // goroutine 1's first event
      gstate_ev(4 * kMs, 1, "runnable", "running"),
      gstate_ev(10 * kMs, 1, "running", "syscall"),
      gstate_ev(12 * kMs, 1, "syscall", "running"),
      gstate_ev(20 * kMs, 1, "running", "copystack"),  // no column: only in the lifetime
      gstate_ev(21 * kMs, 1, "copystack", "running"),
      gstate_ev(52 * kMs, 7, "waiting", "runnable"),
      gstate_ev(53 * kMs, 7, "runnable", "running"),
      gstate_ev(54 * kMs, 7, "running", "dead"),
      gexit(54 * kMs, 7),
      kSummary,
  };
}

TEST(GoroutineTable, LifeCycleColumns) {
  Table t = parse_table(render_table(life_cycle_events()));
  SCOPED_TRACE(t.text);

  ASSERT_TRUE(t.rows.count("7"));
  const TableRow& g7 = t.rows["7"];
  EXPECT_EQ(g7.parent, "1");
  EXPECT_EQ(g7.state, "exited");
  EXPECT_EQ(g7.running, "2.00ms");   // 1..2 and 53..54
  EXPECT_EQ(g7.runnable, "2.00ms");  // 0..1 and 52..53
  EXPECT_EQ(g7.waiting, "50.0ms");   // 2..52
  EXPECT_EQ(g7.syscall, "0");
  EXPECT_EQ(g7.lifetime, "54.0ms");
  EXPECT_EQ(g7.who, "main.worker [main.main]");

  ASSERT_TRUE(t.rows.count("1"));
  const TableRow& g1 = t.rows["1"];
  EXPECT_EQ(g1.parent, "-");
  EXPECT_EQ(g1.state, "running");
  EXPECT_EQ(g1.running, "47.0ms");  // 4..10, 12..20 and 21..54 (the last event, "now")
  EXPECT_EQ(g1.runnable, "1.00ms");
  EXPECT_EQ(g1.waiting, "0");  // the waiting before its first event is not known
  EXPECT_EQ(g1.syscall, "2.00ms");
  EXPECT_EQ(g1.lifetime, ">51.0ms");  // 3..54, and it existed before
  EXPECT_EQ(g1.who, "?");

  // Live goroutines first.
  EXPECT_EQ(t.order, (std::vector<std::string>{"1", "7"}));
  EXPECT_EQ(t.totals, (std::vector<std::string>{"49.0ms", "3.00ms", "50.0ms", "2.00ms"}));

  ASSERT_GE(t.lines.size(), 3u);
  EXPECT_EQ(t.lines[t.lines.size() - 2],
            "# 2 goroutines: 1 created and 1 exited while traced, 1 alive");
  // The summary itself still reaches the text writer, after the table.
  EXPECT_EQ(t.lines.back(), "# 17 events, 0 lost, 2 probes, backend test");
}

TEST(GoroutineTable, HeaderAndLayout) {
  Table t = parse_table(render_table(life_cycle_events()));
  ASSERT_FALSE(t.lines.empty());
  EXPECT_EQ(t.lines[0],
            "    GOID   PARENT STATE      WAITING ON            RUNNING   RUNNABLE    WAITING    "
            "SYSCALL   LIFETIME  FUNC [CREATED BY]");
  // One header, one row per goroutine, the totals, then the two comment lines.
  EXPECT_EQ(t.lines.size(), 6u);
}

// Without `live` nothing is drawn until the summary: a recorded run prints one table.
TEST(GoroutineTable, PrintedOnlyAtTheSummary) {
  auto events = life_cycle_events();
  events.pop_back();
  EXPECT_EQ(render_table(events), "");
}

TEST(GoroutineTable, OtherEventsGoToTheTextWriter) {
  std::vector<Event> events = {
      {{"event", "entry"},
       {"ts_ns", 0},
       {"pid", kPid},
       {"tid", 11},
       {"goid", 1},
       {"func", "main.f"},
       {"args", Event::array()}},
      gcreate_ev(1, 7, 1, "main.worker", "main.f"),
      kSummary,
  };
  std::string text = render_table(events);
  size_t call = text.find("-> main.f()");
  size_t header = text.find("GOID   PARENT");
  ASSERT_NE(call, std::string::npos) << text;
  ASSERT_NE(header, std::string::npos) << text;
  EXPECT_LT(call, header);
  // Goroutine events are only in the table, not printed as transitions too.
  EXPECT_EQ(text.find("created by goroutine"), std::string::npos) << text;
}

// Names come from the tracee's binary: escaped, never raw control characters.
TEST(GoroutineTable, NamesArePrintable) {
  std::string text = render_table({gcreate_ev(0, 7, 1, "main.\x1b[2Jevil", "main.\x07"),
                                   gstate_ev(0, 7, "dead", "runnable"), kSummary});
  EXPECT_EQ(text.find('\x1b'), std::string::npos);
  EXPECT_EQ(text.find('\x07'), std::string::npos);
  Table t = parse_table(text);
  ASSERT_TRUE(t.rows.count("7"));
  // Go's %q: strconv.Quote("main.\a") is "main.\a", not \x07.
  EXPECT_EQ(t.rows["7"].who, "\"main.\\x1b[2Jevil\" [\"main.\\a\"]");
}

TEST(GoroutineTable, ExitWithoutStateChange) {
  Table t = parse_table(render_table({gexit(5 * kMs, 9), kSummary}));
  SCOPED_TRACE(t.text);
  ASSERT_TRUE(t.rows.count("9"));
  EXPECT_EQ(t.rows["9"].state, "exited");
  EXPECT_EQ(t.rows["9"].parent, "-");
  EXPECT_EQ(t.rows["9"].lifetime, ">0");
  EXPECT_EQ(t.lines[t.lines.size() - 2],
            "# 1 goroutines: 0 created and 1 exited while traced, 0 alive");
}

// short_duration: three significant digits in the largest unit under 1000 of it.
TEST(GoroutineTable, DurationFormat) {
  const std::vector<std::pair<uint64_t, std::string>> cases = {
      {0, "0"},
      {1, "1ns"},
      {999, "999ns"},
      {1000, "1.00us"},
      {12340, "12.3us"},
      {394000, "394us"},
      {999499, "999us"},
      {999999, "1.00ms"},  // rounds up into the next unit, not "1000us"
      {2170000, "2.17ms"},
      {229000000, "229ms"},
      {1500000000, "1.50s"},
      {5000000000000, "5000s"},  // seconds are the largest unit
  };
  for (const auto& [ns, want] : cases) {
    Table t = parse_table(render_table({gstate_ev(0, 3, "runnable", "running"),
                                        gstate_ev(ns, 3, "running", "waiting"), kSummary}));
    ASSERT_TRUE(t.rows.count("3")) << t.text;
    EXPECT_EQ(t.rows["3"].running, want) << ns;
  }
}

// ---- the filter ----

std::vector<Event> run_filter(GoroutineSelection sel, const std::vector<Event>& events) {
  auto inner = std::make_unique<CollectingSink>();
  CollectingSink* seen = inner.get();
  auto filter = make_goroutine_filter(std::move(inner), std::move(sel));
  for (const auto& ev : events) filter->emit(ev);
  return seen->events;
}

Event call_ev(const std::string& kind, uint64_t goid, const std::string& func,
              bool inlined = false) {
  Event ev = {{"event", kind}, {"ts_ns", 0},   {"pid", kPid},
              {"tid", 11},     {"goid", goid}, {"func", func}};
  if (inlined) ev["inlined"] = true;
  return ev;
}

TEST(GoroutineFilter, ByGoid) {
  const std::vector<Event> in = {
      gcreate_ev(0, 5, 1, "main.a", "main.main"),
      gcreate_ev(0, 6, 1, "main.b", "main.main"),
      gstate_ev(1, 5, "dead", "runnable"),
      gstate_ev(1, 6, "dead", "runnable"),
      gexit(2, 6),
      gexit(2, 5),
      kSummary,
  };
  const std::vector<Event> want = {in[0], in[2], in[5], in[6]};
  EXPECT_EQ(run_filter({{5}, {}}, in), want);
}

TEST(GoroutineFilter, UnderFunction) {
  const std::vector<Event> in = {
      call_ev("entry", 1, "main.f"),                    // 0: swallowed, opens main.f on g1
      gcreate_ev(10, 10, 1, "main.w", "main.g"),        // 1: created inside main.f
      gstate_ev(10, 10, "dead", "runnable"),            // 2
      gcreate_ev(11, 11, 10, "main.w", "main.w"),       // 3: child of a selected goroutine
      gcreate_ev(12, 12, 11, "main.w", "main.w"),       // 4: grandchild
      call_ev("return", 1, "main.f"),                   // 5: swallowed, closes main.f
      gcreate_ev(13, 13, 1, "main.w", "main.main"),     // 6: after main.f returned
      gstate_ev(13, 13, "dead", "runnable"),            // 7
      gcreate_ev(14, 14, 2, "main.w", "main.f"),        // 8: go statement in main.f
      call_ev("entry", 3, "main.f", /*inlined=*/true),  // 9: swallowed, opens nothing
      gcreate_ev(15, 15, 3, "main.w", "main.k"),        // 10
      gstate_ev(16, 99, "waiting", "runnable"),         // 11: created before the trace
      gexit(17, 10),                                    // 12
      kSummary,                                         // 13
  };
  const std::vector<Event> want = {in[1], in[2], in[3], in[4], in[8], in[12], in[13]};
  EXPECT_EQ(run_filter({{}, {"main.f"}}, in), want);
}

// Calls are counted: a recursive main.f stays open until its outermost return, and an
// unfinished call closes like a return.
TEST(GoroutineFilter, UnderNestedAndUnfinishedCalls) {
  const std::vector<Event> in = {
      call_ev("entry", 1, "main.f"),
      call_ev("entry", 1, "main.f"),
      call_ev("return", 1, "main.f"),
      gcreate_ev(1, 20, 1, "main.w", "main.w"),  // 3: main.f still open once
      call_ev("unfinished", 1, "main.f"),
      gcreate_ev(2, 21, 1, "main.w", "main.w"),  // 5: closed
      call_ev("return", 1, "main.f"),            // an extra return does not go negative
      call_ev("entry", 1, "main.f"),
      gcreate_ev(3, 22, 1, "main.w", "main.w"),  // 8: open again
  };
  const std::vector<Event> want = {in[3], in[8]};
  EXPECT_EQ(run_filter({{}, {"main.f"}}, in), want);
}

// A call is per goroutine: main.f open on goroutine 1 does not select goroutine 2's children.
TEST(GoroutineFilter, UnderIsPerGoroutine) {
  const std::vector<Event> in = {
      call_ev("entry", 1, "main.f"),
      gcreate_ev(1, 30, 2, "main.w", "main.w"),
  };
  EXPECT_TRUE(run_filter({{}, {"main.f"}}, in).empty());
}

// With both, a goroutine must be among the goids and selected by --under.
TEST(GoroutineFilter, GoidAndUnder) {
  const std::vector<Event> in = {
      call_ev("entry", 1, "main.f"),
      gcreate_ev(1, 40, 1, "main.w", "main.w"),   // 1: under main.f, not a wanted goid
      gcreate_ev(2, 41, 40, "main.w", "main.w"),  // 2: both (its parent was selected)
      gcreate_ev(3, 42, 9, "main.w", "main.w"),   // 3: a wanted goid, not under main.f
      kSummary,
  };
  const std::vector<Event> want = {in[2], in[4]};
  EXPECT_EQ(run_filter({{41, 42}, {"main.f"}}, in), want);
}

// A cgo callback's borrowed g back to dead (Go <= 1.25) did not exit, and is not alive.
TEST(GoroutineTable, BorrowedCgoGoroutineIsNotAlive) {
  Table t = parse_table(render_table(
      {gstate_ev(100, 17, "dead", "syscall"), gstate_ev(200, 17, "syscall", "dead"), kSummary}));
  ASSERT_TRUE(t.rows.count("17"));
  EXPECT_EQ(t.rows["17"].state, "dead");
  EXPECT_NE(t.text.find("# 1 goroutines: 0 created and 0 exited while traced, 0 alive"),
            std::string::npos)
      << t.text;
}

}  // namespace
}  // namespace gotap

namespace gotap {
namespace {

// libgo's exitsyscall0 goes syscall -> exiting syscall (10) -> runnable: its 10 is still the
// system call (gc's 10 is Go 1.26's leaked), so the first change is none, and the second
// leaves the system call.
TEST_F(GoroutineEventsTest, LibgoExitingSyscallIsStillTheSystemCall) {
  EXPECT_EQ(libgo_status(10), uint32_t(kGSyscall));
  EXPECT_EQ(libgo_status(kGWaiting), uint32_t(kGWaiting));
  ge.on_status(1 * kMs, 7, 5, kGRunning, kGSyscall);
  ge.on_status(2 * kMs, 7, 5, libgo_status(kGSyscall), libgo_status(10));
  ge.on_status(3 * kMs, 7, 5, libgo_status(10), libgo_status(kGRunnable));
  ASSERT_EQ(sink.events.size(), 2u);
  EXPECT_EQ(sink.events[0], gstate(1 * kMs, 7, 5, "running", "syscall"));
  EXPECT_EQ(sink.events[1], gstate(3 * kMs, 7, 5, "syscall", "runnable"));
}

}  // namespace
}  // namespace gotap
