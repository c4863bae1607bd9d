// WhyTracker without a tracee: a call's time split by its goroutine's states, from synthetic
// status changes whose intervals are known by construction.
#include <gtest/gtest.h>

#include "core/events/live_metrics.h"
#include "core/why/why_latency.h"
#include "core/why/why_tracker.h"

namespace gotap::why {
namespace {

constexpr uint64_t ms = 1'000'000;

TEST(WhyTracker, SplitsACallByItsGoroutinesStates) {
  WhyTracker t;
  t.named(7, "main.sender");
  t.entry(0, 1, "main.step");
  // 2 ms running, then parked on a channel for 40 ms, woken by g 7 running on thread 12.
  t.state(2 * ms, 10, 1, "running", "waiting", "chan receive");
  t.state(3 * ms, 12, 7, "runnable", "running", "");
  t.state(42 * ms, 12, 1, "waiting", "runnable", "");
  // 3 ms runnable, then 15 ms in a system call, then 1 ms running again.
  t.state(45 * ms, 10, 1, "runnable", "running", "");
  t.state(45 * ms, 10, 1, "running", "syscall", "");
  t.state(60 * ms, 10, 1, "syscall", "running", "");
  auto s = t.ret(61 * ms, 1, "main.step");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->running_ns, 3 * ms);
  EXPECT_EQ(s->waiting_ns, 40 * ms);
  EXPECT_EQ(s->runnable_ns, 3 * ms);
  EXPECT_EQ(s->syscall_ns, 15 * ms);
  EXPECT_EQ(s->total(), 61 * ms);
  ASSERT_EQ(s->waits.size(), 1u);
  EXPECT_EQ(s->waits[0].reason, "chan receive");
  EXPECT_EQ(s->waits[0].ns, 40 * ms);
  EXPECT_EQ(s->waits[0].count, 1u);
  EXPECT_EQ(s->waits[0].woken_by.kind, WokenBy::Goroutine);
  EXPECT_EQ(s->waits[0].woken_by.goid, 7);
  EXPECT_EQ(s->waits[0].woken_by.func, "main.sender");
}

// A thread that runs no goroutine when it readies one is the scheduler's: its network poll
// for an IO wait, a timer otherwise.
TEST(WhyTracker, WakeUpsWithoutAGoroutineAreThePollersOrATimers) {
  WhyTracker t;
  t.entry(0, 1, "main.step");
  t.state(1 * ms, 10, 1, "running", "waiting", "sleep");
  t.state(31 * ms, 11, 1, "waiting", "runnable", "");
  t.state(31 * ms, 10, 1, "runnable", "running", "");
  t.state(32 * ms, 10, 1, "running", "waiting", "IO wait");
  t.state(40 * ms, 10, 5, "runnable", "running", "");
  t.state(41 * ms, 10, 5, "running", "waiting", "IO wait");  // thread 10 runs no one now
  t.state(52 * ms, 10, 1, "waiting", "runnable", "");
  t.state(52 * ms, 10, 1, "runnable", "running", "");
  auto s = t.ret(53 * ms, 1, "main.step");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->waiting_ns, 50 * ms);
  ASSERT_EQ(s->waits.size(), 2u);
  EXPECT_EQ(s->waits[0].reason, "sleep");  // largest first
  EXPECT_EQ(s->waits[0].woken_by.kind, WokenBy::Timer);
  EXPECT_EQ(s->waits[1].reason, "IO wait");
  EXPECT_EQ(s->waits[1].ns, 20 * ms);
  EXPECT_EQ(s->waits[1].woken_by.kind, WokenBy::Netpoll);
  EXPECT_EQ(s->total(), 53 * ms);
}

