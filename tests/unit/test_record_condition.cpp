// --if on the trampoline backend's records (backends/trampoline/record_condition.h): what a
// condition adds to a site's capture is all it reads, so that run on a record (filled as the
// trampoline fills it: trampoline_code.h) it decides each call as the interpreter decides it
// on the process's registers and memory at the call. The trampoline's own code for those
// words is run in test_trampoline_events.cpp; real programs in test_runtime_cond.cpp.
#include <cstring>
#include <map>

#include <gtest/gtest.h>

#include "backends/trampoline/record_condition.h"
#include "core/cond/eval.h"
#include "core/plan/event_ring.h"
#include "tests/unit/cond_plan.h"

namespace gotap::trampoline {
namespace {

using gotap::testing::CondMemory;

// A record as the trampoline writes it at a site whose registers are `regs`: each word from
// its register, stack slot or pointer's target, each copy's bytes (trampoline_code.h).
std::vector<uint8_t> record_of(const RecordCapture& cap, const RegState& regs, MemoryReader& mem) {
  std::vector<uint8_t> rec(kTraceRing.record_size());
  std::vector<uint64_t> w(cap.words.size());
  for (size_t i = 0; i < cap.words.size(); ++i) {
    const CaptureWord& c = cap.words[i];
    if (c.src == CaptureWord::Reg) {
      w[i] = c.reg < kNumValueRegs ? regs.gp[c.reg] : 0;
    } else if (c.src == CaptureWord::Stack) {
      mem.read(regs.sp + c.off, &w[i], 8);
    } else if (deref_read(w[c.base])) {
      mem.read(w[c.base] + c.off, &w[i], c.size);
    }
    std::memcpy(rec.data() + kTraceWords + 8 * i, &w[i], 8);
  }
  for (size_t i = 0; i < cap.copies.size(); ++i) {
    const CaptureCopy& c = cap.copies[i];
    uint16_t len = 0;
    if (c.kind == CaptureCopy::String && deref_read(w[c.word])) {
      len = static_cast<uint16_t>(std::min<uint64_t>(w[c.aux], cap.copy_room(i)));
      if (!mem.read(w[c.word], rec.data() + cap.copy_at(i), len)) len = 0;
    } else if (c.kind == CaptureCopy::Itab && deref_read(w[c.word]) && cap.copy_room(i) == 8) {
      len = mem.read(w[c.word] + 8, rec.data() + cap.copy_at(i), 8) ? 8 : 0;
    }
    std::memcpy(rec.data() + kTraceCopyLen + 2 * i, &len, 2);
  }
  return rec;
}

class RecordConditionTest : public ::testing::Test {
 protected:
  // The interpreter's verdict on the live registers and memory, and the one on the records of
  // the same call; both entry then return (duration 20 ms).
  void expect_same(const std::string& expr) {
    SCOPED_TRACE(expr);
    cond::ConditionSpec spec;
    spec.expr = expr;
    auto c = cond::build_condition(spec, fake.plan);
    ASSERT_TRUE(c) << c.error().what();
    const gotap_cond& prog = c->funcs[0].prog;
    const uint64_t duration = 20'000'000;

    cond::EvalEnv env{&entry, &mem, 7, 0, 0, 0, nullptr};
    bool live = cond::run(prog, false, env);
    if (live && (prog.flags & GOTAP_COND_AT_RET)) {
      env.regs = &ret;
      env.duration_ns = duration;
      live = cond::run(prog, true, env);
    }

    RecordCapture at_entry, at_ret;
    ASSERT_EQ(add_condition_capture(prog, false, at_entry), "");
    ASSERT_EQ(add_condition_capture(prog, true, at_ret), "");
    RecordCondition rc(*c, 0);
    uint64_t bits = 0, vals[GOTAP_COND_VALS] = {};
    const auto e = record_of(at_entry, entry, mem);
    bool recorded = rc.run(0, false, e.data(), at_entry, 7, 0, bits, vals);
    if (recorded && rc.at_ret(0)) {
      const auto r = record_of(at_ret, ret, mem);
      recorded = rc.run(0, true, r.data(), at_ret, 7, duration, bits, vals);
    }
    EXPECT_EQ(recorded, live);
    ++decided_[live];
  }

  void expect_all() {
    for (const char* expr : {
             "n == -3",
             "n == 5 && duration > 10ms",
             "k == 9",
             "goid == 7",
             "s == \"hello, world\"",
             "s != \"hello\"",
             "hasPrefix(s, \"hello\")",
             "contains(s, \"o, w\")",
             "len(s) == 12",
             "o != nil && o.ID == 42",
             "o.Customer == \"acme\"",
             "contains(o.Customer, \"cm\")",
             "o.Customer == s",
             "o.ID == 0",
             "o.ID != 0",
             "o == nil || o.ID == 1",
             "t == \"stacked\"",
             "hasPrefix(b, \"ab\")",
             "len(b) == 3",
             "a[1] == 5 && a[2] == 6",
             "~r0 != nil",
             "type(~r0) == \"*fs.PathError\"",
             "~r1 > n",
             "n == 6 || ~r0 != nil",
         })
      expect_same(expr);
  }

