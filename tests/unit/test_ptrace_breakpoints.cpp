// The breakpoint layer's instruction handling: condition codes evaluated against flags the
// CPU itself produced, and the classification of displaced instructions into emulated ones
// and out-of-line copies (with RIP-relative operands found for rebasing).
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "backends/ptrace/breakpoints.h"

namespace gotap::ptrace {
namespace {

uint64_t flags_of_cmp(int64_t a, int64_t b) {
  uint64_t f;
  asm volatile("cmp %2, %1\n\tpushfq\n\tpopq %0" : "=r"(f) : "r"(a), "r"(b) : "cc");
  return f;
}

TEST(Breakpoints, ConditionCodesMatchTheCpu) {
  const int64_t vals[] = {0, 1, -1, 2, INT64_MAX, INT64_MIN, 7};
  for (int64_t a : vals) {
    for (int64_t b : vals) {
      uint64_t f = flags_of_cmp(a, b);
      uint64_t ua = uint64_t(a), ub = uint64_t(b);
      SCOPED_TRACE(testing::Message() << a << " cmp " << b);
      EXPECT_EQ(condition_holds(0x2, f), ua < ub);   // jb
      EXPECT_EQ(condition_holds(0x3, f), ua >= ub);  // jae
      EXPECT_EQ(condition_holds(0x4, f), a == b);    // je
      EXPECT_EQ(condition_holds(0x5, f), a != b);    // jne
      EXPECT_EQ(condition_holds(0x6, f), ua <= ub);  // jbe (Go's stack check)
      EXPECT_EQ(condition_holds(0x7, f), ua > ub);   // ja
      EXPECT_EQ(condition_holds(0xC, f), a < b);     // jl
      EXPECT_EQ(condition_holds(0xD, f), a >= b);    // jge
      EXPECT_EQ(condition_holds(0xE, f), a <= b);    // jle
      EXPECT_EQ(condition_holds(0xF, f), a > b);     // jg
      __int128 d = __int128(a) - b;
      EXPECT_EQ(condition_holds(0x0, f), d != int64_t(d));       // jo
      EXPECT_EQ(condition_holds(0x8, f), int64_t(ua - ub) < 0);  // js
    }
  }
}

class CodeMemory : public MemoryReader {
 public:
  CodeMemory(uint64_t base, std::vector<uint8_t> code) : base_(base), code_(std::move(code)) {
    code_.resize(code_.size() + 32, 0xCC);
  }
  bool read(uint64_t addr, void* buf, size_t n) override {
    if (addr < base_ || addr - base_ + n > code_.size()) return false;
    std::memcpy(buf, code_.data() + (addr - base_), n);
    return true;
  }

 private:
  uint64_t base_;
  std::vector<uint8_t> code_;
};

Site classify(std::vector<uint8_t> code) {
  CodeMemory mem(0x401000, std::move(code));
  Breakpoints bps;
  auto r = bps.add(0x401000, {SiteRole::Entry, 0, -1}, 0, mem);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().what());
  return r.ok() ? **r : Site{};
}

TEST(Breakpoints, ClassifiesDisplacedInstructions) {
  EXPECT_EQ(classify({0x55}).step, StepKind::PushRbp);
  EXPECT_EQ(classify({0xC3}).step, StepKind::Ret);
  Site reti = classify({0xC2, 0x10, 0x00});
  EXPECT_EQ(reti.step, StepKind::Ret);
  EXPECT_EQ(reti.ret_imm, 16);
  // jbe rel8 +0x20 (Go's stack check) and jbe rel32
  Site j8 = classify({0x76, 0x20});
  EXPECT_EQ(j8.step, StepKind::Jcc);
  EXPECT_EQ(j8.cc, 6);
  EXPECT_EQ(j8.target, 0x401000u + 2 + 0x20);
  Site j32 = classify({0x0F, 0x86, 0x00, 0x01, 0x00, 0x00});
  EXPECT_EQ(j32.cc, 6);
  EXPECT_EQ(j32.target, 0x401000u + 6 + 0x100);
  Site call = classify({0xE8, 0xFB, 0xFF, 0xFF, 0xFF});  // call to itself
  EXPECT_EQ(call.step, StepKind::Call);
  EXPECT_EQ(call.target, 0x401000u);
  // cmp rsp, [r14+0x10]: out of line, nothing to rebase
  Site cmp = classify({0x49, 0x3B, 0x66, 0x10});
  EXPECT_EQ(cmp.step, StepKind::OutOfLine);
  EXPECT_EQ(cmp.len, 4);
  EXPECT_EQ(cmp.disp_off, -1);
  // lea rax, [rip+0x1234]: out of line with its displacement rebased
  Site lea = classify({0x48, 0x8D, 0x05, 0x34, 0x12, 0x00, 0x00});
  EXPECT_EQ(lea.step, StepKind::OutOfLine);
  EXPECT_EQ(lea.disp_off, 3);
  EXPECT_EQ(classify({0x0F, 0x1F, 0x44, 0x00, 0x00}).step, StepKind::Nop);
}

TEST(Breakpoints, RefusesExistingInt3) {
  CodeMemory mem(0x401000, {0xCC});
  Breakpoints bps;
  EXPECT_FALSE(bps.add(0x401000, {}, 0, mem).ok());
}

}  // namespace
}  // namespace gotap::ptrace