// Nested traced calls each get their own split, clipped to their own entry and return.
TEST(WhyTracker, NestedCallsEachGetTheirOwnSplit) {
  WhyTracker t;
  t.entry(0, 1, "main.outer");
  t.state(10 * ms, 10, 1, "running", "waiting", "sleep");
  t.state(20 * ms, 11, 1, "waiting", "runnable", "");
  t.state(22 * ms, 10, 1, "runnable", "running", "");
  t.entry(25 * ms, 1, "main.inner");
  t.state(26 * ms, 10, 1, "running", "waiting", "select");
  t.state(36 * ms, 10, 2, "runnable", "running", "");
  t.state(37 * ms, 10, 1, "waiting", "runnable", "");
  t.state(38 * ms, 10, 2, "running", "waiting", "chan receive");
  t.state(38 * ms, 10, 1, "runnable", "running", "");
  auto in = t.ret(40 * ms, 1, "main.inner");
  auto out = t.ret(50 * ms, 1, "main.outer");
  ASSERT_TRUE(in && out);
  EXPECT_EQ(in->running_ns, 3 * ms);
  EXPECT_EQ(in->waiting_ns, 11 * ms);
  EXPECT_EQ(in->runnable_ns, 1 * ms);
  ASSERT_EQ(in->waits.size(), 1u);
  EXPECT_EQ(in->waits[0].woken_by.goid, 2);
  EXPECT_EQ(in->total(), 15 * ms);
  EXPECT_EQ(out->waiting_ns, 21 * ms);
  EXPECT_EQ(out->runnable_ns, 3 * ms);
  EXPECT_EQ(out->running_ns, 26 * ms);
  EXPECT_EQ(out->total(), 50 * ms);
  EXPECT_EQ(out->waits.size(), 2u);
}

// Goroutines with no traced call open are not accounted; a return whose entry was not seen
// has no split; a change gotap saw late (before the entry) is clipped to the call.
TEST(WhyTracker, OnlyOpenCallsAreAccounted) {
  WhyTracker t;
  t.state(0, 10, 3, "running", "waiting", "sleep");
  EXPECT_FALSE(t.ret(5 * ms, 3, "main.step"));
  t.entry(10 * ms, 1, "main.step");
  t.state(8 * ms, 10, 1, "runnable", "running", "");  // reordered: before the entry
  t.state(12 * ms, 10, 1, "running", "syscall", "");
  auto s = t.ret(14 * ms, 1, "main.step");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->running_ns, 2 * ms);
  EXPECT_EQ(s->syscall_ns, 2 * ms);
  EXPECT_EQ(s->total(), 4 * ms);
}

TEST(WhyTracker, JsonAndTextFollowTheContract) {
  WhySplit s;
  s.running_ns = 400'000;
  s.waiting_ns = 61'900'000;
  s.waits.push_back({"select", 61'900'000, 1, {WokenBy::Goroutine, 212, "net/http.readLoop"}});
  s.waits.push_back({"IO wait", 0, 1, {WokenBy::Netpoll, 0, ""}});
  Event j = why_json(s);
  EXPECT_TRUE(j["preempted_ns"].is_null());  // not measured: null, never 0
  EXPECT_EQ(j["waiting_ns"], 61'900'000u);
  EXPECT_EQ(j["waits"][0]["woken_by"], (Event{{"goid", 212}, {"func", "net/http.readLoop"}}));
  EXPECT_EQ(j["waits"][1]["woken_by"], (Event{{"by", "netpoll"}}));
  EXPECT_TRUE(j["waits"][0]["parked_at"].is_null());
  EXPECT_EQ(why_text(j),
            "waiting 61.9 ms (select 61.9 ms, woken by net/http.readLoop [g 212]; IO wait 0 us, "
            "woken by the network poller) \u00b7 running 0.4 ms");
}