  gotap::testing::CondPlan fake;
  CondMemory mem;
  RegState entry, ret;
  std::map<bool, int> decided_;
};

TEST_F(RecordConditionTest, RecordsDecideAsTheLiveCallDoes) {
  // main.handle(n, s, o, k, xs, m, t, a, b) -> (~r0 error, ~r1 int): tests/unit/cond_plan.h.
  struct {
    int64_t id;
    uint64_t ptr, len;
  } order{42, 0x3000, 4};
  mem.put(0x2000, &order, sizeof order);
  mem.put(0x3000, "acme", 4);
  mem.put(0x3100, "hello, world", 12);
  mem.put(0x3200, "stacked", 7);
  mem.put(0x3300, "abc", 3);
  const uint64_t stack[9] = {0, 0x3200, 7, 4, 5, 6, 0x3300, 3, 3};
  mem.put(0x7000, stack, sizeof stack);
  const uint64_t itab[2] = {0, 0x400000 + 0x100};
  mem.put(0x9000, itab, sizeof itab);
  entry.sp = 0x7000;
  entry.gp[0] = uint64_t(-3);
  entry.gp[1] = 0x3100;
  entry.gp[2] = 12;
  entry.gp[3] = 0x2000;
  entry.gp[4] = 9;
  ret.gp[0] = 0x9000;
  ret.gp[1] = 0x9100;
  ret.gp[2] = 10;
  expect_all();
  // Another call: no order, no error, another n and string.
  entry.gp[0] = 5;
  entry.gp[2] = 4;  // "hell"
  entry.gp[3] = 0;
  ret.gp[0] = 0;
  ret.gp[2] = 3;
  expect_all();
  // An order pointer that is no address: neither side reads through it.
  entry.gp[3] = 0x10;
  expect_all();
  // Both verdicts came up, so that agreement means something.
  EXPECT_GT(decided_[true], 10);
  EXPECT_GT(decided_[false], 10);
}

// trace --if with --stack: a record's stack walk (CaptureCopy::Stack, its last copy) holds
// return addresses, not memory at any word's address. A call whose string was not copied is
// undecided by its string, even when the walk's bytes, taken as memory at the string's
// address (its `word`), would say "hello, world".
TEST_F(RecordConditionTest, AStackWalkIsNoMemoryAConditionReads) {
  cond::ConditionSpec spec;
  spec.expr = "s == \"hello, world\"";
  auto c = cond::build_condition(spec, fake.plan);
  ASSERT_TRUE(c) << c.error().what();
  const gotap_cond& prog = c->funcs[0].prog;
  RecordCapture cap;
  ASSERT_EQ(add_condition_capture(prog, false, cap), "");
  mem.put(0x3100, "hello, world", 12);
  entry.gp[1] = 0x3100;
  entry.gp[2] = 12;
  RecordCondition rc(*c, 0);
  uint64_t bits = 0, vals[GOTAP_COND_VALS] = {};
  auto rec = record_of(cap, entry, mem);
  ASSERT_TRUE(rc.run(0, false, rec.data(), cap, 7, 0, bits, vals)) << "the copy decides";
  uint8_t data_word = 0;
  while (data_word < cap.words.size() &&
         !(cap.words[data_word].src == CaptureWord::Reg && cap.words[data_word].reg == 1))
    ++data_word;
  ASSERT_LT(data_word, cap.words.size()) << "no word of s's data";
  size_t string_copy = 0;
  while (string_copy < cap.copies.size() && cap.copies[string_copy].kind != CaptureCopy::String)
    ++string_copy;
  ASSERT_LT(string_copy, cap.copies.size());
  cap.copies.push_back({CaptureCopy::Stack, data_word, 0, 16, 0});
  rec = record_of(cap, entry, mem);
  const uint16_t none = 0, twelve = 12;
  std::memcpy(rec.data() + kTraceCopyLen + 2 * string_copy, &none, 2);
  std::memcpy(rec.data() + kTraceCopyLen + 2 * (cap.copies.size() - 1), &twelve, 2);
  std::memcpy(rec.data() + cap.copy_at(cap.copies.size() - 1), "hello, world", 12);
  bits = 0;
  EXPECT_FALSE(rc.run(0, false, rec.data(), cap, 7, 0, bits, vals));
}

// What a record cannot hold leaves the function to kernel uprobes, with the reason.
TEST_F(RecordConditionTest, WhatARecordCannotHoldIsSaid) {
  cond::ConditionSpec spec;
  spec.expr = "xs[n] == 20";
  auto c = cond::build_condition(spec, fake.plan);
  ASSERT_TRUE(c) << c.error().what();
  RecordCapture cap;
  EXPECT_EQ(add_condition_capture(c->funcs[0].prog, false, cap),
            "follows an address it computes (an element by index)");
  // A site whose own copies leave no room for a comparison's bytes.
  spec.expr = "o.Customer == s";
  c = cond::build_condition(spec, fake.plan);
  ASSERT_TRUE(c) << c.error().what();
  RecordCapture full;
  full.words.resize(10);
  full.copies = {{CaptureCopy::String, 0, 1, 200}};
  EXPECT_NE(add_condition_capture(c->funcs[0].prog, false, full).find("more bytes of strings"),
            std::string::npos);
}

}  // namespace
}  // namespace gotap::trampoline
