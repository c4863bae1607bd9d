// TimeMerge (core/events/time_merge.h): two sources, each in time order, become one stream in
// time order once both have marked past an event; a source that stops marking holds nothing
// past max_hold_ns; an event behind what went out goes out at once and is counted.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/events/time_merge.h"
#include "core/events/typed_events.h"

namespace gotap {
namespace {

// Records what reaches the output: each call's "func@ts", and the flushes.
struct Recorder : EventSink {
  std::vector<std::string> got;
  int flushes = 0;
  void emit(const Event& ev) override {
    got.push_back(ev.value("event", "") + "@" + std::to_string(ev.value("ts_ns", uint64_t(0))));
  }
  void emit_entry(const CallEntry& e) override {
    got.push_back(e.func + "@" + std::to_string(e.ts_ns));
  }
  void emit_return(const CallReturn& r) override {
    got.push_back("ret " + r.func + "@" + std::to_string(r.ts_ns));
  }
  void flush() override { ++flushes; }
};

CallEntry entry(const std::string& f, uint64_t ts) {
  CallEntry e;
  e.func = f;
  e.ts_ns = ts;
  return e;
}

CallReturn ret(const std::string& f, uint64_t ts) {
  CallReturn r;
  r.func = f;
  r.ts_ns = ts;
  return r;
}

// A far-future hold, so that only the marks decide (the clock's now is far below 2^60).
constexpr uint64_t kNever = uint64_t(1) << 62;
// Times well past any clock's now minus the hold: they are never stale.
constexpr uint64_t kT = uint64_t(1) << 61;

TEST(TimeMerge, NestsOneSourcesCallsInTheOthersByTime) {
  Recorder out;
  TimeMerge m(out, 2, kNever);
  // The ring (source 0) is read first: its call and return, around source 1's call.
  m.source(0).emit_entry(entry("step", kT + 10));
  m.source(0).emit_return(ret("step", kT + 40));
  m.mark(0, kT + 50);
  m.source(0).flush();
  EXPECT_TRUE(out.got.empty()) << "source 1 has not marked: its calls may come before";
  m.source(1).emit_entry(entry("leaf", kT + 20));
  m.source(1).emit_return(ret("leaf", kT + 30));
  m.mark(1, kT + 35);
  m.source(1).flush();
  EXPECT_EQ(out.got, (std::vector<std::string>{"step@" + std::to_string(kT + 10),
                                               "leaf@" + std::to_string(kT + 20),
                                               "ret leaf@" + std::to_string(kT + 30)}));
  m.mark(1, kT + 100);
  m.source(1).flush();
  ASSERT_EQ(out.got.size(), 4u);
  EXPECT_EQ(out.got[3], "ret step@" + std::to_string(kT + 40));
  EXPECT_EQ(m.out_of_order(), 0u);
}

TEST(TimeMerge, ASourceThatStopsMarkingHoldsNothingPastTheHold) {
  Recorder out;
  TimeMerge m(out, 2, 1000);  // 1 us: every event of an old time is stale at once
  m.source(0).emit_entry(entry("a", 5));
  m.mark(0, 10);
  m.source(0).flush();
  ASSERT_EQ(out.got, std::vector<std::string>{"a@5"}) << "source 1 never marked";
  EXPECT_GE(out.flushes, 1);
}

TEST(TimeMerge, ALateEventGoesOutAtOnceAndIsCounted) {
  Recorder out;
  TimeMerge m(out, 2, kNever);
  m.mark(1, kT + 100);
  m.source(0).emit_entry(entry("a", kT + 50));
  m.mark(0, kT + 60);
  m.source(0).flush();
  ASSERT_EQ(out.got.size(), 1u);
  m.source(1).emit_entry(entry("late", kT + 40));
  ASSERT_EQ(out.got.size(), 2u);
  EXPECT_EQ(out.got[1], "late@" + std::to_string(kT + 40));
  EXPECT_EQ(m.out_of_order(), 1u);
}

TEST(TimeMerge, CloseSendsWhatIsHeldInOrderAndEventsWithoutATimePassAtOnce) {
  Recorder out;
  TimeMerge m(out, 2, kNever);
  m.source(1).emit_entry(entry("b", kT + 20));
  m.source(0).emit_entry(entry("a", kT + 10));
  m.source(0).emit(Event{{"event", "warning"}});
  ASSERT_EQ(out.got, std::vector<std::string>{"warning@0"});
  m.close();
  EXPECT_EQ(out.got, (std::vector<std::string>{"warning@0", "a@" + std::to_string(kT + 10),
                                               "b@" + std::to_string(kT + 20)}));
  EXPECT_EQ(m.out_of_order(), 0u);
}

}  // namespace
}  // namespace gotap