// latency --why's totals: parts add, a part null in any call stays null, waits merge by
// reason, place and waker function (not its goid).
TEST(WhyTracker, TotalsAddPartsAndMergeWaits) {
  WhySplit a, b;
  a.running_ns = 1;
  a.waiting_ns = 10;
  a.waits.push_back({"chan receive", 10, 1, {WokenBy::Goroutine, 7, "main.s"}, "main.f"});
  b.running_ns = 2;
  b.waiting_ns = 25;
  b.waits.push_back({"chan receive", 20, 1, {WokenBy::Goroutine, 9, "main.s"}, "main.f"});
  b.waits.push_back({"sleep", 5, 1, {WokenBy::Timer, 0, ""}, "time.Sleep"});
  Event total;
  add_why(total, why_json(a));
  add_why(total, why_json(b));
  EXPECT_EQ(total["calls"], 2);
  EXPECT_EQ(total["running_ns"], 3);
  EXPECT_EQ(total["waiting_ns"], 35);
  EXPECT_TRUE(total["preempted_ns"].is_null());
  ASSERT_EQ(total["waits"].size(), 2u);
  EXPECT_EQ(total["waits"][0]["ns"], 30);
  EXPECT_EQ(total["waits"][0]["count"], 2);
  EXPECT_EQ(total["waits"][0]["woken_by"], (Event{{"func", "main.s"}}));
  EXPECT_EQ(total["waits"][1]["reason"], "sleep");
}

