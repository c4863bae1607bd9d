// count and latency decided on the trampoline backend's records (backends/trampoline/
// call_tally.h): records written into a ring as the trampolines write them (event_ring.h),
// then read by a CallTally, which must count the calls the condition selects, time them,
// count the failures among them, and leave out what it cannot decide. The trampolines' own
// code is run in test_trampoline_events.cpp; real programs in test_runtime_cond.cpp and
// test_runtime_limits.cpp.
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "backends/trampoline/call_tally.h"
#include "core/plan/event_ring.h"
#include "tests/unit/cond_plan.h"

namespace gotap::trampoline {
namespace {

// main.handle (cond_plan.h): its entry (patch 0) and one RET (patch 1), whose record's word 0
// is the error's type word (RAX at the return).
struct Sites {
  gotap::testing::CondPlan fake;
  TraceSites sites;
  Sites() {
    sites.cfg.sites.resize(2);
    sites.cfg.sites[0].func_id = 0;
    sites.cfg.sites[1].func_id = 0;
    sites.cfg.sites[1].flags = GOTAP_PROBE_RET;
    sites.probe = {0, 1};
    sites.captures.resize(2);
    CaptureWord err;
    err.reg = GOTAP_RAX;
    sites.captures[1].words.push_back(err);
    sites.err_word = {-1, 0};
  }
  // Adds what `c` reads at each site, as trace_sites does.
  void add(const cond::Condition& c) {
    ASSERT_EQ(add_condition_capture(c.funcs[0].prog, false, sites.captures[0]), "");
    ASSERT_EQ(add_condition_capture(c.funcs[0].prog, true, sites.captures[1]), "");
  }
};

// A ring of `shape` and the records written into it so far.
struct Ring {
  RingShape shape;
  std::vector<uint8_t> bytes;
  uint64_t head = 0;
  explicit Ring(RingShape s) : shape(s), bytes(s.bytes()) {}
  // One record: its RingRecord, then `words` where its capture puts them.
  void put(uint32_t patch, bool ret, uint64_t goid, uint32_t depth, uint64_t tsc,
           const std::vector<uint64_t>& words) {
    uint8_t* r =
        bytes.data() + kRingRecords + ((head & (shape.capacity() - 1)) << shape.record_shift);
    RingRecord rec{head + 1, tsc, goid, (patch << 1) | (ret ? 1u : 0u), depth};
    std::memcpy(r + 8, &rec.tsc, sizeof rec - 8);
    for (size_t i = 0; i < words.size(); ++i) std::memcpy(r + kTraceWords + 8 * i, &words[i], 8);
    // The seq last, as the trampoline writes it.
    std::memcpy(r, &rec.seq, 8);
    ++head;
    std::memcpy(bytes.data() + kRingHead, &head, 8);
  }
};

cond::Condition condition(const ProbePlan& plan, const std::string& expr) {
  cond::ConditionSpec spec;
  spec.expr = expr;
  auto c = cond::build_condition(spec, plan);
  EXPECT_TRUE(c) << c.error().what();
  return c ? std::move(*c) : cond::Condition{};
}

TEST(RecordRingShape, AsSmallAsTheCapturesAllowIn4MiB) {
  RecordCapture one, ten, copy;
  one.words.resize(2);
  ten.words.resize(10);
  copy.words.resize(2);
  copy.copies.push_back({CaptureCopy::String, 0, 1, 16});
  EXPECT_EQ(record_ring_shape({}).record_size(), 64u);
  EXPECT_EQ(record_ring_shape({one}).record_size(), 64u);
  EXPECT_EQ(record_ring_shape({one, ten}).record_size(), 128u);
  // A copy's room is a full record's: the record is kTraceRing's.
  EXPECT_EQ(record_ring_shape({copy}).record_size(), kTraceRing.record_size());
  for (const RingShape& s :
       {record_ring_shape({one}), record_ring_shape({ten}), record_ring_shape({copy})})
    EXPECT_EQ(s.capacity() * s.record_size(), uint64_t{4} << 20);
}

// latency with no condition: every call whose entry was seen is timed, nested and
// interleaved calls pair by goroutine and depth, and failures are the returns with an error.
TEST(CallTally, TimesEveryPairedCallAndCountsItsFailures) {
  Sites s;
  const RingShape shape = s.sites.shape = record_ring_shape(s.sites.captures);
  Ring ring(shape);
  ring.put(1, true, 9, 100, 50, {0});         // a return whose entry came before the jumps
  ring.put(0, false, 1, 100, 1000, {});       // g1's outer call
  ring.put(0, false, 2, 100, 1100, {});       // g2's call
  ring.put(0, false, 1, 200, 1200, {});       // g1's nested call
  ring.put(1, true, 1, 200, 1300, {0x4000});  // ... fails
  ring.put(1, true, 2, 100, 1400, {0});       // g2's returns
  ring.put(1, true, 1, 100, 2000, {0x4000});  // g1's outer call fails too
  ring.put(0, false, 3, 100, 3000, {});       // still open at the end
  CallTally t(s.sites, 1, nullptr, 0, true);
  EXPECT_EQ(t.finish(ring.bytes.data()), 8u);
  const auto& f = t.funcs()[0];
  EXPECT_EQ(f.calls, 3u);
  EXPECT_EQ(f.latency.count, 3u);
  EXPECT_EQ(f.failed, 2u);
  EXPECT_EQ(t.unmatched_returns(), 1u);
  EXPECT_EQ(t.open_calls(), 1u);
  EXPECT_EQ(t.dropped(ring.bytes.data()), 0u);
}

// count --if decided at the entry counts there (a call still open counts), and its failures
// at its return; latency times the selected calls only.
TEST(CallTally, CountsTheCallsAnEntryConditionSelects) {
  Sites s;
  cond::Condition c = condition(s.fake.plan, "n > 5");
  s.add(c);
  ASSERT_FALSE(c.at_ret(0));
  // n is the entry's first condition word (RAX).
  ASSERT_EQ(s.sites.captures[0].words.size(), 1u);
  for (bool timed : {false, true}) {
    SCOPED_TRACE(timed ? "latency" : "count");
    const RingShape shape = s.sites.shape = record_ring_shape(s.sites.captures);
    Ring ring(shape);
    uint64_t tsc = 1000;
    // n = 0..9 on goroutine n; those with n % 3 == 0 fail.
    for (uint64_t n = 0; n < 10; ++n) ring.put(0, false, n + 1, 64, tsc++, {n});
    for (uint64_t n = 0; n < 9; ++n) ring.put(1, true, n + 1, 64, tsc++, {n % 3 ? 0 : 0x4000u});
    CallTally t(s.sites, 1, &c, 0, timed);
    t.finish(ring.bytes.data());
    const auto& f = t.funcs()[0];
    // 6..9 selected; 9 never returned (counted by count at its entry, not timed); 6 failed.
    EXPECT_EQ(f.calls, timed ? 3u : 4u);
    EXPECT_EQ(f.latency.count, timed ? 3u : 0u);
    EXPECT_EQ(f.failed, 1u);
  }
}

// A count decided at the entry of a function without an error result has no RET jumps
// (Run: plan_patches' entry_only): its entries count and keep nothing open.
TEST(CallTally, AnEntryOnlyCountKeepsNoCallOpen) {
  Sites s;
  s.sites.cfg.funcs.resize(1);
  s.sites.cfg.funcs[0].has_error = false;
  cond::Condition c = condition(s.fake.plan, "n > 5");
  s.add(c);
  const RingShape shape = s.sites.shape = record_ring_shape(s.sites.captures);
  Ring ring(shape);
  for (uint64_t n = 0; n < 10; ++n) ring.put(0, false, n + 1, 64, 1000 + n, {n});
  CallTally t(s.sites, 1, &c, 0, false);
  t.finish(ring.bytes.data());
  EXPECT_EQ(t.funcs()[0].calls, 4u);
  EXPECT_EQ(t.open_calls(), 0u);
}

// A condition on the results is decided at the return, on the return's record; a return
// whose entry was not seen is not counted (nothing to decide the entry's part on).
TEST(CallTally, DecidesAtTheReturnOnTheResults) {
  Sites s;
  cond::Condition c = condition(s.fake.plan, "~r1 > 10");
  s.add(c);
  ASSERT_TRUE(c.at_ret(0));
  const RecordCapture& at_ret = s.sites.captures[1];
  // ~r1 in RCX: the error's type word first, then the condition's own.
  size_t r1 = 0;
  for (size_t i = 0; i < at_ret.words.size(); ++i)
    if (at_ret.words[i].src == CaptureWord::Reg && at_ret.words[i].reg == GOTAP_RCX) r1 = i;
  ASSERT_EQ(r1, 1u);
  const RingShape shape = s.sites.shape = record_ring_shape(s.sites.captures);
  Ring ring(shape);
  ring.put(1, true, 7, 64, 10, {0x4000, 50});  // no entry seen: left out
  for (uint64_t i = 0; i < 20; ++i) {
    ring.put(0, false, 1, 64, 100 + 2 * i, {});
    ring.put(1, true, 1, 64, 101 + 2 * i, {i >= 15 ? 0x4000u : 0, i});
  }
  CallTally t(s.sites, 1, &c, 0, false);
  t.finish(ring.bytes.data());
  // ~r1 in 11..19: 9 calls, of which 15..19 failed.
  EXPECT_EQ(t.funcs()[0].calls, 9u);
  EXPECT_EQ(t.funcs()[0].failed, 5u);
  EXPECT_EQ(t.unmatched_returns(), 1u);
}

}  // namespace
}  // namespace gotap::trampoline
