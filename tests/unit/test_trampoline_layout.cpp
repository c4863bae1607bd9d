// The trampoline backend's regions (backends/trampoline/patch_set.h): every short stack
// check's trampoline must start 0x76000000 to 0x76ffffff bytes past its jump, whatever the
// load bias and wherever in its allowed range the region lands; the 6-byte jbes go to one
// region placed anywhere in reach.
#include <random>

#include <gtest/gtest.h>

#include "backends/trampoline/patch_set.h"
#include "core/plan/trampoline_code.h"

namespace gotap::trampoline {
namespace {

PatchSet synthetic(std::mt19937_64& rng, uint64_t text_lo, uint64_t text_size, size_t n) {
  PatchSet set;
  for (size_t i = 0; i < n; ++i) {
    Patch p;
    p.func = static_cast<int>(i);
    p.short_check = rng() % 2;
    p.site.at = text_lo + rng() % text_size;
    p.site.len = 6;
    p.site.branch_len = p.short_check ? 2 : 6;
    p.site.branch_to = p.site.at + 0x40;
    set.patches.push_back(p);
  }
  return set;
}

TEST(TrampolineLayout, EveryShortSiteIsInItsWindowAtEitherEndOfItsRegionsRange) {
  std::mt19937_64 rng(42);
  for (int round = 0; round < 50; ++round) {
    // A non-PIE text at 0x401000, or a PIE's at a page-aligned bias, 20 MiB of it.
    const uint64_t bias = round % 2 ? 0 : (0x555555554000ull + (rng() % 4096) * 4096);
    const PatchSet set = synthetic(rng, 0x401000, 20 << 20, 3000);
    const std::vector<Region> regions = lay_out(set, bias);
    size_t placed = 0, near = 0;
    for (const Region& r : regions) {
      placed += r.patches.size();
      if (!r.base) {
        near += r.patches.size();
        for (size_t i : r.patches) EXPECT_FALSE(set.patches[i].short_check);
        continue;
      }
      EXPECT_EQ(r.base % 4096, 0u);
      EXPECT_EQ(r.base_hi % 4096, 0u);
      EXPECT_LE(r.base, r.base_hi);
      ASSERT_LE(r.code_size() + r.counter_size(), 4u << 20);
      for (uint64_t base : {r.base, r.base_hi}) {
        for (size_t k = 0; k < r.patches.size(); ++k) {
          const Patch& p = set.patches[r.patches[k]];
          ASSERT_TRUE(p.short_check);
          JumpSite s = p.site;
          s.at += bias;
          const auto [lo, hi] = short_jump_window(s);
          const uint64_t slot = base + kHeaderSize + k * kSlotSize;
          EXPECT_GE(slot, lo) << std::hex << s.at;
          EXPECT_LE(slot + kSlotSize, hi) << std::hex << s.at;
        }
      }
    }
    EXPECT_EQ(placed, set.patches.size());
    EXPECT_GT(near, 0u);
  }
}

}  // namespace
}  // namespace gotap::trampoline