// The kernel's side: time off the CPU while running comes out of running_ns into preempted_ns;
// a system call Go wrapped stays in syscall_ns, one it did not (RawSyscall) moves there from
// running_ns; both are listed by name. Nested calls each clip the intervals to their entry.
TEST(WhyTracker, KernelIntervalsSplitRunningAndNameSystemCalls) {
  WhyTracker t;
  t.kernel_seen();
  t.entry(0, 1, "main.outer");
  t.preempted(1 * ms, 4 * ms, 1);  // before the inner call
  t.entry(5 * ms, 1, "main.inner");
  t.syscall(6 * ms, 8 * ms, 1, "futex");  // raw: Go says running
  t.state(9 * ms, 10, 1, "running", "syscall", "");
  t.syscall(9 * ms, 24 * ms, 1, "nanosleep");
  t.state(25 * ms, 10, 1, "syscall", "running", "");
  t.preempted(26 * ms, 27 * ms, 1);
  t.preempted(28 * ms, 29 * ms, 2);  // another goroutine's thread: none of its business
  t.state(29 * ms, 10, 1, "running", "runnable", "");
  t.syscall(29 * ms, 29 * ms + 500'000, 1, "futex");  // its old thread's, after it left
  t.state(29 * ms + 500'000, 11, 1, "runnable", "running", "");
  auto in = t.ret(30 * ms, 1, "main.inner");
  ASSERT_TRUE(in);
  ASSERT_TRUE(in->preempted_ns);
  EXPECT_EQ(*in->preempted_ns, 1 * ms);
  EXPECT_EQ(in->syscall_ns, 16 * ms + 2 * ms);  // Go's 16 ms and the raw futex's 2
  EXPECT_EQ(in->runnable_ns, 500'000u);
  EXPECT_EQ(in->running_ns, 25 * ms - 16 * ms - 2 * ms - 1 * ms - 500'000);
  EXPECT_EQ(in->total(), 25 * ms);
  ASSERT_EQ(in->syscalls.size(), 2u);
  EXPECT_EQ(in->syscalls[0].name, "nanosleep");  // largest first
  EXPECT_EQ(in->syscalls[0].ns, 15 * ms);
  EXPECT_EQ(in->syscalls[0].count, 1u);
  EXPECT_EQ(in->syscalls[1].name, "futex");
  auto out = t.ret(31 * ms, 1, "main.outer");
  ASSERT_TRUE(out);
  EXPECT_EQ(*out->preempted_ns, 4 * ms);
  EXPECT_EQ(out->total(), 31 * ms);
  EXPECT_EQ(out->running_ns, 31 * ms - 18 * ms - 4 * ms - 500'000);
  Event j = why_json(*out);
  EXPECT_EQ(j["preempted_ns"], 4 * ms);
  EXPECT_EQ(j["syscalls"][0], (Event{{"name", "nanosleep"}, {"ns", 15 * ms}, {"count", 1}}));
  EXPECT_EQ(why_text(j),
            "syscall 18.0 ms (nanosleep, futex) \u00b7 running 8.5 ms \u00b7 "
            "preempted 4.0 ms \u00b7 runnable 0.5 ms");
}

// Without the kernel's side, preempted_ns and syscalls are null, and the intervals (none
// should come) change nothing.
TEST(WhyTracker, KernelPartsAreNullUnlessSeen) {
  WhyTracker t;
  t.entry(0, 1, "main.f");
  t.preempted(1 * ms, 2 * ms, 1);
  t.syscall(2 * ms, 3 * ms, 1, "read");
  auto s = t.ret(4 * ms, 1, "main.f");
  ASSERT_TRUE(s);
  EXPECT_FALSE(s->preempted_ns);
  EXPECT_EQ(s->running_ns, 4 * ms);
  Event j = why_json(*s);
  EXPECT_TRUE(j["preempted_ns"].is_null());
  EXPECT_TRUE(j["syscalls"].is_null());
}

// ptrace reads preemption alone (its stop clock's scheduler program): preempted_ns is
// measured, and syscalls stay null, not an empty list that would say none was made.
TEST(WhyTracker, PreemptionWithoutSystemCallNames) {
  WhyTracker t;
  t.kernel_seen(false);
  t.entry(0, 1, "main.f");
  t.preempted(1 * ms, 3 * ms, 1);
  auto s = t.ret(4 * ms, 1, "main.f");
  ASSERT_TRUE(s);
  ASSERT_TRUE(s->preempted_ns);
  EXPECT_EQ(*s->preempted_ns, 2 * ms);
  EXPECT_EQ(s->running_ns, 2 * ms);
  Event j = why_json(*s);
  EXPECT_EQ(j["preempted_ns"], 2 * ms);
  EXPECT_TRUE(j["syscalls"].is_null());
}

// ptrace merges a thread's calls of one number past the 16 it keeps between two stops: the
// part counts each, and holds their own time, not the gaps between them.
TEST(WhyTracker, MergedSystemCallsCountTheirOwnTime) {
  WhyTracker t;
  t.kernel_seen(true);
  t.entry(0, 1, "main.f");
  t.syscall(1 * ms, 9 * ms, 1, "write", 4, 2 * ms);  // four writes, 2 ms inside, over 8 ms
  t.syscall(9 * ms, 10 * ms, 1, "other", 1, 0);
  auto s = t.ret(10 * ms, 1, "main.f");
  ASSERT_TRUE(s);
  ASSERT_EQ(s->syscalls.size(), 2u);
  EXPECT_EQ(s->syscalls[0].name, "write");
  EXPECT_EQ(s->syscalls[0].ns, 2 * ms);
  EXPECT_EQ(s->syscalls[0].count, 4u);
  EXPECT_EQ(s->syscalls[1].name, "other");
  EXPECT_EQ(s->syscalls[1].ns, 1 * ms);
  EXPECT_EQ(s->syscall_ns, 3 * ms) << "raw calls: Go said running";
  EXPECT_EQ(s->running_ns, 7 * ms);
}

// latency --why's totals merge the system calls by name; one call without them makes the
// total's null.
TEST(WhyTracker, TotalsMergeSystemCallsByName) {
  WhySplit a, b;
  a.preempted_ns = 1;
  a.syscalls_named = b.syscalls_named = true;
  a.syscalls = {{"read", 5, 1}, {"write", 2, 1}};
  b.preempted_ns = 2;
  b.syscalls = {{"write", 9, 3}};
  Event total;
  add_why(total, why_json(a));
  add_why(total, why_json(b));
  EXPECT_EQ(total["preempted_ns"], 3);
  EXPECT_EQ(total["syscalls"], Event::parse(R"([{"name":"write","ns":11,"count":4},
                                                {"name":"read","ns":5,"count":1}])"));
  add_why(total, why_json(WhySplit{}));
  EXPECT_TRUE(total["syscalls"].is_null());
  EXPECT_TRUE(total["preempted_ns"].is_null());
}

// latency --why's shares: each part's and wait's fraction of the parts' sum, null for a null
// part; the text gives them as percentages.
TEST(WhyTracker, SharesOfTheTotals) {
  WhySplit a;
  a.running_ns = 25;
  a.waiting_ns = 75;
  a.waits.push_back({"sleep", 75, 1, {WokenBy::Timer, 0, ""}, "time.Sleep"});
  Event total;
  add_why(total, why_json(a));
  add_shares(total);
  EXPECT_EQ(total["shares"]["running"], 0.25);
  EXPECT_EQ(total["shares"]["waiting"], 0.75);
  EXPECT_EQ(total["shares"]["syscall"], 0.0);
  EXPECT_TRUE(total["shares"]["preempted"].is_null());
  EXPECT_EQ(total["waits"][0]["share"], 0.75);
  EXPECT_EQ(why_text(total),
            "waiting 0 us 75% (sleep at time.Sleep, woken by a timer) \u00b7 running 0 us 25%");
}

// --prometheus --why: gotap_call_seconds_total's values, by function, part and wait reason,
// are the returns' parts summed; a null part makes no series, and a wait with no reason
// counts under reason "".
TEST(WhyTracker, MetricsSumPartsByReason) {
  LiveMetrics m;
  WhySplit a;
  a.running_ns = 2;
  a.runnable_ns = 3;
  a.waiting_ns = 30;
  a.waits.push_back({"chan receive", 20, 1, {WokenBy::Goroutine, 7, "main.s"}, "main.f"});
  a.waits.push_back({"", 10, 1, {}, ""});
  m.add_why("main.f", why_json(a));
  a.waits.pop_back();
  a.waiting_ns = 20;
  m.add_why("main.f", why_json(a));
  m.add_why("main.g", why_json(a));
  const auto s = m.read();
  using K = std::tuple<std::string, std::string, std::string>;
  EXPECT_EQ(s.why_ns.at(K("main.f", "running", "")), 4u);
  EXPECT_EQ(s.why_ns.at(K("main.f", "runnable", "")), 6u);
  EXPECT_EQ(s.why_ns.at(K("main.f", "syscall", "")), 0u);
  EXPECT_EQ(s.why_ns.at(K("main.f", "waiting", "chan receive")), 40u);
  EXPECT_EQ(s.why_ns.at(K("main.f", "waiting", "")), 10u);
  EXPECT_EQ(s.why_ns.at(K("main.g", "waiting", "chan receive")), 20u);
  EXPECT_FALSE(s.why_ns.count(K("main.f", "preempted", ""))) << "null: no series";
  EXPECT_EQ(s.why_ns.size(), 9u);
}

// `gotap report` renders a record's why, which can be any JSON: never a throw.
TEST(WhyTracker, TextOfAnyJsonDoesNotThrow) {
  for (const char* doc :
       {R"({"waiting_ns":5,"waits":[1,{"woken_by":{"by":3,"goid":"x"}},{"woken_by":[]}]})",
        R"({"waiting_ns":"x","running_ns":-1,"waits":{}})", R"([])", R"(null)",
        R"({"waiting_ns":5,"waits":[{"reason":7,"parked_at":{},"ns":"9","woken_by":{"func":1}}]})",
        R"({"running_ns":5,"shares":{"running":"x"},"waiting_ns":5,"waits":[{"share":[]},{}]})",
        R"({"running_ns":5,"shares":[1],"waiting_ns":5,"waits":[{"share":null}]})"})
    EXPECT_NO_THROW(why_text(Event::parse(doc))) << doc;
  EXPECT_EQ(why_text(Event::parse(R"({"waiting_ns":5,"waits":[{"woken_by":{"goid":3}}]})")),
            "waiting 0 us (unknown reason, woken by ? [g 3])");
  EXPECT_EQ(why_text(Event::parse(R"({"waiting_ns":5,"waits":[{"woken_by":{"func":"main.f"}}]})")),
            "waiting 0 us (unknown reason, woken by main.f)");
}

}  // namespace
}  // namespace gotap::why
