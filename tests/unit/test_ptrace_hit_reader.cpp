// The per-hit levers of the ptrace backend (issue 22): the copy of what a hit reads, taken in
// one system call while the thread is stopped and read after it resumed, and the tracer
// thread following the stopped thread's CPU. Run on this process's own memory: no tracee.
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include <gtest/gtest.h>

#include "backends/ptrace/cpu_follow.h"
#include "backends/ptrace/hit_reader.h"

namespace gotap::ptrace {
namespace {

uint64_t addr_of(const void* p) {
  return reinterpret_cast<uint64_t>(p);
}

TEST(HitReader, TheCopyIsWhatWasThereWhenTakenNotWhatCameAfter) {
  TraceeMemory live(getpid());
  HitMemory mem(live);
  volatile uint64_t word = 41;
  char other[8] = "abcdefg";
  mem.copy({{addr_of(const_cast<uint64_t*>(&word)), 8}});
  word = 42;  // the thread ran on after the copy
  mem.set_live(false);
  uint64_t v = 0;
  ASSERT_TRUE(mem.read(addr_of(const_cast<uint64_t*>(&word)), &v, 8));
  EXPECT_EQ(v, 41u);
  // Not in the copy: after the resume it is not read at all (it could be half-written).
  char got[8] = {};
  EXPECT_FALSE(mem.read(addr_of(other), got, 8));
  EXPECT_EQ(mem.misses(), 1u);
  // While the thread is stopped, a read outside the copy goes live.
  mem.set_live(true);
  ASSERT_TRUE(mem.read(addr_of(other), got, 8));
  EXPECT_STREQ(got, "abcdefg");
}

TEST(HitReader, TheCopyMovesWholeToAnotherReaderThatNeverReadsLive) {
  // EventQueue decodes on its own thread from the copy taken while the thread was stopped.
  TraceeMemory live(getpid());
  HitMemory mem(live), other(live);
  volatile uint64_t word = 7;
  uint64_t outside = 9;
  mem.copy({{addr_of(const_cast<uint64_t*>(&word)), 8}});
  other.adopt(mem.take());
  other.set_live(false);
  word = 8;
  uint64_t v = 0;
  EXPECT_FALSE(mem.read(addr_of(const_cast<uint64_t*>(&word)), &v, 8) && v == 7)
      << "the copy left the first reader";
  v = 0;
  ASSERT_TRUE(other.read(addr_of(const_cast<uint64_t*>(&word)), &v, 8));
  EXPECT_EQ(v, 7u);
  EXPECT_FALSE(other.read(addr_of(&outside), &v, 8));
  EXPECT_EQ(other.misses(), 1u);
}

TEST(HitReader, OneSystemCallForEveryRangeAndABadOneLosesNothingElse) {
  TraceeMemory live(getpid());
  HitMemory mem(live);
  uint64_t a = 1, b = 2;
  mem.copy({{addr_of(&a), 8}, {addr_of(&b), 8}});
  EXPECT_EQ(mem.syscalls(), 1u);
  // The middle range is not mapped: process_vm_readv stops there, the next is read alone.
  HitMemory bad(live);
  bad.copy({{addr_of(&a), 8}, {0x10, 8}, {addr_of(&b), 8}});
  bad.set_live(false);
  uint64_t v = 0;
  ASSERT_TRUE(bad.read(addr_of(&a), &v, 8));
  EXPECT_EQ(v, 1u);
  ASSERT_TRUE(bad.read(addr_of(&b), &v, 8));
  EXPECT_EQ(v, 2u);
  EXPECT_FALSE(bad.read(0x10, &v, 8));
}

TEST(HitReader, MoreRangesThanOneCallTakesLeaveTheCopyIncomplete) {
  TraceeMemory live(getpid());
  HitMemory mem(live);
  std::vector<uint64_t> words(100, 5);
  std::vector<HitMemory::Range> ranges;
  for (auto& w : words) ranges.push_back({addr_of(&w), 8});
  mem.copy(ranges);
  // The tracer then decodes before resuming, reading the rest live.
  EXPECT_FALSE(mem.complete());
  mem.copy({{addr_of(words.data()), 8}});
  EXPECT_TRUE(mem.complete());
}

ParamLoc reg_param(std::string name, std::string type, uint64_t size,
                   std::initializer_list<uint8_t> regs) {
  ParamLoc p;
  p.name = std::move(name);
  p.type_name = std::move(type);
  p.type = 1;
  p.size = size;
  uint32_t off = 0;
  for (uint8_t r : regs) {
    LocPiece pc;
    pc.kind = LocPiece::IntReg;
    pc.reg = r;
    pc.value_offset = off;
    pc.size = 8;
    p.loc.pieces.push_back(pc);
    off += 8;
  }
  return p;
}

TEST(HitReader, PlansTheGTheStackWordsAndTheStringBytesOfAHit) {
  // f(n int, s string) with a third argument on the stack at sp+8.
  std::string text = "hello, world";
  ParamLoc stack_arg;
  stack_arg.name = "k";
  stack_arg.type_name = "int";
  stack_arg.type = 1;
  stack_arg.size = 8;
  stack_arg.loc.pieces.push_back({LocPiece::Stack, 0, 8, 0, 8});
  ProbePlan plan;
  FuncPlan f;
  f.name = "main.f";
  f.abi = "internal";
  f.args = {reg_param("n", "int", 8, {0}), reg_param("s", "string", 16, {1, 2}), stack_arg};
  plan.funcs.push_back(f);
  HitPlan hp = plan_hit(plan.funcs[0].args);
  EXPECT_TRUE(hp.copyable);
  ASSERT_TRUE(hp.has_stack);
  EXPECT_EQ(hp.stack_lo, 8);
  EXPECT_EQ(hp.stack_hi, 16);
  EXPECT_EQ(hp.strs.size(), 1u);
  // A pointer is followed into memory the plan does not know: decoded while stopped.
  EXPECT_FALSE(plan_hit({reg_param("p", "*main.T", 8, {0})}).copyable);
  // Untyped words (no DWARF) are guessed at: the same.
  ParamLoc raw = reg_param("arg0", "word64", 8, {0});
  raw.type = 0;
  EXPECT_FALSE(plan_hit({raw}).copyable);

  // A hit whose registers point into this process: the g (R14), the stack, the string.
  uint8_t g[512] = {};
  uint64_t stack[4] = {0, 77, 0, 0};
  const uint64_t goid = 99;
  std::memcpy(g + plan.offsets.g_goid, &goid, 8);
  TraceeMemory live(getpid());
  HitReader hits(live, plan, 5);
  SiteRole roles[] = {{SiteRole::Entry, 0, -1}};
  Site site;
  site.roles = roles;
  user_regs_struct r{};
  r.rsp = addr_of(stack);
  r.r14 = addr_of(g);
  r.rax = 3;
  r.rbx = addr_of(text.data());
  r.rcx = text.size();
  hits.gather(site, r);
  EXPECT_EQ(hits.mem().syscalls(), 1u);
  hits.mem().set_live(false);
  uint64_t v = 0;
  ASSERT_TRUE(hits.mem().read(addr_of(g) + plan.offsets.g_goid, &v, 8));
  EXPECT_EQ(v, goid);
  ASSERT_TRUE(hits.mem().read(addr_of(stack) + 8, &v, 8));
  EXPECT_EQ(v, 77u);
  // As many bytes as the string limit shows.
  char s[6] = {};
  ASSERT_TRUE(hits.mem().read(addr_of(text.data()), s, 5));
  EXPECT_STREQ(s, "hello");
  EXPECT_FALSE(hits.mem().read(addr_of(text.data()), s, 6));

  // Count and latency: the g alone (the goroutine's id), neither the stack nor the string.
  HitReader count(live, plan, 5, /*values=*/false);
  count.gather(site, r);
  EXPECT_EQ(count.mem().syscalls(), 1u);
  count.mem().set_live(false);
  ASSERT_TRUE(count.mem().read(addr_of(g) + plan.offsets.g_goid, &v, 8));
  EXPECT_EQ(v, goid);
  EXPECT_FALSE(count.mem().read(addr_of(stack) + 8, &v, 8));
  EXPECT_FALSE(count.mem().read(addr_of(text.data()), s, 1));
  EXPECT_FALSE(count.copyable(0, false));
}

TEST(CpuFollow, ReadsTheProcessorFieldAfterACommandNameWithSpacesAndParentheses) {
  std::string line =
      "1234 (a) b (c) R 1 1234 1234 0 -1 4194304 100 0 0 0 5 6 0 0 20 0 1 0 100 "
      "1000 50 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 7 0 0 0 0 0\n";
  EXPECT_EQ(stat_processor(line.data(), line.size()), 7);
  EXPECT_EQ(stat_processor("12 (x) R 1", 10), -1);
}

TEST(CpuFollow, MovesTheTracerThreadOnlyAndPutsItBack) {
  cpu_set_t before;
  ASSERT_EQ(sched_getaffinity(0, sizeof before, &before), 0);
  pid_t child = fork();
  if (child == 0) {
    for (;;) pause();
  }
  ASSERT_GT(child, 0);
  {
    EXPECT_FALSE(CpuFollower().enabled());  // off unless asked for
    setenv("GOTAP_PTRACE_FOLLOW_CPU", "1", 1);
    CpuFollower follow;
    unsetenv("GOTAP_PTRACE_FOLLOW_CPU");
    ASSERT_TRUE(follow.enabled());
    follow.follow(child, child);
    cpu_set_t now;
    ASSERT_EQ(sched_getaffinity(0, sizeof now, &now), 0);
    EXPECT_EQ(CPU_COUNT(&now), 1);
    // The followed program keeps its own affinity.
    cpu_set_t theirs;
    ASSERT_EQ(sched_getaffinity(child, sizeof theirs, &theirs), 0);
    EXPECT_TRUE(CPU_EQUAL(&theirs, &before));
  }
  cpu_set_t after;
  ASSERT_EQ(sched_getaffinity(0, sizeof after, &after), 0);
  EXPECT_TRUE(CPU_EQUAL(&after, &before));
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
}

}  // namespace
}  // namespace gotap::ptrace
