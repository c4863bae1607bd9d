// The timed trampolines' code (core/plan/trampoline_code.h, event_ring.h), run for real: a
// hand-assembled Go-shaped function (a short stack check, a frame, Go 1.21's epilogue) is
// patched as the trampoline backend patches it (a one-byte jump at its compare and at its
// epilogue's add, each to a stub at its fixed place, stubs to bodies that write the ring)
// and called with R14 as its g. The truth: its results unpatched, the calls made, the g it
// ran on. The records are read by the backend's own reader (backends/trampoline/call_timer.h).
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "backends/trampoline/call_timer.h"
#include "core/plan/event_ring.h"
#include "core/plan/inline_mark.h"
#include "core/plan/jump_site.h"
#include "core/plan/trampoline_code.h"

namespace gotap {
namespace {

// f(x) = 3x + 1 with a short check and Go 1.21's frame; its morestack path counts its passes
// in g's fourth word and "grows the stack" (the guard goes to 0), then enters again.
const std::vector<uint8_t> kFramed = {
    0x49, 0x3b, 0x66, 0x10,                          // 0x00 cmp rsp,[r14+0x10]
    0x76, 0x13,                                      // 0x04 jbe 0x19
    0x55,                                            // 0x06 push rbp
    0x48, 0x89, 0xe5,                                // 0x07 mov rbp,rsp
    0x48, 0x83, 0xec, 0x10,                          // 0x0a sub rsp,0x10
    0x48, 0x8d, 0x44, 0x7f, 0x01,                    // 0x0e lea rax,[rdi+rdi*2+1]
    0x48, 0x83, 0xc4, 0x10,                          // 0x13 add rsp,0x10
    0x5d,                                            // 0x17 pop rbp
    0xc3,                                            // 0x18 ret
    0x49, 0xc7, 0x46, 0x10, 0x00, 0x00, 0x00, 0x00,  // 0x19 mov qword [r14+0x10],0
    0xf0, 0x49, 0xff, 0x46, 0x18,                    // 0x21 lock inc qword [r14+0x18]
    0xeb, 0xd8,                                      // 0x26 jmp 0x00
};
constexpr uint64_t kJbe = 0x04, kRet = 0x18;
// The same with a frame of 0x90 bytes: `add rsp, imm32` (a wide epilogue), whose RET's stub
// is 0x0090C481 + 5 bytes past its add.
const std::vector<uint8_t> kFramedWide = {
    0x49, 0x3b, 0x66, 0x10,                          // 0x00 cmp rsp,[r14+0x10]
    0x76, 0x19,                                      // 0x04 jbe 0x1f
    0x55,                                            // 0x06 push rbp
    0x48, 0x89, 0xe5,                                // 0x07 mov rbp,rsp
    0x48, 0x81, 0xec, 0x90, 0x00, 0x00, 0x00,        // 0x0a sub rsp,0x90
    0x48, 0x8d, 0x44, 0x7f, 0x01,                    // 0x11 lea rax,[rdi+rdi*2+1]
    0x48, 0x81, 0xc4, 0x90, 0x00, 0x00, 0x00,        // 0x16 add rsp,0x90
    0x5d,                                            // 0x1d pop rbp
    0xc3,                                            // 0x1e ret
    0x49, 0xc7, 0x46, 0x10, 0x00, 0x00, 0x00, 0x00,  // 0x1f mov qword [r14+0x10],0
    0xf0, 0x49, 0xff, 0x46, 0x18,                    // 0x27 lock inc qword [r14+0x18]
    0xeb, 0xd2,                                      // 0x2c jmp 0x00
};
constexpr uint64_t kWideRet = 0x1e;
// The same as Go 1.17 to 1.20 lay it out: the frame's rbp saved at its top and restored with
// `mov rbp, [rsp+0x10]` before `add rsp, 0x18`: the RET's jump is over the mov, whose stub is
// 0x10246C8B + 5 bytes past it, and the record is made 0x18 bytes below the RET's RSP.
const std::vector<uint8_t> kFramedOld = {
    0x49, 0x3b, 0x66, 0x10,                          // 0x00 cmp rsp,[r14+0x10]
    0x76, 0x1d,                                      // 0x04 jbe 0x23
    0x48, 0x83, 0xec, 0x18,                          // 0x06 sub rsp,0x18
    0x48, 0x89, 0x6c, 0x24, 0x10,                    // 0x0a mov [rsp+0x10],rbp
    0x48, 0x8d, 0x6c, 0x24, 0x10,                    // 0x0f lea rbp,[rsp+0x10]
    0x48, 0x8d, 0x44, 0x7f, 0x01,                    // 0x14 lea rax,[rdi+rdi*2+1]
    0x48, 0x8b, 0x6c, 0x24, 0x10,                    // 0x19 mov rbp,[rsp+0x10]
    0x48, 0x83, 0xc4, 0x18,                          // 0x1e add rsp,0x18
    0xc3,                                            // 0x22 ret
    0x49, 0xc7, 0x46, 0x10, 0x00, 0x00, 0x00, 0x00,  // 0x23 mov qword [r14+0x10],0
    0xf0, 0x49, 0xff, 0x46, 0x18,                    // 0x2b lock inc qword [r14+0x18]
    0xeb, 0xce,                                      // 0x30 jmp 0x00
};
constexpr uint64_t kOldRet = 0x22;
// At 0x40: push r14; mov r14,rsi; call 0x00; pop r14; ret.
const std::vector<uint8_t> kCallWithG = {0x41, 0x56, 0x49, 0x89, 0xf6, 0xe8, 0xb6,
                                         0xff, 0xff, 0xff, 0x41, 0x5e, 0xc3};
constexpr uint32_t kGoidOff = 0x98;
// At 0x60: push rdx; push r14; mov r14,rsi; call 0x00; pop r14; pop rdx; ret. At the
// function's RET, [rsp+16] is the caller's rdx: a stack slot whose value the test picks.
const std::vector<uint8_t> kCallWithSlot = {0x52, 0x41, 0x56, 0x49, 0x89, 0xf6, 0xe8, 0x95,
                                            0xff, 0xff, 0xff, 0x41, 0x5e, 0x5a, 0xc3};
// At 0x80: the function called on a stack the test gives, with RBP the test's too (a chain of
// frame records to walk): push rbx; push r14; push rbp; mov rbx,rsp; mov rsp,rcx;
// mov rbp,rdx; mov r14,rsi; call 0x00; mov rsp,rbx; pop rbp; pop r14; pop rbx; ret.
const std::vector<uint8_t> kCallOnStack = {
    0x53, 0x41, 0x56, 0x55, 0x48, 0x89, 0xe3, 0x48, 0x89, 0xcc, 0x48, 0x89, 0xd5, 0x49, 0x89,
    0xf6, 0xe8, 0x6b, 0xff, 0xff, 0xff, 0x48, 0x89, 0xdc, 0x5d, 0x41, 0x5e, 0x5b, 0xc3};

// g.m at 0x30, m.procid at 72: where a trace record's thread id comes from.
struct FakeM {
  uint64_t pad[9] = {};
  uint64_t procid = 0;
};
constexpr uint32_t kMOff = 0x30, kProcidOff = 72;
static_assert(offsetof(FakeM, procid) == kProcidOff);

struct FakeG {
  uint64_t lo = 0, hi = 0, guard = 0, grown = 0;
  uint64_t pad0[2] = {};
  FakeM* m = nullptr;
  uint64_t pad[(kGoidOff - 56) / 8] = {};
  uint64_t goid = 0;
};
static_assert(offsetof(FakeG, goid) == kGoidOff);
static_assert(offsetof(FakeG, m) == kMOff);

using FnWithG = uint64_t (*)(uint64_t, FakeG*);
// The same, with rdx, rcx, r8 and r9 set at the function's entry (the C ABI's next four).
using FnWithRegs = uint64_t (*)(uint64_t, FakeG*, uint64_t, uint64_t, uint64_t, uint64_t);

uint8_t* map_at(uint64_t at, size_t len) {
  void* p = mmap(reinterpret_cast<void*>(at), len, PROT_READ | PROT_WRITE | PROT_EXEC,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  if (reinterpret_cast<uint64_t>(p) != at) {
    munmap(p, len);
    return nullptr;
  }
  return static_cast<uint8_t*>(p);
}

// The function, patched: its page, the RET stub's page (bodies and the ring right after it)
// and the short check's stub's page, each at the place the jumps fix. With captures, its
// bodies write trace records (kTraceRing) with those words and copies.
class Timed {
 public:
  // `fail`: counting bodies (entry_count_body, ret_fail_body) instead, the calls counted at
  // counters()[0] and the failures, `fail` not zero at the RET, at counters()[8].
  explicit Timed(const RecordCapture* entry_cap = nullptr, const RecordCapture* ret_cap = nullptr,
                 const std::vector<uint8_t>& fn = kFramed, uint64_t ret_at = kRet,
                 const CaptureWord* fail = nullptr)
      : shape_(entry_cap ? kTraceRing : kTimedRing), fail_(fail) {
    // Anywhere first; then, where the stubs' fixed places are taken (an ASan build's memory
    // is dense), at addresses of the 47-bit space that neither a process nor ASan's shadow
    // uses.
    for (uint64_t k = 0; k < 9 && !ok_; ++k) {
      if (try_at(k ? 0x300000000000ull + (k - 1) * (64ull << 30) : 0, entry_cap, ret_cap, fn,
                 ret_at))
        break;
      release();
    }
  }
  ~Timed() { release(); }
  bool ok() const { return ok_; }
  std::string why() const { return error_; }
  FnWithG fn() const { return reinterpret_cast<FnWithG>(fn_ + 0x40); }
  FnWithRegs fn_with_regs() const { return reinterpret_cast<FnWithRegs>(fn_ + 0x40); }
  // The function called with a stack slot (kCallWithSlot): x, g, the slot's value.
  uint64_t call_with_slot(uint64_t x, FakeG* g, uint64_t slot) const {
    return reinterpret_cast<uint64_t (*)(uint64_t, FakeG*, uint64_t)>(fn_ + 0x60)(x, g, slot);
  }
  // The function called with RSP `sp` and RBP `fp` (kCallOnStack): x, g.
  uint64_t call_on_stack(uint64_t x, FakeG* g, uint64_t fp, uint64_t sp) const {
    return reinterpret_cast<uint64_t (*)(uint64_t, FakeG*, uint64_t, uint64_t)>(fn_ + 0x80)(x, g,
                                                                                            fp, sp);
  }
  // The return address the function sees when called so.
  uint64_t on_stack_return_address() const { return reinterpret_cast<uint64_t>(fn_) + 0x95; }
  const uint64_t* counters() const { return reinterpret_cast<const uint64_t*>(ring_); }
  uint64_t return_address() const { return reinterpret_cast<uint64_t>(fn_) + 0x40 + 10; }
  // Trace record k.
  const uint8_t* record(size_t k) const {
    return ring_ + kRingRecords + (k << shape_.record_shift);
  }
  uint8_t* ring() const { return ring_; }
  const RingRecord* records() const {
    return reinterpret_cast<const RingRecord*>(ring_ + kRingRecords);
  }

 private:
  // The function at `want` (0: anywhere), its stubs at their places: true when done (ok_, or
  // an error that another place would not mend).
  bool try_at(uint64_t want, const RecordCapture* entry_cap, const RecordCapture* ret_cap,
              const std::vector<uint8_t>& fn, uint64_t ret_at) {
    fn_ = want ? map_at(want, 4096)
               : static_cast<uint8_t*>(mmap(nullptr, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
                                            MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (fn_ == MAP_FAILED) fn_ = nullptr;
    if (!fn_) return false;
    std::memcpy(fn_, fn.data(), fn.size());
    std::memcpy(fn_ + 0x40, kCallWithG.data(), kCallWithG.size());
    std::memcpy(fn_ + 0x60, kCallWithSlot.data(), kCallWithSlot.size());
    std::memcpy(fn_ + 0x80, kCallOnStack.data(), kCallOnStack.size());
    const uint64_t base = reinterpret_cast<uint64_t>(fn_);
    const Bytes code(fn.data(), fn.size());
    const CodeBlocks blocks = decode_blocks(code, base, false);
    entry_ = stack_check_short_site(code, base, blocks, base, base + kJbe);
    ret_ = ret_epilogue_site(code, base, blocks, base + ret_at);
    if (!entry_.ok() || !ret_.ok()) {
      error_ = "no site: " + entry_.refused + ret_.refused;
      return true;
    }
    const Bytes ret_orig(fn_ + (ret_.at - base), ret_.len), entry_orig(fn_, entry_.len);
    const uint64_t ret_stub = one_byte_jump_place(ret_.at, ret_orig);
    const uint64_t short_stub_at = short_site_trampoline(entry_, entry_orig);
    far_len_ = 2 * 4096 + shape_.bytes();
    far_ = map_at(ret_stub & ~uint64_t(4095), far_len_);
    short_page_ = map_at(short_stub_at & ~uint64_t(4095), 4096);
    if (!far_ || !short_page_) return false;
    const uint64_t far = reinterpret_cast<uint64_t>(far_);
    ring_ = far_ + 2 * 4096;
    const EventTarget t{far + 2 * 4096, kGoidOff, 8, shape_, kMOff, kProcidOff};
    const uint64_t entry_body_at = far + 4096, ret_body_at = far + 4096 + 2048;
    auto eb = fail_ ? entry_count_body(entry_body_at, entry_, t.ring)
                    : entry_body(entry_body_at, entry_, t, 0, entry_cap);
    auto rb = fail_ ? ret_fail_body(ret_body_at, ret_, ret_orig, t.ring + 8, *fail_)
                    : ret_body(ret_body_at, ret_, ret_orig, t, 1, ret_cap);
    auto rs = jump_to(ret_stub, ret_body_at);
    auto ss = short_stub(short_stub_at, entry_, entry_orig, entry_body_at);
    if (!eb || !rb || !rs || !ss) {
      error_ = !eb ? eb.error().what() : !rb ? rb.error().what() : "a stub";
      return true;
    }
    std::memcpy(far_ + 4096, eb->data(), eb->size());
    std::memcpy(far_ + 4096 + 2048, rb->data(), rb->size());
    std::memcpy(far_ + (ret_stub - far), rs->data(), rs->size());
    std::memcpy(short_page_ + (short_stub_at & 4095), ss->data(), ss->size());
    // The two one-byte jumps: all the function's bytes that change.
    fn_[0] = fn_[ret_.at - base] = 0xe9;
    ok_ = true;
    return true;
  }
  void release() {
    if (fn_) munmap(fn_, 4096);
    if (far_) munmap(far_, far_len_);
    if (short_page_) munmap(short_page_, 4096);
    fn_ = far_ = short_page_ = ring_ = nullptr;
  }

  RingShape shape_;
  const CaptureWord* fail_;
  uint8_t *fn_ = nullptr, *far_ = nullptr, *short_page_ = nullptr, *ring_ = nullptr;
  size_t far_len_ = 0;
  JumpSite entry_, ret_;
  bool ok_ = false;
  std::string error_ = "a fixed place is taken in this process";
};

template <class T>
T at(const uint8_t* p, size_t off) {
  T v;
  std::memcpy(&v, p + off, sizeof v);
  return v;
}

uint64_t stack_hi_of(FakeG& g, std::vector<uint8_t>& stack) {
  g.lo = reinterpret_cast<uint64_t>(stack.data());
  g.hi = g.lo + stack.size();
  return g.hi;
}

TEST(TrampolineEvents, EachCallWritesItsEntryAndReturnWithItsGoroutineAndDepth) {
  Timed t;
  if (!t.ok()) GTEST_SKIP() << t.why();
  std::vector<uint8_t> stack(1 << 16);
  FakeG g;
  stack_hi_of(g, stack);  // stack.hi: RSP is far from it here, but the same at both ends
  g.goid = 4242;
  const int calls = 1000;
  for (int x = 0; x < calls; ++x) {
    // Every 10th call "grows its stack": through morestack, in again; one entry all the same.
    g.guard = x % 10 == 0 ? UINT64_MAX : 0;
    ASSERT_EQ(t.fn()(uint64_t(x), &g), uint64_t(3 * x + 1));
  }
  EXPECT_EQ(g.grown, uint64_t(calls / 10));
  const RingRecord* r = t.records();
  for (int k = 0; k < 2 * calls; ++k) {
    SCOPED_TRACE(k);
    ASSERT_EQ(r[k].seq, uint64_t(k + 1));
    EXPECT_EQ(r[k].id, uint32_t(k % 2));  // the entry's id 0, the return's 1, as built
    EXPECT_EQ(r[k].goid, 4242u);
    if (k % 2) {
      EXPECT_EQ(r[k].depth, r[k - 1].depth);
      EXPECT_GE(r[k].tsc, r[k - 1].tsc);
    }
  }
  EXPECT_EQ(r[2 * calls].seq, 0u);
  // The backend's reader pairs them: one call of function 7 each.
  trampoline::CallTimer timer({7}, 8);
  EXPECT_EQ(timer.drain(t.ring()), size_t(2 * calls));
  EXPECT_EQ(timer.latencies()[7].count, uint64_t(calls));
  EXPECT_EQ(timer.open_calls(), 0u);
  EXPECT_EQ(timer.dropped(t.ring()), 0u);
}

// A frame of 128 bytes or more: the RET's jump is the same one byte over `add rsp, imm32`,
// its stub 9.5 MiB past it; the body runs the 7-byte add and the pop. Calls return what they
// return unpatched, and each is one entry and one return at one depth.
TEST(TrampolineEvents, AWideEpilogueIsTimedAsANarrowOne) {
  Timed t(nullptr, nullptr, kFramedWide, kWideRet);
  if (!t.ok()) GTEST_SKIP() << t.why();
  std::vector<uint8_t> stack(1 << 16);
  FakeG g;
  stack_hi_of(g, stack);
  g.goid = 77;
  const int calls = 500;
  for (int x = 0; x < calls; ++x) {
    g.guard = x % 7 == 0 ? UINT64_MAX : 0;
    ASSERT_EQ(t.fn()(uint64_t(x), &g), uint64_t(3 * x + 1));
  }
  const RingRecord* r = t.records();
  for (int k = 0; k < 2 * calls; ++k) {
    ASSERT_EQ(r[k].seq, uint64_t(k + 1)) << k;
    EXPECT_EQ(r[k].id, uint32_t(k % 2));
    if (k % 2) {
      EXPECT_EQ(r[k].depth, r[k - 1].depth);
    }
  }
  trampoline::CallTimer timer({0}, 1);
  EXPECT_EQ(timer.drain(t.ring()), size_t(2 * calls));
  EXPECT_EQ(timer.latencies()[0].count, uint64_t(calls));
}

// Go before 1.21: the RET's trampoline runs the mov alone and records before the frame is
// freed. Its depth, its RSP and the slot at it (the return address) are the RET's all the
// same, as at the entry; rbp comes back as it was.
TEST(TrampolineEvents, ARetBeforeGo121IsRecordedAsAtItsRet) {
  RecordCapture in, out;
  in.words = {{CaptureWord::Reg, 15, 0}, {CaptureWord::Stack, 0, 0}};
  out.words = {{CaptureWord::Reg, 0, 0}, {CaptureWord::Reg, 15, 0}, {CaptureWord::Stack, 0, 0}};
  Timed t(&in, &out, kFramedOld, kOldRet);
  if (!t.ok()) GTEST_SKIP() << t.why();
  std::vector<uint8_t> stack(1 << 16);
  FakeG g;
  FakeM m;
  g.m = &m;
  stack_hi_of(g, stack);
  const int calls = 200;
  for (int x = 0; x < calls; ++x) {
    g.guard = x % 9 == 0 ? UINT64_MAX : 0;
    ASSERT_EQ(t.fn()(uint64_t(x), &g), uint64_t(3 * x + 1));
  }
  for (int x = 0; x < calls; ++x) {
    SCOPED_TRACE(x);
    const uint8_t* e = t.record(2 * x);
    const uint8_t* r = t.record(2 * x + 1);
    ASSERT_EQ(at<uint64_t>(r, 0), uint64_t(2 * x + 2));
    EXPECT_EQ(at<uint32_t>(e, 28), at<uint32_t>(r, 28)) << "depth";
    EXPECT_EQ(at<uint64_t>(r, kTraceWords), uint64_t(3 * x + 1));
    EXPECT_EQ(at<uint64_t>(r, kTraceWords + 8), at<uint64_t>(e, kTraceWords)) << "RSP";
    EXPECT_EQ(at<uint64_t>(e, kTraceWords + 8), t.return_address());
    EXPECT_EQ(at<uint64_t>(r, kTraceWords + 16), t.return_address());
  }
}

// count of a function with an error result: its entry's body counts each call once (a call
// whose stack grows too), each RET's counts it failed when the error's type word is not zero.
// The word in a register (R8, whose encoding takes REX's high bits; RCX) or a stack slot,
// after Go 1.21's epilogue and before the older one frees its frame; the function's result
// is what it is unpatched.
TEST(TrampolineEvents, CountingBodiesCountEachCallAndEachFailure) {
  struct Case {
    const char* name;
    const std::vector<uint8_t>* fn;
    uint64_t ret_at;
    CaptureWord err;
  };
  const Case cases[] = {
      {"r8", &kFramed, kRet, {CaptureWord::Reg, 5, 0}},
      {"rcx", &kFramedWide, kWideRet, {CaptureWord::Reg, 2, 0}},
      {"slot", &kFramed, kRet, {CaptureWord::Stack, 0, 16}},
      {"slot before Go 1.21", &kFramedOld, kOldRet, {CaptureWord::Stack, 0, 16}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Timed t(nullptr, nullptr, *c.fn, c.ret_at, &c.err);
    if (!t.ok()) GTEST_SKIP() << t.why();
    std::vector<uint8_t> stack(1 << 16);
    FakeG g;
    stack_hi_of(g, stack);
    const bool slot = c.err.src == CaptureWord::Stack;
    uint64_t failed = 0, grown = 0;
    const int calls = 300;
    for (int x = 0; x < calls; ++x) {
      g.guard = x % 7 == 0 ? UINT64_MAX : 0;
      grown += x % 7 == 0;
      // A word that is not zero: a failure. Low or high bits alone, too.
      const uint64_t word = x % 3 == 0 ? 0 : x % 3 == 1 ? 1 : uint64_t(1) << 63;
      failed += word != 0;
      const uint64_t r = slot             ? t.call_with_slot(uint64_t(x), &g, word)
                         : c.err.reg == 5 ? t.fn_with_regs()(uint64_t(x), &g, 0, 0, word, 0)
                                          : t.fn_with_regs()(uint64_t(x), &g, 0, word, 0, 0);
      ASSERT_EQ(r, uint64_t(3 * x + 1)) << x;
    }
    EXPECT_EQ(g.grown, grown) << "the morestack path ran as unpatched";
    EXPECT_EQ(t.counters()[0], uint64_t(calls));
    EXPECT_EQ(t.counters()[1], failed);
  }
}

TEST(TrampolineEvents, ThreadsShareTheRingWithNoRecordLostWhileItIsRead) {
  Timed t;
  if (!t.ok()) GTEST_SKIP() << t.why();
  constexpr int kThreads = 4, kCalls = 100'000;
  std::atomic<int> done{0};
  std::vector<std::thread> th;
  for (int i = 0; i < kThreads; ++i)
    th.emplace_back([&, i] {
      std::vector<uint8_t> stack(1 << 12);
      FakeG g;
      stack_hi_of(g, stack);
      g.goid = uint64_t(100 + i);
      for (int x = 0; x < kCalls; ++x)
        if (t.fn()(uint64_t(x), &g) != uint64_t(3 * x + 1)) return;
      done.fetch_add(1);
    });
  trampoline::CallTimer timer({0}, 1);
  size_t read = 0;
  while (done.load() < kThreads || read < size_t(2 * kThreads * kCalls)) {
    const size_t n = timer.drain(t.ring());
    read += n;
    if (!n && done.load() == kThreads) break;
  }
  for (auto& x : th) x.join();
  read += timer.drain(t.ring());
  ASSERT_EQ(done.load(), kThreads);
  // Whatever the ring could not hold is counted, never lost unseen.
  const uint64_t dropped = timer.dropped(t.ring());
  EXPECT_EQ(read + dropped, size_t(2 * kThreads * kCalls));
  if (dropped == 0) {
    EXPECT_EQ(timer.latencies()[0].count, uint64_t(kThreads * kCalls));
    EXPECT_EQ(timer.open_calls(), 0u);
    EXPECT_EQ(timer.unmatched_returns(), 0u);
  }
}

TEST(TrampolineEvents, AFullRingDropsAndCounts) {
  Timed t;
  if (!t.ok()) GTEST_SKIP() << t.why();
  std::vector<uint8_t> stack(1 << 12);
  FakeG g;
  stack_hi_of(g, stack);
  g.goid = 1;
  const uint64_t calls = kRingCapacity / 2 + 1000;
  for (uint64_t x = 0; x < calls; ++x) ASSERT_EQ(t.fn()(x, &g), 3 * x + 1);
  trampoline::CallTimer timer({0}, 1);
  EXPECT_EQ(timer.dropped(t.ring()), 2 * calls - kRingCapacity);
  EXPECT_EQ(timer.drain(t.ring()), kRingCapacity);
  EXPECT_EQ(timer.latencies()[0].count, kRingCapacity / 2);
  // Room again: the next call's two records go in.
  ASSERT_EQ(t.fn()(5, &g), 16u);
  EXPECT_EQ(timer.drain(t.ring()), 2u);
  EXPECT_EQ(timer.latencies()[0].count, kRingCapacity / 2 + 1);
}

// A thread that took a position and never wrote its record (killed mid-record by the
// program's exit): the records after it wait behind it while writers may still finish; the
// last read skips it and counts it, and reads the rest.
TEST(TrampolineEvents, ARecordNeverFinishedIsCountedAndHoldsNothingBackAtTheEnd) {
  Timed t;
  if (!t.ok()) GTEST_SKIP() << t.why();
  std::vector<uint8_t> stack(1 << 12);
  FakeG g;
  stack_hi_of(g, stack);
  g.goid = 9;
  ASSERT_EQ(t.fn()(1, &g), 4u);
  // The dead writer's position: taken from the head, its record never written.
  __atomic_fetch_add(reinterpret_cast<uint64_t*>(t.ring() + kRingHead), 1, __ATOMIC_SEQ_CST);
  for (uint64_t x = 0; x < 10; ++x) ASSERT_EQ(t.fn()(x, &g), 3 * x + 1);
  trampoline::CallTimer timer({0}, 1);
  EXPECT_EQ(timer.drain(t.ring()), 2u) << "the first call's two records, then the gap";
  EXPECT_EQ(timer.latencies()[0].count, 1u);
  EXPECT_EQ(timer.finish(t.ring()), 20u);
  EXPECT_EQ(timer.latencies()[0].count, 11u);
  EXPECT_EQ(timer.dropped(t.ring()), 1u);
}

// A trace record holds what the function was really called with and returned: registers
// (those the trampoline saves and those it does not touch), a stack slot, RSP as it was, a
// string's bytes, an itab's type word, and the thread's id from g.m; what it must not read
// (a nil itab, a data word that is no address) it leaves unread.
TEST(TrampolineEvents, ATraceRecordHoldsTheCallsRegistersStackSlotsAndCopies) {
  RecordCapture in;
  in.words = {{CaptureWord::Reg, 3, 0},    // rdi: x
              {CaptureWord::Reg, 9, 0},    // rdx: a string's data
              {CaptureWord::Reg, 2, 0},    // rcx: its length
              {CaptureWord::Reg, 5, 0},    // r8: an itab
              {CaptureWord::Stack, 0, 0},  // [rsp]: the return address
              {CaptureWord::Reg, 15, 0},   // rsp
              {CaptureWord::Reg, 6, 0}};   // r9
  in.copies = {{CaptureCopy::String, 1, 2, 16},
               {CaptureCopy::Itab, 3, 0, 0},
               {CaptureCopy::String, 0, 2, 16},  // data x: no address, not read
               {CaptureCopy::None, 0, 0, 0}};    // a place kept, nothing read
  RecordCapture out;
  out.words = {{CaptureWord::Reg, 0, 0}};  // rax: the result
  Timed t(&in, &out);
  if (!t.ok()) GTEST_SKIP() << t.why();
  std::vector<uint8_t> stack(1 << 16);
  FakeG g;
  FakeM m;
  m.procid = 777'001;
  g.m = &m;
  stack_hi_of(g, stack);
  g.goid = 31;
  struct Itab {
    uint64_t inter, type;
  } itab{1, 0xabcdef12};
  const std::string text = "a string longer than sixteen bytes";
  const uint64_t local = reinterpret_cast<uint64_t>(&itab);
  const int calls = 3;
  for (int x = 0; x < calls; ++x) {
    const uint64_t len = x == 2 ? 5 : text.size();
    const uint64_t it = x == 1 ? 0 : reinterpret_cast<uint64_t>(&itab);
    ASSERT_EQ(
        t.fn_with_regs()(uint64_t(x), &g, reinterpret_cast<uint64_t>(text.data()), len, it, 0x9999),
        uint64_t(3 * x + 1));
  }
  for (int x = 0; x < calls; ++x) {
    SCOPED_TRACE(x);
    const uint8_t* e = t.record(2 * x);
    const uint8_t* r = t.record(2 * x + 1);
    ASSERT_EQ(at<uint64_t>(e, 0), uint64_t(2 * x + 1));
    ASSERT_EQ(at<uint64_t>(r, 0), uint64_t(2 * x + 2));
    EXPECT_EQ(at<uint32_t>(e, 24), 0u);
    EXPECT_EQ(at<uint32_t>(r, 24), 1u);
    EXPECT_EQ(at<uint64_t>(e, 16), 31u);
    EXPECT_EQ(at<uint32_t>(e, 28), at<uint32_t>(r, 28)) << "depth";
    EXPECT_EQ(at<uint32_t>(e, kTraceTid), 777'001u);
    EXPECT_EQ(at<uint32_t>(r, kTraceTid), 777'001u);
    const uint64_t len = x == 2 ? 5 : text.size();
    EXPECT_EQ(at<uint64_t>(e, kTraceWords), uint64_t(x));
    EXPECT_EQ(at<uint64_t>(e, kTraceWords + 8), reinterpret_cast<uint64_t>(text.data()));
    EXPECT_EQ(at<uint64_t>(e, kTraceWords + 16), len);
    EXPECT_EQ(at<uint64_t>(e, kTraceWords + 24), x == 1 ? 0 : reinterpret_cast<uint64_t>(&itab));
    EXPECT_EQ(at<uint64_t>(e, kTraceWords + 32), t.return_address());
    const uint64_t rsp = at<uint64_t>(e, kTraceWords + 40);
    EXPECT_EQ(rsp % 8, 0u);
    EXPECT_LT(local - rsp, 4096u) << "RSP at the call, just below this frame";
    EXPECT_EQ(at<uint64_t>(e, kTraceWords + 48), 0x9999u);
    // The string: its first 16 bytes (or all 5), at its place.
    const size_t want = std::min<size_t>(len, 16);
    EXPECT_EQ(at<uint16_t>(e, kTraceCopyLen), want);
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(e + in.copy_at(0)), want),
              text.substr(0, want));
    // The itab's type word, or nothing for a nil itab.
    EXPECT_EQ(at<uint16_t>(e, kTraceCopyLen + 2), x == 1 ? 0u : 8u);
    if (x != 1) {
      EXPECT_EQ(at<uint64_t>(e, in.copy_at(1)), 0xabcdef12u);
    }
    EXPECT_EQ(at<uint16_t>(e, kTraceCopyLen + 4), 0u) << "a data word that is no address";
    EXPECT_EQ(at<uint16_t>(e, kTraceCopyLen + 6), 0u);
    // The result, at the RET.
    EXPECT_EQ(at<uint64_t>(r, kTraceWords), uint64_t(3 * x + 1));
  }
  EXPECT_EQ(at<uint64_t>(t.record(2 * calls), 0), 0u);
}

// --stack's walk (CaptureCopy::Stack), run on a stack the test lays out: the return address,
// then each frame record's, up the chain from RBP, at the entry and at the RET (whose
// epilogue has put RBP back). It stops, with what it has, at a record that is not above the
// last, not 8-aligned, too close to g.stack.hi for its 16 bytes, or holds a zero return
// address, and when the room is full; a thread whose RSP is outside its g's stack walks
// nothing. The hostile chains point at unmapped and kernel addresses: a read there would
// kill this test.
TEST(TrampolineEvents, AStackWalkReadsOnlyTheGoroutinesOwnStack) {
  constexpr uint16_t kRoom = 8 * 8;
  RecordCapture cap;
  cap.copies.push_back({CaptureCopy::Stack, 0, 0, kRoom, 0});
  Timed t(&cap, &cap);
  if (!t.ok()) GTEST_SKIP() << t.why();
  ASSERT_EQ(cap.copy_room(0), kRoom);
  std::vector<uint64_t> stack(4096);
  FakeG g;
  FakeM m;
  g.m = &m;
  g.goid = 5;
  g.lo = reinterpret_cast<uint64_t>(stack.data());
  g.hi = g.lo + 8 * stack.size();
  const uint64_t sp = reinterpret_cast<uint64_t>(&stack[1024]);
  auto addr = [&](size_t word) { return reinterpret_cast<uint64_t>(&stack[word]); };
  // Frame records at words 2000, 2010, 2020, ...: {saved RBP, return address 0x1000 * (k+1)}.
  auto lay = [&](size_t frames) {
    std::fill(stack.begin() + 1100, stack.end(), 0);
    for (size_t k = 0; k < frames; ++k) {
      stack[2000 + 10 * k] = k + 1 < frames ? addr(2000 + 10 * (k + 1)) : 0;
      stack[2000 + 10 * k + 1] = 0x1000 * (k + 1);
    }
  };
  struct Case {
    const char* what;
    size_t frames;
    std::function<void()> spoil;  // after lay()
    size_t want;                  // return addresses past the first
  };
  const std::vector<Case> cases = {
      {"a chain that ends in a zero RBP", 3, [] {}, 3},
      {"a chain longer than the room", 20, [] {}, kRoom / 8 - 1},
      {"a record below the last", 3, [&] { stack[2010] = addr(1500); }, 2},
      {"a record not 8-aligned", 3, [&] { stack[2010] = addr(2020) + 4; }, 2},
      {"a record at g.stack.hi - 8", 3, [&] { stack[2010] = g.hi - 8; }, 2},
      {"a record past g.stack.hi", 3, [&] { stack[2010] = g.hi + 4096; }, 2},
      {"a record in unmapped memory", 3, [&] { stack[2010] = 0x00007ff000000000ull; }, 2},
      {"a record at a kernel address", 3, [&] { stack[2010] = 0xffff888000000000ull; }, 2},
      {"a zero return address", 3, [&] { stack[2021] = 0; }, 2},
  };
  size_t rec = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    lay(c.frames);
    c.spoil();
    ASSERT_EQ(t.call_on_stack(7, &g, addr(2000), sp), 22u);
    for (int side = 0; side < 2; ++side, ++rec) {
      const uint8_t* r = t.record(rec);
      ASSERT_EQ(at<uint64_t>(r, 0), rec + 1);
      const uint16_t len = at<uint16_t>(r, kTraceCopyLen);
      ASSERT_EQ(len, 8 * (1 + c.want)) << (side ? "return" : "entry");
      EXPECT_EQ(at<uint64_t>(r, cap.copy_at(0)), t.on_stack_return_address());
      for (size_t k = 0; k < c.want; ++k)
        EXPECT_EQ(at<uint64_t>(r, cap.copy_at(0) + 8 * (k + 1)), 0x1000 * (k + 1)) << k;
    }
  }
  // RSP outside [g.stack.lo, g.stack.hi): no walk at all, and the call is unharmed.
  lay(3);
  FakeG other = g;
  std::vector<uint64_t> elsewhere(512);
  other.lo = reinterpret_cast<uint64_t>(elsewhere.data());
  other.hi = other.lo + 8 * elsewhere.size();
  ASSERT_EQ(t.call_on_stack(1, &other, addr(2000), sp), 4u);
  for (int side = 0; side < 2; ++side, ++rec) {
    ASSERT_EQ(at<uint64_t>(t.record(rec), 0), rec + 1);
    EXPECT_EQ(at<uint16_t>(t.record(rec), kTraceCopyLen), 0u);
  }
}

// An interface's payload (CaptureCopy::Payload): what the dynamic type says the data word
// leads to, and no more. The types are descriptors laid out as Go's (Size_ at 0, PtrBytes at
// 8, Kind_ at 23, a pointer type's Elem at 48), reached as an `any`'s type word or through
// an itab. The hostile ones carry data words a read would fault on (unmapped memory): an
// unsafe.Pointer, a func, a struct of one pointer; they must not be read.
TEST(TrampolineEvents, AnInterfacesPayloadIsReadOnlyWhereItsTypeSaysItIsReadable) {
  RecordCapture in;
  in.words = {{CaptureWord::Reg, 9, 0},   // rdx: the type word
              {CaptureWord::Reg, 2, 0},   // rcx: the data word
              {CaptureWord::Reg, 5, 0}};  // r8: an itab
  in.copies = {{CaptureCopy::Payload, 1, 0, 16, 0}, {CaptureCopy::Payload, 1, 2, 16, 1}};
  Timed t(&in, &in);
  if (!t.ok()) GTEST_SKIP() << t.why();
  struct alignas(8) Type {
    uint64_t size = 0, ptrbytes = 0;
    uint32_t hash = 0;
    uint8_t tflag = 0, align = 8, field_align = 8, kind = 0;
    uint64_t equal = 0, gcdata = 0;
    uint32_t str = 0, ptr_to_this = 0;
    const Type* elem = nullptr;  // a pointer type's
  };
  static_assert(offsetof(Type, kind) == 23 && offsetof(Type, elem) == 48);
  auto type = [](uint64_t size, uint64_t ptrbytes, uint8_t kind, const Type* elem = nullptr) {
    Type ty;
    ty.size = size;
    ty.ptrbytes = ptrbytes;
    ty.kind = kind;
    ty.elem = elem;
    return ty;
  };
  // Go 1.17 to 1.25 set KindDirectIface (1 << 5) in Kind_ too; the size words decide.
  const Type int_t = type(8, 0, 2), big_t = type(40, 16, 25), small_t = type(4, 0, 5),
             empty_t = type(0, 0, 25), ptr_small = type(8, 8, 22 | 32, &small_t),
             ptr_empty = type(8, 8, 22, &empty_t), ptr_big = type(8, 8, 22, &big_t),
             map_t = type(8, 8, 21 | 32), chan_t = type(8, 8, 18), unsafe_t = type(8, 8, 26 | 32),
             func_t = type(8, 8, 19), onepointer_t = type(8, 8, 25 | 32);
  std::vector<uint8_t> value(64);
  for (size_t i = 0; i < value.size(); ++i) value[i] = static_cast<uint8_t>(0xa0 + i);
  const uint64_t data = reinterpret_cast<uint64_t>(value.data());
  // A page nothing is mapped at: where the hostile data words point.
  void* hole = mmap(nullptr, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(hole, MAP_FAILED);
  munmap(hole, 4096);
  const uint64_t unmapped = reinterpret_cast<uint64_t>(hole);
  struct Case {
    const char* what;
    const Type* ty;
    uint64_t data;
    size_t want;  // bytes read from value
  };
  const std::vector<Case> cases = {
      {"an int, boxed: its 8 bytes", &int_t, data, 8},
      {"a struct of 40 bytes, boxed: the first 16", &big_t, data, 16},
      {"an int32, boxed: its 4 bytes", &small_t, data, 4},
      {"a pointer to an int32: 4 bytes", &ptr_small, data, 4},
      {"a pointer to a zero-size struct: none", &ptr_empty, data, 0},
      {"a pointer to 40 bytes: 16", &ptr_big, data, 16},
      {"a map: 16 bytes of its header", &map_t, data, 16},
      {"a channel: 16 bytes of its header", &chan_t, data, 16},
      {"an unsafe.Pointer to unmapped memory: none", &unsafe_t, unmapped, 0},
      {"a func value: none", &func_t, unmapped, 0},
      {"a struct of one pointer: none", &onepointer_t, unmapped, 0},
      {"nil: none", nullptr, 0, 0},
      {"a data word in the first page: none", &int_t, 16, 0},
  };
  size_t rec = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    FakeG g;
    std::vector<uint8_t> stack(1 << 12);
    stack_hi_of(g, stack);
    const uint64_t ty = reinterpret_cast<uint64_t>(c.ty);
    struct {
      uint64_t inter, type;
    } itab{1, ty};
    const uint64_t it = c.ty ? reinterpret_cast<uint64_t>(&itab) : 0;
    ASSERT_EQ(t.fn_with_regs()(5, &g, ty, c.data, it, 0), 16u);
    for (int side = 0; side < 2; ++side, ++rec) {
      const uint8_t* r = t.record(rec);
      ASSERT_EQ(at<uint64_t>(r, 0), rec + 1);
      for (int k = 0; k < 2; ++k) {
        SCOPED_TRACE(k ? "through the itab" : "an any's type word");
        ASSERT_EQ(at<uint16_t>(r, kTraceCopyLen + 2 * k), c.want);
        EXPECT_EQ(std::memcmp(r + in.copy_at(k), value.data(), c.want), 0);
      }
    }
  }
}

// --if's fields (CaptureWord::Deref): the bytes of each field the condition follows a pointer
// to, at the call, of the field's own size, and a pointer to a pointer followed twice; a nil
// pointer or one that is no address is not followed (the program runs on, unharmed).
TEST(TrampolineEvents, ATraceRecordHoldsTheFieldsItsPointersLeadTo) {
  struct Inner {
    uint64_t v;
  };
  struct Obj {
    uint8_t a, b;
    uint16_t c;
    uint32_t d;
    Inner* in;
  };
  Inner inner{0x1122334455667788};
  Obj obj{0xa1, 0xb2, 0xc3d4, 0xe5f60718, &inner};
  RecordCapture in;
  CaptureWord x{CaptureWord::Reg, 3, 0};  // rdi: the pointer
  auto field = [](uint8_t base, int32_t off, uint8_t size) {
    CaptureWord w{CaptureWord::Deref, 0, off};
    w.base = base;
    w.size = size;
    return w;
  };
  in.words = {x,
              field(0, 8, 8),   // obj->in
              field(0, 4, 4),   // obj->d
              field(0, 2, 2),   // obj->c
              field(0, 1, 1),   // obj->b
              field(1, 0, 8)};  // obj->in->v
  Timed t(&in, nullptr);
  if (!t.ok()) GTEST_SKIP() << t.why();
  std::vector<uint8_t> stack(1 << 16);
  FakeG g;
  FakeM m;
  g.m = &m;
  stack_hi_of(g, stack);
  const uint64_t calls[] = {reinterpret_cast<uint64_t>(&obj), 0, 17, uint64_t(1) << 47};
  for (uint64_t p : calls) ASSERT_EQ(t.fn()(p, &g), 3 * p + 1);
  const uint8_t* e = t.record(0);
  EXPECT_EQ(at<uint64_t>(e, kTraceWords), reinterpret_cast<uint64_t>(&obj));
  EXPECT_EQ(at<uint64_t>(e, kTraceWords + 8), reinterpret_cast<uint64_t>(&inner));
  EXPECT_EQ(at<uint64_t>(e, kTraceWords + 16), 0xe5f60718u);
  EXPECT_EQ(at<uint64_t>(e, kTraceWords + 24), 0xc3d4u);
  EXPECT_EQ(at<uint64_t>(e, kTraceWords + 32), 0xb2u);
  EXPECT_EQ(at<uint64_t>(e, kTraceWords + 40), 0x1122334455667788u);
  for (size_t k = 1; k < std::size(calls); ++k) {
    SCOPED_TRACE(calls[k]);
    const uint8_t* r = t.record(2 * k);
    EXPECT_EQ(at<uint64_t>(r, 0), 2 * k + 1) << "its entry's record";
    EXPECT_FALSE(deref_read(at<uint64_t>(r, kTraceWords)));
    for (uint32_t w = 1; w < in.words.size(); ++w)
      EXPECT_EQ(at<uint64_t>(r, kTraceWords + 8 * w), 0u) << "word " << w << " was not read";
  }
}

// A copy's room is cut to what the record has left; the copies after it still fit.
TEST(TrampolineEvents, ATraceRecordsCopiesFitItsSlot) {
  RecordCapture c;
  c.words.resize(kTraceMaxWords);
  c.copies = {{CaptureCopy::String, 0, 1, 200},
              {CaptureCopy::String, 2, 3, 200},
              {CaptureCopy::Itab, 4, 0, 0}};
  const uint32_t room = uint32_t(kTraceRing.record_size()) - kTraceWords - 8 * kTraceMaxWords;
  EXPECT_EQ(c.copy_at(0), kTraceWords + 8 * kTraceMaxWords);
  EXPECT_EQ(c.copy_room(0), 200);
  EXPECT_EQ(c.copy_room(1), room - 200);
  EXPECT_EQ(c.copy_room(2), 0) << "no room for the itab's 8 bytes";
  EXPECT_LE(c.copy_at(1) + c.copy_room(1), kTraceRing.record_size());
}

}  // namespace
}  // namespace gotap
