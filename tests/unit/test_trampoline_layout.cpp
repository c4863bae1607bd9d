// The trampoline backend's regions (backends/trampoline/patch_set.h): every short stack
// check's trampoline must start at the one place its jump's displacement names (the file's
// bytes, trampoline_code.h), whatever the load bias, inside its region's code, past the
// header and clear of every other; the 6-byte jbes go slot after slot to one region placed
// anywhere in reach.
#include <algorithm>
#include <random>
#include <set>

#include <gtest/gtest.h>

#include "backends/trampoline/patch_set.h"
#include "core/plan/trampoline_code.h"

namespace gotap::trampoline {
namespace {

// Go 1.17+'s short check, `cmp rsp,[r14+0x10]; jbe +0x20`, and Go 1.16's compare, which
// loads g into rcx: `cmp rsp,[rcx+0x10]`.
constexpr std::array<uint8_t, 6> kShortR14 = {0x49, 0x3b, 0x66, 0x10, 0x76, 0x20};
constexpr std::array<uint8_t, 6> kShortRcx = {0x48, 0x3b, 0x61, 0x10, 0x76, 0x20};

// n functions 32-byte aligned and apart in 20 MiB of text from 0x401000, every other one
// short (with `short_enc`'s compare), the rest with a 6-byte jbe.
PatchSet synthetic(std::mt19937_64& rng, size_t n, const std::array<uint8_t, 6>& short_enc) {
  std::set<uint64_t> entries;
  while (entries.size() < n) entries.insert(0x401000 + (rng() % ((20 << 20) / 32)) * 32);
  PatchSet set;
  int f = 0;
  for (uint64_t entry : entries) {
    Patch p;
    p.func = f++;
    p.short_check = rng() % 2;
    p.site.at = entry;
    p.site.len = 6;
    p.site.branch_len = p.short_check ? 2 : 6;
    p.site.branch_to = entry + 0x40;
    if (p.short_check) std::copy(short_enc.begin(), short_enc.end(), p.orig.begin());
    set.patches.push_back(p);
  }
  return set;
}

TEST(TrampolineLayout, EveryShortTrampolineIsAtItsPlaceInsideItsRegion) {
  std::mt19937_64 rng(42);
  for (int round = 0; round < 50; ++round) {
    // A non-PIE text at 0x401000, or a PIE's at a page-aligned bias.
    const uint64_t bias = round % 2 ? 0 : (0x555555554000ull + (rng() % 4096) * 4096);
    PatchSet set = synthetic(rng, 3000, kShortR14);
    const size_t n = set.patches.size();
    drop_crowded(set);
    ASSERT_EQ(set.patches.size(), n) << "one encoding never crowds";
    const std::vector<Region> regions = lay_out(set, bias);
    ASSERT_EQ(regions.size(), 2u);
    size_t placed = 0;
    for (const Region& r : regions) {
      placed += r.patches.size();
      ASSERT_EQ(r.at.size(), r.patches.size());
      EXPECT_EQ(r.code_size() % 4096, 0u);
      std::vector<std::pair<uint64_t, uint64_t>> used;
      for (size_t k = 0; k < r.patches.size(); ++k) {
        const Patch& p = set.patches[r.patches[k]];
        EXPECT_EQ(p.short_check, r.base != 0);
        EXPECT_GE(r.at[k], kHeaderSize);
        EXPECT_LE(r.at[k] + kSlotSize, r.code_size());
        used.emplace_back(r.at[k], r.at[k] + count_trampoline_size(p.site, false));
        if (!r.base) continue;
        JumpSite s = p.site;
        s.at += bias;
        const uint64_t want = short_site_trampoline(s, Bytes(p.orig.data(), 6));
        EXPECT_EQ(r.base + r.at[k], want) << std::hex << s.at;
        EXPECT_EQ(want - (s.at + 5), 0x7610663bu);
      }
      EXPECT_EQ(r.base % 4096, 0u);
      std::sort(used.begin(), used.end());
      for (size_t k = 1; k < used.size(); ++k)
        ASSERT_LE(used[k - 1].second, used[k].first) << "two trampolines overlap";
    }
    EXPECT_EQ(placed, set.patches.size());
  }
}

// Two encodings of the compare name places 0x500 bytes apart: where one function's
// trampoline would run into another's, the later is left out, said so, never overlapped.
TEST(TrampolineLayout, OverlappingPlacesLeaveTheLaterOut) {
  std::mt19937_64 rng(7);
  PatchSet set = synthetic(rng, 3000, kShortR14);
  PatchSet rcx = synthetic(rng, 3000, kShortRcx);
  for (Patch& p : rcx.patches) {
    p.func += 3000;
    set.patches.push_back(p);
  }
  const size_t n = set.patches.size();
  drop_crowded(set);
  size_t refused = 0;
  for (const auto& [why, funcs] : set.refused) refused += funcs.size();
  EXPECT_EQ(set.patches.size() + refused, n);
  EXPECT_GT(refused, 0u);
  const std::vector<Region> regions = lay_out(set, 0);
  for (const Region& r : regions) {
    if (!r.base) continue;
    std::vector<uint64_t> at = r.at;
    std::sort(at.begin(), at.end());
    for (size_t k = 1; k < at.size(); ++k) ASSERT_GE(at[k], at[k - 1] + kSlotSize);
  }
}

// A timed run's layout: the narrow RETs' stubs at their places in the first region, every
// body after them and the ring; each wide RET's stub (a frame of 128 bytes or more) at its
// own place, in a cluster region (split where 64 KiB are free, or past 1 MiB where three
// pages are), clear of the others and within a rel32 of its body. A function is left out whole when
// one of its stubs has no region.
TEST(TrampolineLayout, TimedRegionsPutEveryStubAtItsPlace) {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 20; ++round) {
    const uint64_t bias = round % 2 ? 0 : (0x555555554000ull + (rng() % 4096) * 4096);
    PatchSet set;
    std::set<uint64_t> entries;
    // Sparse, or dense enough that clusters reach 1 MiB with no 64 KiB free.
    const size_t n_funcs = round % 4 < 2 ? 400 : 6000;
    while (entries.size() < n_funcs) entries.insert(0x401000 + (rng() % ((8 << 20) / 64)) * 64);
    int f = 0;
    for (uint64_t entry : entries) {
      Patch e;
      e.func = f;
      e.site.at = entry;
      e.site.len = 6;
      e.site.branch_len = 6;
      e.site.branch_to = entry + 0x30;
      set.patches.push_back(e);
      Patch r;
      r.func = f++;
      r.ret = true;
      r.site.at = entry + 0x20;
      if (rng() % 2) {  // add rsp, N (imm8); pop rbp; ret
        const uint8_t b[] = {0x48, 0x83, 0xc4, uint8_t(8 + rng() % 100), 0x5d, 0xc3};
        std::copy(std::begin(b), std::end(b), r.orig.begin());
        r.site.len = sizeof b;
      } else {  // add rsp, N (imm32, 128 to 4 KiB); pop rbp; ret
        // Dense rounds: one frame size, so that the stubs lie as close as the sites.
        const uint32_t n = n_funcs > 400 ? 0x98 : 128 + rng() % 4000;
        const uint8_t b[] = {0x48, 0x81, 0xc4, uint8_t(n), uint8_t(n >> 8), 0, 0, 0x5d, 0xc3};
        std::copy(std::begin(b), std::end(b), r.orig.begin());
        r.site.len = sizeof b;
      }
      set.patches.push_back(r);
    }
    drop_crowded(set);
    const std::vector<Region> regions = lay_out_timed(set, bias);
    ASSERT_FALSE(regions.empty());
    const Region& e = regions[0];
    ASSERT_TRUE(e.ring);
    ASSERT_EQ(e.patches.size(), set.patches.size()) << "every body in the first region";
    std::vector<const Region*> all;
    std::vector<std::pair<uint64_t, uint64_t>> spans;
    size_t wide = 0, clustered = 0;
    for (const Region& r : regions) {
      all.push_back(&r);
      EXPECT_EQ(r.base % 4096, 0u);
      spans.emplace_back(r.base, r.base + r.code_size() + r.counter_size());
      if (&r == &e) continue;
      EXPECT_FALSE(r.ring);

      for (size_t k = 0; k < r.patches.size(); ++k) {
        const Patch& p = set.patches[r.patches[k]];
        ASSERT_TRUE(p.clustered());
        ++clustered;
        const uint64_t place = one_byte_jump_place(p.site.at + bias, Bytes(p.orig.data(), 5));
        EXPECT_EQ(r.base + r.at[k], place);
        EXPECT_GE(r.at[k], kHeaderSize);
        const int64_t reach = int64_t(e.base + e.body[r.patches[k]]) - int64_t(place + 5);
        EXPECT_TRUE(reach >= INT32_MIN && reach <= INT32_MAX);
      }
    }
    for (size_t k = 0; k < e.patches.size(); ++k) {
      const Patch& p = set.patches[e.patches[k]];
      wide += p.clustered();
      if (!p.ret || p.clustered()) continue;
      EXPECT_EQ(e.base + e.at[k], one_byte_jump_place(p.site.at + bias, Bytes(p.orig.data(), 5)));
    }
    std::sort(spans.begin(), spans.end());
    for (size_t k = 1; k < spans.size(); ++k)
      ASSERT_LE(spans[k - 1].second, spans[k].first) << "two regions overlap";
    EXPECT_GT(wide, 0u);
    // Every wide stub is in a cluster, or its function is left out.
    const std::vector<int> out = stubless_functions(set, all);
    EXPECT_EQ(clustered + out.size(), wide) << "each stubless function has one wide RET here";
    // Without the clusters, every function with a wide RET is.
    EXPECT_EQ(stubless_functions(set, {&e}).size(), wide);
  }
}

// An inlined copy's probe site inside a jump's bytes (a copy with no code of its own, marked
// at its caller's epilogue) takes that jump's whole function off the jumps, its entry and
// every RET, with the reason; a site just past a jump, or a skipped copy's, takes nothing.
TEST(TrampolineLayout, AnInlinedCopysSiteOnAJumpTakesItsFunctionOff) {
  auto patch = [](int func, uint64_t at, uint8_t len, bool ret) {
    Patch p;
    p.func = func;
    p.site.at = at;
    p.site.len = len;
    p.ret = ret;
    return p;
  };
  PatchSet set;
  set.patches = {patch(0, 0x1000, 4, false), patch(0, 0x1040, 5, true), patch(1, 0x2000, 4, false),
                 patch(1, 0x2040, 5, true),  patch(1, 0x2080, 6, true), patch(2, 0x3000, 6, false)};
  ProbePlan plan;
  plan.funcs.resize(4);
  // Into function 1's second RET (its epilogue's pop, 4 bytes in), just past function 0's
  // RET, and a skipped one on function 2's entry.
  plan.funcs[3].inline_sites = {{"main.one", 0x2084, "", 0, 0, ""},
                                {"main.zero", 0x1045, "", 0, 0, ""},
                                {"main.two", 0x3000, "", 0, 0, "no instruction"}};
  drop_inline_collisions(set, plan);
  std::vector<int> left;
  for (const Patch& p : set.patches) left.push_back(p.func);
  EXPECT_EQ(left, (std::vector<int>{0, 0, 2}));
  ASSERT_EQ(set.refused.size(), 1u);
  EXPECT_EQ(set.refused.begin()->first, "an inlined copy's probe is in its jump's bytes");
  EXPECT_EQ(set.refused.begin()->second, std::vector<int>{1});
  // Not probed inlined (inline_probed false: latency): nothing is taken off.
  PatchSet again;
  again.patches = {patch(1, 0x2080, 6, true)};
  plan.funcs[3].inline_probed = false;
  drop_inline_collisions(again, plan);
  EXPECT_EQ(again.patches.size(), 1u);
}

}  // namespace
}  // namespace gotap::trampoline
