// The breakpoint layer's instruction handling: the classification of displaced
// instructions, and their out-of-line copies and the safety net's SIGTRAP handler run for
// real, in this process, on code with int3s in it (trap_net.h).
#include <signal.h>
#include <sys/mman.h>
#include <sys/ucontext.h>

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "backends/ptrace/breakpoints.h"
#include "backends/ptrace/scratch_room.h"
#include "backends/ptrace/trap_net.h"

namespace gotap::ptrace {
namespace {

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

// A whole binary's table: every site found by address with its roles in the order they were
// added (a RET two functions share has both), nothing found between sites, the table in
// address order once finished, and --max-overhead's drop_func taking one function's roles.
TEST(Breakpoints, ManySitesFoundWithTheirRoles) {
  constexpr uint64_t kBase = 0x401000;
  constexpr int kSites = 20000;
  // nop; nop; ...: a site every 3 bytes, added out of order.
  CodeMemory mem(kBase, std::vector<uint8_t>(kSites * 3 + 16, 0x90));
  Breakpoints bps;
  bps.reserve(kSites / 2);  // too small on purpose: the table grows
  for (int k = 0; k < kSites; ++k) {
    const int i = (k * 7919) % kSites;  // a permutation (7919 is prime, kSites is not its multiple)
    auto r = bps.add(kBase + 3 * i, {SiteRole::Return, i, -1}, i, mem);
    ASSERT_TRUE(r.ok()) << r.error().what();
    if (i % 10 == 0) ASSERT_TRUE(bps.add(kBase + 3 * i, {SiteRole::Entry, i + 1, -1}, 0, mem).ok());
  }
  EXPECT_EQ(bps.size(), size_t(kSites));
  bps.finish();
  for (size_t i = 1; i < bps.sites().size(); ++i)
    ASSERT_LT(bps.sites()[i - 1].addr, bps.sites()[i].addr);
  for (int i = 0; i < kSites; ++i) {
    const Site* s = bps.find(kBase + 3 * i);
    ASSERT_NE(s, nullptr) << i;
    EXPECT_EQ(s->addr, kBase + 3 * i);
    EXPECT_EQ(s->sp_delta, i);  // the first add's
    ASSERT_EQ(s->roles.size(), i % 10 == 0 ? 2u : 1u) << i;
    EXPECT_EQ(s->roles[0].kind, SiteRole::Return);
    EXPECT_EQ(s->roles[0].func, i);
    if (i % 10 == 0) EXPECT_EQ(s->roles[1].func, i + 1);
    EXPECT_EQ(bps.find(kBase + 3 * i + 1), nullptr);
  }
  EXPECT_EQ(bps.find(kBase - 3), nullptr);
  EXPECT_FALSE(bps.add(kBase, {SiteRole::Entry, 0, -1}, 0, mem).ok());  // after finish
  // Function 10's roles: the entry role of site 9 is not its, the return role of site 10 is.
  struct NoWrite : TraceeMemory {
    NoWrite() : TraceeMemory(getpid()) {}
  } tm;
  EXPECT_TRUE(bps.drop_func(10, tm));
  EXPECT_EQ(bps.find(kBase + 30)->roles.size(), 1u);
  EXPECT_EQ(bps.find(kBase + 30)->roles[0].func, 11);
  EXPECT_EQ(bps.find(kBase + 27)->roles.size(), 1u);
}

// The scratch page comes in parts (a whole binary's is 7 MB), in order, each at most 256
// KiB, together the page that build_scratch gives; its table in address order, each entry
// naming its site's copy.
TEST(Breakpoints, ScratchWrittenInPartsIsThePage) {
  constexpr uint64_t kBase = 0x401000;
  constexpr int kSites = 30000;
  CodeMemory mem(kBase, std::vector<uint8_t>(kSites + 16, 0x90));
  Breakpoints bps;
  for (int i = kSites - 1; i >= 0; --i)
    ASSERT_TRUE(bps.add(kBase + i, {SiteRole::Entry, i, -1}, 0, mem).ok());
  const uint64_t page = 0x7f0000000000;
  std::vector<uint8_t> parts;
  size_t nparts = 0;
  auto r = bps.write_scratch(page, [&](uint64_t off, std::span<const uint8_t> b) {
    EXPECT_EQ(off, parts.size());
    EXPECT_LE(b.size(), 256u * 1024);
    parts.insert(parts.end(), b.begin(), b.end());
    ++nparts;
    return true;
  });
  ASSERT_TRUE(r.ok()) << r.error().what();
  EXPECT_GT(nparts, 3u);
  EXPECT_EQ(parts.size(), Breakpoints::scratch_size_for(kSites));
  auto whole = bps.build_scratch(page);
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(*whole, parts);
  NetHeader hdr;
  std::memcpy(&hdr, parts.data() + kNetHeaderOff, sizeof hdr);
  EXPECT_EQ(hdr.nsites, uint64_t(kSites));
  EXPECT_EQ(hdr.end, page + parts.size());
  for (int i = 0; i < kSites; ++i) {
    NetEntry e;
    std::memcpy(&e, parts.data() + kNetTableOff + i * sizeof e, sizeof e);
    ASSERT_EQ(e.site, kBase + i);
    ASSERT_EQ(e.slot, bps.slot(*bps.find(kBase + i)));
    EXPECT_EQ(parts[kNetTableOff + kSites * sizeof e + i], 0x90);
    EXPECT_EQ(parts[e.slot - page], 0x90);      // the nop's copy
    EXPECT_EQ(parts[e.slot - page + 1], 0xFF);  // then the jump back
  }
  // A part that cannot be written: an error.
  EXPECT_FALSE(
      bps.write_scratch(page, [](uint64_t, std::span<const uint8_t>) { return false; }).ok());
}

// A thread stopped in a copy goes on from the text (the detach takes it out so that the page
// can go): from the site when nothing of the copy has run and the site has its byte back,
// from the target of the jump it stopped at otherwise, read from the page's own bytes.
TEST(Breakpoints, AThreadInACopyGoesOnFromTheText) {
  constexpr uint64_t kBase = 0x401000;
  // cmp rsp,[r14+0x10] | jbe +0x20 | call rel32 | jmp rel8 | push rbp | ret
  const std::vector<uint8_t> code = {0x49, 0x3B, 0x66, 0x10, 0x76, 0x20, 0xE8, 0x10,
                                     0x00, 0x00, 0x00, 0xEB, 0x05, 0x55, 0xC3};
  const std::vector<uint64_t> at = {0, 4, 6, 11, 13, 14};
  CodeMemory orig(kBase, code);
  Breakpoints bps;
  for (uint64_t a : at) ASSERT_TRUE(bps.add(kBase + a, {SiteRole::Entry, 0, -1}, 0, orig).ok());
  const uint64_t page = 0x7f0000000000;
  auto img = bps.build_scratch(page);
  ASSERT_TRUE(img.ok()) << img.error().what();
  std::vector<uint8_t> trapped = code;
  for (uint64_t a : at) trapped[a] = 0xCC;
  CodeMemory with_int3s(kBase, trapped);
  int jumps = 0;
  for (uint64_t a : at) {
    const Site& s = *bps.find(kBase + a);
    const uint64_t slot = bps.slot(s);
    EXPECT_EQ(bps.text_pc_for(slot, orig), s.addr);
    EXPECT_EQ(bps.text_pc_for(slot, with_int3s), std::nullopt) << "an int3 left at the site";
    for (uint64_t off = 1; off < Breakpoints::kSlotSize; ++off) {
      const uint8_t* p = img->data() + (slot + off - page);
      std::optional<uint64_t> want;
      // The absolute jumps write_scratch puts after a copy: jmp [rip+0]; .quad target.
      if (off + 14 <= Breakpoints::kSlotSize && p[0] == 0xFF && p[1] == 0x25 && p[2] == 0 &&
          p[3] == 0 && p[4] == 0 && p[5] == 0 && s.step != StepKind::Jmp) {
        want.emplace();
        std::memcpy(&*want, p + 6, 8);
      }
      const auto got = bps.text_pc_for(slot + off, orig);
      EXPECT_EQ(got, want) << "site +" << a << " offset " << off;
      if (got) ++jumps;
    }
  }
  EXPECT_EQ(jumps, 6);  // one each, and the taken and fall-through ones of the jbe; none in jmp's
  EXPECT_EQ(bps.text_pc_for(page, orig), std::nullopt);  // the handler
}

// The sites' code, a chunk at a time: every read gives the memory's bytes, across chunks and
// at the range's ends too, with at most max_chunks held, and a chunk read again only once
// it was let go.
TEST(Breakpoints, CodeReadInChunksGivesTheBytes) {
  constexpr uint64_t kBase = 0x400000;
  constexpr size_t kSize = 5 * SnapshotReader::kChunk + 123;
  std::vector<uint8_t> code(kSize);
  for (size_t i = 0; i < kSize; ++i) code[i] = uint8_t(i * 131 + (i >> 9));
  CodeMemory live(kBase, code);  // 32 int3s past the end
  SnapshotReader snap(live, 2);
  snap.add(kBase + 7, kBase + kSize);
  uint64_t x = 1;
  for (int k = 0; k < 20000; ++k) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    const uint64_t off = (x >> 20) % (kSize + 16);
    uint8_t got[16], want[16];
    const size_t n = 1 + (x >> 8) % 16;
    const bool ok = live.read(kBase + off, want, n);
    ASSERT_EQ(snap.read(kBase + off, got, n), ok) << off;
    if (ok) ASSERT_EQ(std::memcmp(got, want, n), 0) << off;
  }
  // In address order, each chunk is read once.
  SnapshotReader seq(live, 2);
  seq.add(kBase, kBase + kSize);
  for (uint64_t off = 0; off + 16 <= kSize; off += 5) {
    uint8_t b[16];
    ASSERT_TRUE(seq.read(kBase + off, b, 16));
  }
  EXPECT_EQ(seq.loads(), 6u);
}

sys::Mapping mapping(uint64_t start, uint64_t end) {
  sys::Mapping m;
  m.start = start;
  m.end = end;
  return m;
}

// Whether [base, base + size) keeps the guard gap from every mapping.
bool clear_of(const std::vector<sys::Mapping>& maps, uint64_t base, uint64_t size) {
  for (const auto& m : maps)
    if (base < m.end + kScratchGuard && m.start < base + size + kScratchGuard) return false;
  return true;
}

// Debian's caddy as mapped (non-PIE at 0x400000, its heap about 1 GiB above): the copies of
// all its 172,005 sites (8.4 MiB) do not fit in the 4 MiB below the image, where gotap looked
// alone and failed with "cannot map a scratch page"; they go right above the image instead,
// below the heap. A small plan still goes below.
TEST(Breakpoints, ScratchGoesAboveANonPieImageWhenBelowIsTooSmall) {
  const std::vector<sys::Mapping> maps = {
      mapping(0x400000, 0x14f7000),        mapping(0x14f7000, 0x270e000),
      mapping(0x270e000, 0x2766000),       mapping(0x3c3b5000, 0x3c3d6000),
      mapping(0xc000000000, 0xc004000000), mapping(0x7f5ee0000000, 0x7f5ef0000000)};
  ScratchRoom room;
  room.image_lo = 0x400000;
  room.image_hi = 0x2766000;
  room.brk_start = 0x3c3b5000;
  room.brk = 0x3c3d6000;
  const uint64_t whole = Breakpoints::scratch_size_for(172005);
  EXPECT_GT(whole, room.image_lo);
  auto spots = scratch_spots(maps, room, whole);
  ASSERT_FALSE(spots.empty());
  EXPECT_EQ(spots[0], 0x2766000u + kScratchGuard);
  for (uint64_t s : spots) {
    EXPECT_TRUE(clear_of(maps, s, whole)) << std::hex << s;
    EXPECT_TRUE(scratch_within_reach(s, whole, room)) << std::hex << s;
    // Never in the heap's way.
    EXPECT_TRUE(s + whole <= room.brk_start || s >= room.brk + kScratchBrkRoom) << std::hex << s;
  }
  const uint64_t small = Breakpoints::scratch_size_for(1000);
  spots = scratch_spots(maps, room, small);
  ASSERT_FALSE(spots.empty());
  EXPECT_EQ(spots[0], 0x400000u - kScratchGuard - small);
}

// The heap's room ends where the heap does: ScratchRoom once read /proc/PID/stat's field 48
// (arg_start, on the stack) as brk, so nothing above the heap was ever free, and ptrace could
// not arm a whole caddy whenever its heap started within 7 MiB of the image.
TEST(Breakpoints, ScratchRoomHeapIsTheHeap) {
  std::vector<void*> keep;
  for (int i = 0; i < 64; ++i) keep.push_back(std::malloc(1024));  // a [heap] mapping
  const ScratchRoom room = ScratchRoom::of(getpid(), 0x400000, 0x500000);
  uint64_t heap_end = room.brk_start;
  for (const sys::Mapping& m : sys::read_maps(getpid()))
    if (m.path == "[heap]") heap_end = m.end;
  EXPECT_NE(room.brk_start, 0u);
  EXPECT_EQ(room.brk, heap_end);
  EXPECT_LT(room.brk - room.brk_start, 1ull << 30);
  for (void* p : keep) std::free(p);
}

// A heap right above the image and no room below: above the heap's room, still in reach. No
// room at all within 2 GiB: nothing, and gotap says so instead of mapping out of reach.
TEST(Breakpoints, ScratchLeavesTheHeapRoomToGrow) {
  ScratchRoom room;
  room.image_lo = 0x400000;
  room.image_hi = 0x2766000;
  room.brk_start = 0x2800000;
  room.brk = 0x2900000;
  const std::vector<sys::Mapping> maps = {mapping(0x400000, 0x2766000),
                                          mapping(0x2800000, 0x2900000)};
  const uint64_t size = Breakpoints::scratch_size_for(172005);
  auto spots = scratch_spots(maps, room, size);
  ASSERT_FALSE(spots.empty());
  EXPECT_EQ(spots[0], room.brk + kScratchBrkRoom);
  EXPECT_TRUE(scratch_within_reach(spots[0], size, room));
  // Everything within reach taken.
  const std::vector<sys::Mapping> full = {mapping(0x10000, 0x100000000)};
  EXPECT_TRUE(scratch_spots(full, room, size).empty());
  // An image too large for any rel32 to span it.
  room.image_hi = room.image_lo + (3ull << 30);
  EXPECT_TRUE(scratch_spots(maps, room, size).empty());
}

// A PIE image high in the address space with its heap right above: below, as before.
TEST(Breakpoints, ScratchGoesBelowAPieImage) {
  ScratchRoom room;
  room.image_lo = 0x555555554000;
  room.image_hi = 0x555557000000;
  room.brk_start = 0x555558000000;
  room.brk = room.brk_start;
  const std::vector<sys::Mapping> maps = {mapping(room.image_lo, room.image_hi)};
  const uint64_t size = Breakpoints::scratch_size_for(172005);
  auto spots = scratch_spots(maps, room, size);
  ASSERT_FALSE(spots.empty());
  EXPECT_EQ(spots[0], room.image_lo - kScratchGuard - size);
}

// Reads this process's own memory.
class SelfMemory : public MemoryReader {
 public:
  bool read(uint64_t addr, void* buf, size_t n) override {
    std::memcpy(buf, reinterpret_cast<const void*>(addr), n);
    return true;
  }
};

// The program's own SIGTRAP handler, for int3s that are not gotap's.
volatile sig_atomic_t g_foreign_traps = 0;
void foreign_handler(int, siginfo_t*, void*) {
  g_foreign_traps = g_foreign_traps + 1;
}

// Functions with int3s on their probe sites, a scratch page built for them, and the page's
// handler installed as this process's SIGTRAP handler: what a thread meets after gotap died.
class TrapNetLive : public ::testing::Test {
 protected:
  void SetUp() override {
    // One mapping, so that the page is within rel32 reach of the code (RIP-relative lea).
    region_ = static_cast<uint8_t*>(mmap(nullptr, kRegion, PROT_READ | PROT_WRITE | PROT_EXEC,
                                         MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    ASSERT_NE(region_, MAP_FAILED);
    std::memset(region_, 0xCC, kRegion);
  }
  void TearDown() override {
    if (installed_) sigaction(SIGTRAP, &saved_, nullptr);
    if (region_ != MAP_FAILED) munmap(region_, kRegion);
  }

  // Places `code` at offset `off` of the code area; returns its address.
  uint64_t put(size_t off, std::vector<uint8_t> code) {
    std::memcpy(region_ + off, code.data(), code.size());
    return reinterpret_cast<uint64_t>(region_ + off);
  }
  void probe(uint64_t addr) {
    auto r = bps_.add(addr, {SiteRole::Entry, 0, -1}, 0, mem_);
    ASSERT_TRUE(r.ok()) << r.error().what();
  }
  // Builds the page, writes the int3s and installs the handler (as TrapNet::arm does in a
  // tracee, chaining to foreign_handler).
  void arm() {
    page_ = reinterpret_cast<uint64_t>(region_ + kRegion / 2);
    auto img = bps_.build_scratch(page_);
    ASSERT_TRUE(img.ok()) << img.error().what();
    ASSERT_LE(img->size(), kRegion / 2);
    std::memcpy(reinterpret_cast<void*>(page_), img->data(), img->size());
    uint64_t old = reinterpret_cast<uint64_t>(&foreign_handler);
    std::memcpy(reinterpret_cast<void*>(page_ + kNetHeaderOff + 8), &old, 8);
    for (const Site& s : bps_.sites()) *reinterpret_cast<uint8_t*>(s.addr) = 0xCC;
    struct sigaction sa {};
    sa.sa_sigaction = reinterpret_cast<void (*)(int, siginfo_t*, void*)>(page_);
    sa.sa_flags = SA_SIGINFO;
    ASSERT_EQ(sigaction(SIGTRAP, &sa, &saved_), 0);
    installed_ = true;
  }
  static uint64_t call(uint64_t f, uint64_t arg) {
    return reinterpret_cast<uint64_t (*)(uint64_t)>(f)(arg);
  }

  static constexpr size_t kRegion = 1 << 16;
  uint8_t* region_ = static_cast<uint8_t*>(MAP_FAILED);
  uint64_t page_ = 0;
  SelfMemory mem_;
  Breakpoints bps_;
  struct sigaction saved_ {};
  bool installed_ = false;
};

TEST_F(TrapNetLive, EveryKindOfSiteRunsItsCopy) {
  // f1(x) = x + 1 with a frame: probes on push rbp (entry) and ret.
  uint64_t f1 = put(0, {0x55, 0x48, 0x89, 0xE5, 0x48, 0x8D, 0x47, 0x01, 0x5D, 0xC3});
  // f2(x) = x < 10 ? 2 : 1: cmp rdi,10; jb +6; mov eax,1; ret; mov eax,2; ret. Probe the jb.
  uint64_t f2 = put(0x40, {0x48, 0x83, 0xFF, 0x0A, 0x72, 0x06, 0xB8, 0x01, 0x00, 0x00, 0x00, 0xC3,
                           0xB8, 0x02, 0x00, 0x00, 0x00, 0xC3});
  // f3(x) = f1(x) + 100: push rbp; call f1; add rax,100; pop rbp; ret. Probe the call.
  int32_t rel = static_cast<int32_t>(f1 - (reinterpret_cast<uint64_t>(region_) + 0x80 + 6));
  std::vector<uint8_t> c3 = {0x55, 0xE8, 0, 0, 0, 0, 0x48, 0x83, 0xC0, 0x64, 0x5D, 0xC3};
  std::memcpy(&c3[2], &rel, 4);
  uint64_t f3 = put(0x80, c3);
  // f4() = *(uint64*)K: lea rax,[rip+0x1000]; mov rax,[rax]; ret. Probe the lea.
  uint64_t f4 = put(0xC0, {0x48, 0x8D, 0x05, 0x00, 0x10, 0x00, 0x00, 0x48, 0x8B, 0x00, 0xC3});
  const uint64_t k = 0x1122334455667788;
  std::memcpy(region_ + 0xC0 + 7 + 0x1000, &k, 8);
  // f5() = 7: jmp +6; mov eax,1; ret; mov eax,7; ret. Probe the jmp.
  uint64_t f5 = put(
      0x100, {0xEB, 0x06, 0xB8, 0x01, 0x00, 0x00, 0x00, 0xC3, 0xB8, 0x07, 0x00, 0x00, 0x00, 0xC3});
  probe(f1);
  probe(f1 + 9);
  probe(f2 + 4);
  probe(f3 + 1);
  probe(f4);
  probe(f5);
  arm();
  EXPECT_EQ(call(f1, 41), 42u);
  EXPECT_EQ(call(f2, 3), 2u);
  EXPECT_EQ(call(f2, 30), 1u);
  EXPECT_EQ(call(f3, 1), 102u);
  EXPECT_EQ(call(f4, 0), k);
  EXPECT_EQ(call(f5, 0), 7u);
  EXPECT_EQ(g_foreign_traps, 0);
}

TEST_F(TrapNetLive, ForeignTrapsReachTheProgramsHandler) {
  uint64_t f1 = put(0, {0x55, 0x48, 0x89, 0xE5, 0x48, 0x8D, 0x47, 0x01, 0x5D, 0xC3});
  // int3; mov eax,5; ret: an int3 of the program's own, not in the table.
  uint64_t own = put(0x40, {0xCC, 0xB8, 0x05, 0x00, 0x00, 0x00, 0xC3});
  probe(f1);
  arm();
  g_foreign_traps = 0;
  EXPECT_EQ(call(own, 0), 5u);
  EXPECT_EQ(g_foreign_traps, 1);
  EXPECT_EQ(call(f1, 1), 2u);
  EXPECT_EQ(g_foreign_traps, 1);
}

// The states a thread can be left in when the tracer dies, given to the handler directly.
TEST_F(TrapNetLive, HandlerDecidesByWhereTheThreadStopped) {
  uint64_t f1 = put(0, {0x55, 0x48, 0x89, 0xE5, 0x48, 0x8D, 0x47, 0x01, 0x5D, 0xC3});
  probe(f1);
  probe(f1 + 9);
  arm();
  auto handler = reinterpret_cast<void (*)(int, siginfo_t*, void*)>(page_);
  ucontext_t uc{};
  siginfo_t si{};
  // Stopped at the int3, not yet handled: resumes in the copy.
  uc.uc_mcontext.gregs[REG_RIP] = static_cast<greg_t>(f1 + 1);
  handler(SIGTRAP, &si, &uc);
  const Site* entry = bps_.find(f1);
  ASSERT_NE(entry, nullptr);
  EXPECT_EQ(uint64_t(uc.uc_mcontext.gregs[REG_RIP]), bps_.slot(*entry));
  // Already sent to the copy by the tracer: left alone.
  handler(SIGTRAP, &si, &uc);
  EXPECT_EQ(uint64_t(uc.uc_mcontext.gregs[REG_RIP]), bps_.slot(*entry));
  // The ret site: the last entry of the table (binary search bounds).
  uc.uc_mcontext.gregs[REG_RIP] = static_cast<greg_t>(f1 + 10);
  handler(SIGTRAP, &si, &uc);
  EXPECT_EQ(uint64_t(uc.uc_mcontext.gregs[REG_RIP]), bps_.slot(*bps_.find(f1 + 9)));
  // Not ours: the program's handler, with the context untouched.
  g_foreign_traps = 0;
  uc.uc_mcontext.gregs[REG_RIP] = static_cast<greg_t>(f1 + 5);
  handler(SIGTRAP, &si, &uc);
  EXPECT_EQ(g_foreign_traps, 1);
  EXPECT_EQ(uint64_t(uc.uc_mcontext.gregs[REG_RIP]), f1 + 5);
}

}  // namespace
}  // namespace gotap::ptrace
