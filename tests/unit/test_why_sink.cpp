// The --why sink without a tracee: what reaches the views and the record, and a call whose
// entry a return-time condition held (--slower) until its return.
#include <vector>

#include <gtest/gtest.h>

#include "core/why/why_sink.h"

namespace gotap::why {
namespace {

constexpr uint64_t ms = 1'000'000;

struct Collect : EventSink {
  std::vector<Event> got;
  void emit(const Event& ev) override { got.push_back(ev); }
};

Event call(const char* kind, uint64_t ts, int64_t goid) {
  Event e = {{"event", kind}, {"ts_ns", ts}, {"goid", goid}, {"func", "main.f"}};
  if (std::string(kind) == "return") e["duration_ns"] = ts;  // entered at 0
  return e;
}
Event state(uint64_t ts, int64_t goid, const char* from, const char* to, const char* reason = "") {
  Event e = {{"event", "gstate"}, {"ts_ns", ts},  {"tid", 10},
             {"goid", goid},      {"from", from}, {"to", to}};
  if (*reason) e["reason"] = reason;
  return e;
}

std::vector<std::string> kinds(const std::vector<Event>& evs) {
  std::vector<std::string> k;
  for (const Event& e : evs)
    k.push_back(e.value("event", "") + "@" + std::to_string(e.value("ts_ns", 0)));
  return k;
}

// The entry comes with the return, after the status changes of the call: they are the
// call's all the same, and the views get them after the entry.
TEST(WhySink, HeldEntryIsCreditedTheChangesSinceIt) {
  auto next = std::make_unique<Collect>();
  Collect views;
  Collect* out = next.get();
  auto sink = make_why_sink(std::move(next), {.call_states_to = {&views}, .entries_held = true});
  sink->emit(state(0, 1, "runnable", "running"));  // before the call: not its own
  sink->emit(state(2 * ms, 1, "running", "waiting", "sleep"));
  sink->emit(state(32 * ms, 1, "waiting", "runnable"));
  sink->emit(state(33 * ms, 1, "runnable", "running"));
  sink->emit({{"event", "kwhy"},
              {"kind", "preempted"},
              {"from_ns", 34 * ms},
              {"ts_ns", 35 * ms},
              {"goid", 1}});
  sink->emit(call("entry", 1 * ms, 1));
  sink->emit(call("return", 40 * ms, 1));
  ASSERT_EQ(out->got.size(), 2u);
  const Event& why = out->got[1]["why"];
  EXPECT_EQ(why["waiting_ns"], 30 * ms) << why;
  EXPECT_EQ(why["runnable_ns"], 1 * ms);
  EXPECT_EQ(why["running_ns"], 8 * ms);
  EXPECT_EQ(why["waits"][0]["reason"], "sleep");
  EXPECT_EQ(kinds(views.got), (std::vector<std::string>{"gstate@2000000", "gstate@32000000",
                                                        "gstate@33000000", "kwhy@35000000"}));

  // Without a held entry, the same changes before the entry are none of the call's.
  auto next2 = std::make_unique<Collect>();
  Collect* out2 = next2.get();
  auto plain = make_why_sink(std::move(next2), {});
  plain->emit(state(2 * ms, 1, "running", "waiting", "sleep"));
  plain->emit(state(32 * ms, 1, "waiting", "runnable"));
  plain->emit(call("entry", 1 * ms, 1));
  plain->emit(call("return", 40 * ms, 1));
  ASSERT_EQ(out2->got.size(), 2u);
  EXPECT_EQ(out2->got[1]["why"]["waiting_ns"], 0u);
}

// Only the changes of goroutines inside traced calls go to the views; the output gets none
// without --goroutines.
TEST(WhySink, ViewsGetTheChangesInsideCalls) {
  auto next = std::make_unique<Collect>();
  Collect views;
  Collect* out = next.get();
  auto sink = make_why_sink(std::move(next), {.call_states_to = {&views}});
  sink->emit(state(1 * ms, 2, "running", "waiting", "sleep"));  // no call open
  sink->emit(call("entry", 2 * ms, 1));
  sink->emit(state(3 * ms, 1, "running", "waiting", "chan receive"));
  sink->emit(state(4 * ms, 1, "waiting", "runnable"));
  sink->emit(state(5 * ms, 1, "runnable", "running"));
  // The kernel's intervals of a goroutine inside a call, for the views alone.
  sink->emit({{"event", "kwhy"},
              {"kind", "preempted"},
              {"from_ns", 5 * ms + 1},
              {"ts_ns", 5 * ms + 9},
              {"goid", 1}});
  sink->emit({{"event", "kwhy"},
              {"kind", "preempted"},
              {"from_ns", 5 * ms + 1},
              {"ts_ns", 5 * ms + 9},
              {"goid", 2}});
  sink->emit(call("return", 6 * ms, 1));
  sink->emit(state(7 * ms, 1, "running", "waiting", "sleep"));  // after it
  EXPECT_EQ(kinds(views.got), (std::vector<std::string>{"gstate@3000000", "gstate@4000000",
                                                        "gstate@5000000", "kwhy@5000009"}));
  EXPECT_EQ(kinds(out->got), (std::vector<std::string>{"entry@2000000", "return@6000000"}));
}

// With --goroutines, a held call's changes went to the output (and the views) before its
// entry: the views get them again after the entry, marked replayed, and the kernel's
// intervals of calls; the output gets each change once, where it happened.
TEST(WhySink, HeldEntryWithGoroutineEventsIsReplayedToTheViews) {
  auto next = std::make_unique<Collect>();
  Collect views;
  Collect* out = next.get();
  auto sink = make_why_sink(std::move(next), {.pass_goroutine_events = true,
                                              .call_states_to = {&views},
                                              .replays_to = {&views},
                                              .entries_held = true});
  sink->emit(state(2 * ms, 1, "running", "waiting", "sleep"));
  sink->emit(state(32 * ms, 1, "waiting", "runnable"));
  sink->emit({{"event", "kwhy"},
              {"kind", "syscall"},
              {"from_ns", 33 * ms},
              {"ts_ns", 34 * ms},
              {"goid", 1},
              {"name", "write"}});
  sink->emit(call("entry", 1 * ms, 1));
  sink->emit(call("return", 40 * ms, 1));
  EXPECT_EQ(kinds(out->got), (std::vector<std::string>{"gstate@2000000", "gstate@32000000",
                                                       "entry@1000000", "return@40000000"}));
  EXPECT_EQ(out->got[3]["why"]["waiting_ns"], 30 * ms);
  EXPECT_EQ(kinds(views.got),
            (std::vector<std::string>{"gstate@2000000", "gstate@32000000", "kwhy@34000000"}));
  for (const Event& e : views.got) EXPECT_TRUE(e.value("replayed", false)) << e;
}

}  // namespace
}  // namespace gotap::why
