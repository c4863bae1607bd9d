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

}  // namespace
}  // namespace gotap::trampoline
