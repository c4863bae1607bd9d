// The counting trampoline's code (core/plan/trampoline_code.h), run for real: hand-assembled
// functions are copied into a page of this process, their entry and RET sites found by
// jump_site.h, trampolines and jumps written beside them, and the patched functions called.
// The truth is the same function unpatched: every result must be the same, and each counter
// must equal the calls made, from one thread and from several at once.
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "core/plan/inline_mark.h"
#include "core/plan/jump_site.h"
#include "core/plan/trampoline_code.h"

namespace gotap {
namespace {

// f(x) = 3x + 1, framed as Go 1.21+ frames a function (without the stack check: the site is
// the entry), SysV ABI (x in rdi, result in rax) so that C++ can call it.
const std::vector<uint8_t> kTriple = {
    0x55,                          // 0x00 push rbp
    0x48, 0x89, 0xe5,              // 0x01 mov rbp,rsp
    0x48, 0x83, 0xec, 0x10,        // 0x04 sub rsp,0x10
    0x48, 0x89, 0x3c, 0x24,        // 0x08 mov [rsp],rdi
    0x48, 0x8b, 0x04, 0x24,        // 0x0c mov rax,[rsp]
    0x48, 0x8d, 0x44, 0x40, 0x01,  // 0x10 lea rax,[rax+rax*2+1]
    0x48, 0x83, 0xc4, 0x10,        // 0x15 add rsp,0x10
    0x5d,                          // 0x19 pop rbp
    0xc3,                          // 0x1a ret
};
constexpr uint64_t kTripleRet = 0x1a;

// g(x) = x == 5: the flags of its compare are live across the entry site's range (push,
// mov, push: none writes them) and read by sete after it. `lock inc` sets ZF; only
// pushfq/popfq keep the compare's. (A Go prologue's `sub rsp` writes them itself: there,
// they are dead.)
const std::vector<uint8_t> kIsFive = {
    0x48, 0x83, 0xff, 0x05,  // 0x00 cmp rdi,5
    0x55,                    // 0x04 push rbp
    0x48, 0x89, 0xe5,        // 0x05 mov rbp,rsp
    0x53,                    // 0x08 push rbx
    0x5b,                    // 0x09 pop rbx
    0x0f, 0x94, 0xc0,        // 0x0a sete al
    0x0f, 0xb6, 0xc0,        // 0x0d movzx eax,al
    0x5d,                    // 0x10 pop rbp
    0xc3,                    // 0x11 ret
};
constexpr uint64_t kIsFiveSite = 0x04, kIsFiveRet = 0x11;

// h(x) = 3x + 1 with Go's stack check at its entry: `cmp rsp,[r14+0x10]; jbe morestack`. Its
// morestack path stands in for runtime.morestack: it counts its passes in g's fourth word,
// "grows the stack" (the guard goes to 0, so that the check passes) and jumps back to the
// entry, as Go's does. kCallWithG calls h(x) with R14 = g, as Go code runs.
const std::vector<uint8_t> kChecked = {
    0x49, 0x3b, 0x66, 0x10,                          // 0x00 cmp rsp,[r14+0x10]
    0x76, 0x0b,                                      // 0x04 jbe 0x11
    0x55,                                            // 0x06 push rbp
    0x48, 0x89, 0xe5,                                // 0x07 mov rbp,rsp
    0x48, 0x8d, 0x44, 0x7f, 0x01,                    // 0x0a lea rax,[rdi+rdi*2+1]
    0x5d,                                            // 0x0f pop rbp
    0xc3,                                            // 0x10 ret
    0x49, 0xc7, 0x46, 0x10, 0x00, 0x00, 0x00, 0x00,  // 0x11 mov qword [r14+0x10],0
    0xf0, 0x49, 0xff, 0x46, 0x18,                    // 0x19 lock inc qword [r14+0x18]
    0xeb, 0xe0,                                      // 0x1e jmp 0x00
};
constexpr uint64_t kCheckedJbe = 0x04, kCheckedMorestack = 0x11;
// At 0x40 of the same page: push r14; mov r14,rsi; call 0x00; pop r14; ret.
constexpr uint64_t kCallWithG = 0x40;
const std::vector<uint8_t> kCallWithGCode = {0x41, 0x56, 0x49, 0x89, 0xf6, 0xe8, 0xb6,
                                             0xff, 0xff, 0xff, 0x41, 0x5e, 0xc3};

using Fn = uint64_t (*)(uint64_t);

// Two pages: code (the function at 0, trampolines from 0x400), then the counters.
class Patched {
 public:
  explicit Patched(const std::vector<uint8_t>& fn, const std::vector<uint8_t>& at_0x40 = {})
      : fn_(fn) {
    const long page = sysconf(_SC_PAGESIZE);
    page_ = static_cast<size_t>(page);
    mem_ = static_cast<uint8_t*>(
        mmap(nullptr, 2 * page_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (mem_ == MAP_FAILED) {
      mem_ = nullptr;
      return;
    }
    std::memcpy(mem_, fn.data(), fn.size());
    if (!at_0x40.empty()) std::memcpy(mem_ + 0x40, at_0x40.data(), at_0x40.size());
    blocks_ = decode_blocks(Bytes(fn.data(), fn.size()), base(), false);
    next_ = base() + 0x400;
  }
  ~Patched() {
    if (mem_) munmap(mem_, 2 * page_);
  }
  bool ok() const { return mem_ != nullptr; }
  uint64_t base() const { return reinterpret_cast<uint64_t>(mem_); }
  volatile uint64_t& counter(int i) {
    return *reinterpret_cast<volatile uint64_t*>(mem_ + page_ + 8 * i);
  }
  JumpSite entry(uint64_t off) const {
    return entry_jump_site(Bytes(fn_.data(), fn_.size()), base(), blocks_, base() + off);
  }
  JumpSite ret(uint64_t off) const {
    return ret_jump_site(Bytes(fn_.data(), fn_.size()), base(), blocks_, base() + off);
  }
  JumpSite stack_check(uint64_t jbe_off) const {
    return stack_check_jump_site(Bytes(fn_.data(), fn_.size()), base(), blocks_, base(),
                                 base() + jbe_off);
  }
  // Sends `site` to a new trampoline counting into counter(i).
  ::testing::AssertionResult patch(const JumpSite& site, int i, bool ret) {
    if (!site.ok()) return ::testing::AssertionFailure() << "no jump fits: " << site.refused;
    const Bytes original(mem_ + (site.at - base()), site.len);
    auto code = count_trampoline(next_, site, original, base() + page_ + 8 * i, ret);
    if (!code) return ::testing::AssertionFailure() << code.error().what();
    if (code->size() != count_trampoline_size(site, ret))
      return ::testing::AssertionFailure() << "size " << code->size();
    // The trampoline backend's 6-byte jbe takes a jno; other sites a jmp and int3s.
    auto jump = site.branch_len && site.len == site.branch_len ? branch_site_jump(site, next_)
                                                               : site_jump(site, next_);
    if (!jump) return ::testing::AssertionFailure() << jump.error().what();
    std::memcpy(mem_ + (next_ - base()), code->data(), code->size());
    std::memcpy(mem_ + (site.at - base()), jump->data(), jump->size());
    next_ += (code->size() + 15) & ~size_t{15};
    return ::testing::AssertionSuccess();
  }
  // The code page made executable (and no longer writable), as the backend's pages will be.
  bool seal() { return mprotect(mem_, page_, PROT_READ | PROT_EXEC) == 0; }
  Fn fn() const { return reinterpret_cast<Fn>(mem_); }
  using FnWithG = uint64_t (*)(uint64_t, uint64_t*);
  FnWithG at_0x40() const { return reinterpret_cast<FnWithG>(mem_ + 0x40); }

 private:
  std::vector<uint8_t> fn_;
  CodeBlocks blocks_;
  uint8_t* mem_ = nullptr;
  size_t page_ = 0;
  uint64_t next_ = 0;
};

// The same bytes, unpatched, in an executable page: the truth.
std::vector<uint64_t> truth(const std::vector<uint8_t>& fn, const std::vector<uint64_t>& xs) {
  Patched plain(fn);
  EXPECT_TRUE(plain.ok() && plain.seal());
  std::vector<uint64_t> out;
  for (uint64_t x : xs) out.push_back(plain.fn()(x));
  return out;
}

TEST(TrampolineCode, EntryAndReturnCountEveryCallAndKeepItsResult) {
  std::vector<uint64_t> xs;
  for (uint64_t x = 0; x < 1000; ++x) xs.push_back(x * 7919);
  const auto want = truth(kTriple, xs);
  Patched p(kTriple);
  ASSERT_TRUE(p.ok());
  const JumpSite e = p.entry(0), r = p.ret(kTripleRet);
  EXPECT_EQ(e.at, p.base());
  EXPECT_EQ(e.len, 8) << "push, mov and sub";
  EXPECT_EQ(r.at, p.base() + 0x15) << "add, pop and the RET";
  ASSERT_TRUE(p.patch(e, 0, false));
  ASSERT_TRUE(p.patch(r, 1, true));
  ASSERT_TRUE(p.seal());
  for (size_t i = 0; i < xs.size(); ++i) ASSERT_EQ(p.fn()(xs[i]), want[i]) << "x=" << xs[i];
  EXPECT_EQ(p.counter(0), xs.size());
  EXPECT_EQ(p.counter(1), xs.size());
}

TEST(TrampolineCode, FlagsLiveAcrossTheSiteAreKept) {
  std::vector<uint64_t> xs = {0, 1, 4, 5, 6, 5, 1ull << 40, 5};
  const auto want = truth(kIsFive, xs);
  ASSERT_EQ(want[3], 1u);
  Patched p(kIsFive);
  ASSERT_TRUE(p.ok());
  const JumpSite e = p.entry(kIsFiveSite);
  EXPECT_EQ(e.len, 5) << "push, mov and push";
  ASSERT_TRUE(p.patch(e, 0, false));
  ASSERT_TRUE(p.patch(p.ret(kIsFiveRet), 1, true));
  ASSERT_TRUE(p.seal());
  for (size_t i = 0; i < xs.size(); ++i) EXPECT_EQ(p.fn()(xs[i]), want[i]) << "x=" << xs[i];
  EXPECT_EQ(p.counter(0), xs.size());
  EXPECT_EQ(p.counter(1), xs.size());
}

// At the stack check: the trampoline takes the check's jbe to the morestack path, which
// comes back through the entry: a call whose stack grows is counted once, not twice, and
// every result is the unpatched function's.
TEST(TrampolineCode, StackCheckCountsACallOnceWhenItsStackGrows) {
  Patched p(kChecked, kCallWithGCode);
  ASSERT_TRUE(p.ok());
  const JumpSite s = p.stack_check(kCheckedJbe);
  ASSERT_TRUE(s.ok()) << s.refused;
  EXPECT_EQ(s.len, 6);
  EXPECT_EQ(s.branch_to, p.base() + kCheckedMorestack);
  ASSERT_TRUE(p.patch(s, 0, false));
  ASSERT_TRUE(p.seal());
  uint64_t g[4] = {0, 0, 0, 0};  // [2]: stackguard0; [3]: passes through "morestack"
  constexpr uint64_t kCalls = 100;
  for (uint64_t x = 0; x < kCalls; ++x) {
    g[2] = x % 2 ? ~uint64_t{0} : 0;  // every other call finds its stack too small
    ASSERT_EQ(p.at_0x40()(x, g), 3 * x + 1) << "x=" << x;
  }
  EXPECT_EQ(g[3], kCalls / 2) << "the morestack path was taken by every other call";
  EXPECT_EQ(p.counter(0), kCalls) << "each call counted once, its stack grown or not";
}

// The trampoline backend's two entry sites (jump_site.h), run the same way: the 6-byte jbe
// alone, its compare left in place, and a short check's compare, whose one-byte jump's
// displacement is the bytes it leaves. Both count each call once, morestack or not, with every
// result the original's.
// kCheckedFar is kChecked with its jbe as `jbe rel32`.
const std::vector<uint8_t> kCheckedFar = {
    0x49, 0x3b, 0x66, 0x10,                          // 0x00 cmp rsp,[r14+0x10]
    0x0f, 0x86, 0x0b, 0x00, 0x00, 0x00,              // 0x04 jbe 0x15
    0x55,                                            // 0x0a push rbp
    0x48, 0x89, 0xe5,                                // 0x0b mov rbp,rsp
    0x48, 0x8d, 0x44, 0x7f, 0x01,                    // 0x0e lea rax,[rdi+rdi*2+1]
    0x5d,                                            // 0x13 pop rbp
    0xc3,                                            // 0x14 ret
    0x49, 0xc7, 0x46, 0x10, 0x00, 0x00, 0x00, 0x00,  // 0x15 mov qword [r14+0x10],0
    0xf0, 0x49, 0xff, 0x46, 0x18,                    // 0x1d lock inc qword [r14+0x18]
    0xeb, 0xdc,                                      // 0x22 jmp 0x00
};

// Guards that send a call to morestack or not, as Go's runtime sets them: below the stack
// (it goes on), above it, and the poison values that ask a goroutine to stop (stackPreempt)
// or catch a stack used across a fork (stackFork). The jno over a 6-byte jbe relies on the
// compare never overflowing with any of them.
struct Guard {
  uint64_t value;
  bool grows;
};
std::vector<Guard> guards() {
  const uint64_t sp = reinterpret_cast<uint64_t>(__builtin_frame_address(0));
  return {{0, false},
          {0x1000, false},
          {sp - (1 << 20), false},
          {sp + (1 << 20), true},
          {~uint64_t{0}, true},
          {0xfffffffffffffade, true},   // stackPreempt
          {0xfffffffffffffb2e, true}};  // stackFork
}

TEST(TrampolineCode, TheJbeAloneCountsEachCallOnce) {
  Patched p(kCheckedFar, kCallWithGCode);
  ASSERT_TRUE(p.ok());
  const CodeBlocks blocks =
      decode_blocks(Bytes(kCheckedFar.data(), kCheckedFar.size()), p.base(), false);
  const JumpSite s = stack_check_branch_site(Bytes(kCheckedFar.data(), kCheckedFar.size()),
                                             p.base(), blocks, p.base(), p.base() + 4);
  ASSERT_TRUE(s.ok()) << s.refused;
  EXPECT_EQ(s.at, p.base() + 4);
  ASSERT_TRUE(p.patch(s, 0, false));
  const auto* site = reinterpret_cast<const uint8_t*>(s.at);
  EXPECT_EQ(site[0], kCheckedFar[4])
      << "the jump's first byte is the jbe's: a uprobe that goes puts back the same byte";
  EXPECT_EQ(site[1], 0x81) << "jno";
  ASSERT_TRUE(p.seal());
  uint64_t g[4] = {0, 0, 0, 0};
  uint64_t calls = 0, grown = 0;
  for (int round = 0; round < 10; ++round)
    for (const Guard& guard : guards()) {
      g[2] = guard.value;
      const uint64_t x = calls++;
      ASSERT_EQ(p.at_0x40()(x, g), 3 * x + 1) << "x=" << x;
      grown += guard.grows;
      ASSERT_EQ(g[3], grown) << std::hex << "guard " << guard.value;
    }
  EXPECT_EQ(p.counter(0), calls) << "each call counted once, its stack grown or not";
}

TEST(TrampolineCode, AShortCheckKeepsItsJbeWhereAnotherTracerFindsIt) {
  const long page = sysconf(_SC_PAGESIZE);
  // The function and its caller in one page; the trampoline at its fixed place about
  // 1.9 GiB further, its counter in the same page.
  auto* fn = static_cast<uint8_t*>(
      mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(fn, MAP_FAILED);
  const uint64_t base = reinterpret_cast<uint64_t>(fn);
  std::memcpy(fn, kChecked.data(), kChecked.size());
  std::memcpy(fn + kCallWithG, kCallWithGCode.data(), kCallWithGCode.size());
  // At 0x60, a uprobe at the entry as the kernel runs it: the compare stepped out of line,
  // then on at the instruction after it. push r14; mov r14,rsi; call 0x70; pop r14; ret.
  const std::vector<uint8_t> stepped = {0x41, 0x56, 0x49, 0x89, 0xf6, 0xe8, 0x06,
                                        0x00, 0x00, 0x00, 0x41, 0x5e, 0xc3};
  std::memcpy(fn + 0x60, stepped.data(), stepped.size());
  // 0x70: cmp rsp,[r14+0x10]; jmp 0x04 (rel32 from 0x79: -0x75).
  const std::vector<uint8_t> step = {0x49, 0x3b, 0x66, 0x10, 0xe9, 0x8b, 0xff, 0xff, 0xff};
  std::memcpy(fn + 0x70, step.data(), step.size());
  const Bytes code(kChecked.data(), kChecked.size());
  const CodeBlocks blocks = decode_blocks(code, base, false);
  const JumpSite s = stack_check_short_site(code, base, blocks, base, base + kCheckedJbe);
  ASSERT_TRUE(s.ok()) << s.refused;
  EXPECT_EQ(s.at, base);
  EXPECT_EQ(s.len, 6);
  EXPECT_FALSE(stack_check_branch_site(code, base, blocks, base, base + kCheckedJbe).ok());
  const uint64_t at = short_site_trampoline(s, code.subspan(0, s.len));
  // The displacement is the compare's last three bytes and the jbe's opcode.
  EXPECT_EQ(at, base + 5 + 0x7610663b);
  const uint64_t at_page = at & ~uint64_t(page - 1);
  auto* far =
      static_cast<uint8_t*>(mmap(reinterpret_cast<void*>(at_page), page, PROT_READ | PROT_WRITE,
                                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0));
  if (far == MAP_FAILED) GTEST_SKIP() << "the place at " << std::hex << at << " is taken";
  ASSERT_EQ(reinterpret_cast<uint64_t>(far), at_page);
  const uint64_t counter_at = at_page + 0xc00;
  ASSERT_LT(at + count_trampoline_size(s, false), counter_at);
  auto t = count_trampoline(at, s, code.subspan(0, s.len), counter_at, false);
  ASSERT_TRUE(t) << t.error().what();
  std::memcpy(far + (at - at_page), t->data(), t->size());
  auto j = short_site_jump(s, code.subspan(0, s.len));
  ASSERT_TRUE(j) << j.error().what();
  ASSERT_EQ(*j, std::vector<uint8_t>{0xe9}) << "one byte, over the compare's first";
  EXPECT_FALSE(short_site_jump(s, code.subspan(0, 5)));
  std::memcpy(fn, j->data(), j->size());
  ASSERT_EQ(mprotect(fn, page, PROT_READ | PROT_WRITE | PROT_EXEC), 0);
  ASSERT_EQ(mprotect(far, page, PROT_READ | PROT_WRITE | PROT_EXEC), 0);
  using FnWithG = uint64_t (*)(uint64_t, uint64_t*);
  const auto call = reinterpret_cast<FnWithG>(fn + kCallWithG);
  const auto call_stepped = reinterpret_cast<FnWithG>(fn + 0x60);
  uint64_t g[4] = {0, 0, 0, 0};
  volatile auto* counter = reinterpret_cast<volatile uint64_t*>(counter_at);
  uint64_t calls = 0, grown = 0;
  for (int round = 0; round < 10; ++round)
    for (const Guard& guard : guards()) {
      g[2] = guard.value;
      const uint64_t x = calls++;
      ASSERT_EQ(call(x, g), 3 * x + 1) << "x=" << x;
      grown += guard.grows;
      ASSERT_EQ(g[3], grown) << std::hex << "guard " << guard.value;
    }
  EXPECT_EQ(*counter, calls);
  // Through the stepped compare: the original jbe runs, the result is the same, and only a
  // call that went through morestack came back through the jump (and was counted).
  for (uint64_t x = 0; x < 10; ++x) {
    g[2] = x % 2 ? ~uint64_t{0} : 0;
    ASSERT_EQ(call_stepped(x, g), 3 * x + 1) << "x=" << x;
  }
  EXPECT_EQ(g[3], grown + 5);
  EXPECT_EQ(*counter, calls + 5);
  // The uprobe removed: the kernel writes the file's first byte back, and the function runs
  // as the file has it, uncounted.
  fn[0] = kChecked[0];
  EXPECT_EQ(0, std::memcmp(fn, kChecked.data(), kChecked.size()));
  for (uint64_t x = 0; x < 10; ++x) {
    g[2] = x % 2 ? ~uint64_t{0} : 0;
    ASSERT_EQ(call(x, g), 3 * x + 1) << "x=" << x;
  }
  EXPECT_EQ(*counter, calls + 5);
  munmap(far, page);
  munmap(fn, page);
}

TEST(TrampolineCode, CountsAreExactAcrossThreads) {
  Patched p(kTriple);
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(p.patch(p.entry(0), 0, false));
  ASSERT_TRUE(p.patch(p.ret(kTripleRet), 1, true));
  ASSERT_TRUE(p.seal());
  constexpr int kThreads = 4;
  constexpr uint64_t kCalls = 200'000;
  const Fn f = p.fn();
  std::vector<std::thread> ts;
  std::vector<uint64_t> bad(kThreads);
  for (int t = 0; t < kThreads; ++t)
    ts.emplace_back([&, t] {
      for (uint64_t x = 0; x < kCalls; ++x)
        if (f(x) != 3 * x + 1) ++bad[t];
    });
  for (auto& t : ts) t.join();
  for (uint64_t b : bad) EXPECT_EQ(b, 0u);
  EXPECT_EQ(p.counter(0), kThreads * kCalls);
  EXPECT_EQ(p.counter(1), kThreads * kCalls);
}

// The jump's bytes and the trampoline's, as encoded (the execution tests above cannot see the
// int3 fill, which nothing runs), and what cannot be reached is an error, not a wrong jump.
TEST(TrampolineCode, EncodingAndReach) {
  JumpSite s;
  s.at = 0x401000;
  s.len = 8;
  auto j = site_jump(s, 0x402000);
  ASSERT_TRUE(j);
  EXPECT_EQ(*j, (std::vector<uint8_t>{0xe9, 0xfb, 0x0f, 0x00, 0x00, 0xcc, 0xcc, 0xcc}));
  const std::vector<uint8_t> orig = {0x55, 0x48, 0x89, 0xe5, 0x48, 0x83, 0xec, 0x10};
  auto t = count_trampoline(0x402000, s, Bytes(orig.data(), orig.size()), 0x403000, false);
  ASSERT_TRUE(t);
  std::vector<uint8_t> want = {0x9c, 0xf0, 0x48, 0xff, 0x05};
  // The counter, from the end of the 9-byte pushfq + lock inc: 0x403000 - 0x402009.
  for (uint8_t b : {0xf7, 0x0f, 0x00, 0x00}) want.push_back(b);
  want.push_back(0x9d);
  want.insert(want.end(), orig.begin(), orig.end());
  // Back to 0x401008 from the end of the jmp at 0x402012 + 5.
  for (uint8_t b : {0xe9, 0xf1, 0xef, 0xff, 0xff}) want.push_back(b);
  EXPECT_EQ(*t, want);
  EXPECT_FALSE(site_jump(s, 0x401000 + (3ull << 31)));
  EXPECT_FALSE(count_trampoline(0x402000, s, Bytes(orig.data(), orig.size()), 1ull << 40, false));
  EXPECT_FALSE(count_trampoline(0x402000, s, Bytes(orig.data(), orig.size()), 0x403004, false))
      << "a misaligned counter may cross a cache line: a split lock, which the kernel may "
         "slow down or kill (split_lock_detect)";
  EXPECT_FALSE(count_trampoline(0x402000, s, Bytes(orig.data(), 7), 0x403000, false));
  JumpSite refused;
  refused.refused = "a branch";
  EXPECT_FALSE(site_jump(refused, 0x402000));
}

}  // namespace
}  // namespace gotap
