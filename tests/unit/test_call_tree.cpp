// CallTree without a tracee: per goroutine nesting of entry/return events, and, with
// goroutine events, the waits inside traced calls as spans beneath them.
#include <gtest/gtest.h>

#include "core/events/call_tree.h"

namespace gotap {
namespace {

Event call(const char* kind, uint64_t ts, int64_t goid, const char* func) {
  return {{"event", kind}, {"ts_ns", ts}, {"goid", goid}, {"func", func}};
}
Event state(uint64_t ts, int64_t goid, const char* from, const char* to, const char* reason) {
  Event e = {{"event", "gstate"}, {"ts_ns", ts}, {"goid", goid}, {"from", from}, {"to", to}};
  if (*reason) e["reason"] = reason;
  return e;
}

TEST(CallTree, NestsCallsPerGoroutine) {
  CallTree t;
  t.add(call("entry", 10, 1, "main.outer"));
  t.add(call("entry", 12, 2, "main.other"));
  t.add(call("entry", 20, 1, "main.inner"));
  t.add(call("return", 30, 1, "main.inner"));
  t.add(call("return", 40, 1, "main.outer"));
  auto spans = t.finish(50);
  ASSERT_EQ(spans.size(), 3u);
  EXPECT_EQ(spans[0].func, "main.outer");
  EXPECT_EQ(spans[1].func, "main.inner");
  EXPECT_EQ(spans[1].stack, std::vector<std::string>{"main.outer"});
  EXPECT_EQ(spans[1].end_ns - spans[1].start_ns, 10u);
  EXPECT_EQ(spans[2].func, "main.other");
  EXPECT_FALSE(spans[2].finished);  // still open at the end
  EXPECT_EQ(spans[2].end_ns, 50u);
}

// Calls without a goid (a gccgo program's) nest per thread: two threads' calls interleaved
// in time stay apart.
TEST(CallTree, WithoutGoidNestsPerThread) {
  CallTree t;
  auto site = [](const char* kind, uint64_t ts, int tid, const char* func) {
    return Event{{"event", kind}, {"ts_ns", ts}, {"tid", tid}, {"func", func}};
  };
  t.add(site("entry", 10, 7, "main.outer"));
  t.add(site("entry", 12, 8, "main.Add"));
  t.add(site("entry", 14, 7, "main.Add"));
  t.add(site("return", 16, 8, "main.Add"));
  t.add(site("return", 18, 7, "main.Add"));
  t.add(site("return", 20, 7, "main.outer"));
  auto spans = t.finish();
  ASSERT_EQ(spans.size(), 3u);
  for (const auto& s : spans) EXPECT_TRUE(s.finished) << s.func;
  const CallSpan *a7 = nullptr, *a8 = nullptr;
  for (const auto& s : spans)
    if (s.func == "main.Add") (s.goid == -7 ? a7 : a8) = &s;
  ASSERT_TRUE(a7 && a8);
  EXPECT_EQ(a8->goid, -8);
  EXPECT_EQ(a7->stack, std::vector<std::string>{"main.outer"});
  EXPECT_EQ(a7->end_ns - a7->start_ns, 4u);
  EXPECT_TRUE(a8->stack.empty());
  EXPECT_EQ(a8->end_ns - a8->start_ns, 4u);
}

// A wait inside a call is a span beneath it, named by the reason, from the change to
// waiting to the next change of that goroutine.
TEST(CallTree, WaitsInsideCallsAreSpansBeneathThem) {
  CallTree t;
  t.add(state(5, 1, "running", "waiting", "sleep"));  // outside any call: not a span
  t.add(state(8, 1, "waiting", "runnable", ""));
  t.add(call("entry", 10, 1, "main.f"));
  t.add(state(15, 1, "running", "waiting", "chan receive"));
  t.add(state(15, 2, "running", "waiting", "sleep"));  // goroutine 2 has no open call
  t.add(state(45, 1, "waiting", "runnable", ""));
  t.add(state(47, 1, "runnable", "running", ""));
  t.add(state(50, 1, "running", "waiting", ""));  // no reason known
  t.add(state(60, 1, "waiting", "runnable", ""));
  t.add(call("return", 70, 1, "main.f"));
  auto spans = t.finish();
  ASSERT_EQ(spans.size(), 3u);
  EXPECT_EQ(spans[0].func, "main.f");
  EXPECT_FALSE(spans[0].wait);
  EXPECT_EQ(spans[1].func, "(waiting: chan receive)");
  EXPECT_TRUE(spans[1].wait);
  EXPECT_EQ(spans[1].start_ns, 15u);
  EXPECT_EQ(spans[1].end_ns, 45u);
  EXPECT_EQ(spans[1].stack, std::vector<std::string>{"main.f"});
  EXPECT_EQ(spans[2].func, "(waiting)");
  EXPECT_EQ(spans[2].end_ns - spans[2].start_ns, 10u);
  EXPECT_TRUE(spans[0].finished);
}

// A wait still open when the trace ends is closed there, like an unfinished call.
TEST(CallTree, OpenWaitEndsWithTheTrace) {
  CallTree t;
  t.add(call("entry", 10, 1, "main.f"));
  t.add(state(20, 1, "running", "waiting", "select"));
  auto spans = t.finish(100);
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_EQ(spans[1].func, "(waiting: select)");
  EXPECT_EQ(spans[1].end_ns, 100u);
  EXPECT_FALSE(spans[1].finished);
}

// With --why, runnable and syscall stretches are spans too, a wait keeps where it parked and
// who ended it, and the runnable stretch after it who made it runnable (the flow's ends).
TEST(CallTree, WhyAddsRunnableAndSyscallSpansAndWakers) {
  CallTree t(CallTree::Options{.why = true});
  t.add(call("entry", 10, 1, "main.f"));
  Event park = state(20, 1, "running", "waiting", "chan receive");
  park["parked_at"] = "main.f";
  t.add(park);
  Event wake = state(60, 1, "waiting", "runnable", "");
  wake["woken_by"] = {{"goid", 8}, {"func", "main.sender"}};
  t.add(wake);
  t.add(state(65, 1, "runnable", "running", ""));
  t.add(state(70, 1, "running", "syscall", ""));
  t.add(state(85, 1, "syscall", "running", ""));
  t.add(state(90, 1, "running", "runnable", ""));  // a yield: nobody woke it
  t.add(state(98, 1, "runnable", "running", ""));
  t.add(call("return", 100, 1, "main.f"));
  auto spans = t.finish();
  ASSERT_EQ(spans.size(), 5u);
  EXPECT_EQ(spans[1].func, "(waiting: chan receive)");
  EXPECT_EQ(spans[1].off_cpu, OffCpu::Waiting);
  EXPECT_EQ(spans[1].parked_at, "main.f");
  ASSERT_TRUE(spans[1].woken_by);
  EXPECT_EQ(spans[1].woken_by->goid, 8);
  EXPECT_EQ(spans[1].woken_by->func, "main.sender");
  EXPECT_EQ(spans[2].func, "(runnable)");
  EXPECT_EQ(spans[2].start_ns, 60u);
  EXPECT_EQ(spans[2].end_ns, 65u);
  ASSERT_TRUE(spans[2].woken_by);
  EXPECT_EQ(spans[2].woken_by->goid, 8);
  EXPECT_EQ(spans[3].func, "(syscall)");
  EXPECT_EQ(spans[3].off_cpu, OffCpu::Syscall);
  EXPECT_EQ(spans[3].end_ns - spans[3].start_ns, 15u);
  EXPECT_EQ(spans[4].func, "(runnable)");
  EXPECT_FALSE(spans[4].woken_by);
  for (size_t i = 1; i < spans.size(); ++i) {
    EXPECT_TRUE(spans[i].wait);
    EXPECT_EQ(spans[i].stack, std::vector<std::string>{"main.f"});
  }

  // Without --why, only the wait is a span, as before.
  CallTree plain;
  plain.add(call("entry", 10, 1, "main.f"));
  plain.add(park);
  plain.add(wake);
  plain.add(state(70, 1, "running", "syscall", ""));
  plain.add(state(85, 1, "syscall", "running", ""));
  plain.add(call("return", 100, 1, "main.f"));
  EXPECT_EQ(plain.finish().size(), 2u);
}

// The kernel's intervals (--why on eBPF, `kwhy` events): a system call inside Go's own
// syscall stretch names it; one while Go had the goroutine running, and the time its thread
// was off the CPU, are stretches of their own beneath the call.
TEST(CallTree, KernelIntervalsNameSyscallsAndShowPreemption) {
  auto kwhy = [](const char* kind, uint64_t from, uint64_t to, const char* name) {
    Event e = {{"event", "kwhy"}, {"kind", kind}, {"from_ns", from},
               {"ts_ns", to},     {"tid", 10},    {"goid", 1}};
    if (*name) e["name"] = name;
    return e;
  };
  CallTree t(CallTree::Options{.why = true});
  t.add(kwhy("syscall", 1, 5, "read"));  // no call open: nothing
  t.add(call("entry", 10, 1, "main.f"));
  t.add(state(20, 1, "running", "syscall", ""));
  t.add(kwhy("syscall", 21, 23, "write"));
  t.add(kwhy("syscall", 24, 34, "nanosleep"));  // the longest names it
  t.add(state(35, 1, "syscall", "running", ""));
  t.add(kwhy("preempted", 40, 48, ""));
  t.add(kwhy("syscall", 50, 56, "futex"));  // a raw system call, running to Go
  t.add(call("return", 60, 1, "main.f"));
  auto spans = t.finish();
  ASSERT_EQ(spans.size(), 4u);
  EXPECT_EQ(spans[1].func, "(syscall nanosleep)");
  EXPECT_EQ(spans[1].start_ns, 20u);
  EXPECT_EQ(spans[1].end_ns, 35u);
  EXPECT_EQ(spans[2].func, "(preempted)");
  EXPECT_EQ(spans[2].off_cpu, OffCpu::Preempted);
  EXPECT_EQ(spans[2].end_ns - spans[2].start_ns, 8u);
  EXPECT_EQ(spans[3].func, "(syscall futex)");
  EXPECT_EQ(spans[3].start_ns, 50u);
  EXPECT_EQ(spans[3].stack, std::vector<std::string>{"main.f"});
}

}  // namespace
}  // namespace gotap
