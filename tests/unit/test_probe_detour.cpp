// core/plan/probe_detour.h: which changes to a function's first bytes mean another tracer's
// jump holds its entry probe (gotap's other backends then leave the function alone), and
// which are an int3 the backends report as such.
#include "core/plan/probe_detour.h"

#include <gtest/gtest.h>

#include <vector>

namespace gotap {
namespace {

FuncPlan on_jbe(uint64_t probe_off) {
  FuncPlan f;
  f.entry = 0x401000;
  f.entry_probe = f.entry + probe_off;
  f.entry_probe_kind = "jcc";
  return f;
}

bool detoured(const FuncPlan& f, const std::vector<uint8_t>& file, std::vector<uint8_t> live) {
  return entry_probe_detoured(f, Bytes(file.data(), file.size()), Bytes(live.data(), live.size()));
}

TEST(ProbeDetour, AShortChecksJumpHoldsTheProbeOnItsJbe) {
  const FuncPlan f = on_jbe(4);
  ASSERT_EQ(detour_span(f), 6u);
  const std::vector<uint8_t> file = {0x49, 0x3b, 0x66, 0x10, 0x76, 0x20};
  EXPECT_FALSE(detoured(f, file, file));
  EXPECT_TRUE(detoured(f, file, {0xe9, 0x3b, 0x66, 0x10, 0x76, 0x20})) << "the trampoline's jmp";
  EXPECT_FALSE(detoured(f, file, {0x49, 0x3b, 0x66, 0x10, 0xcc, 0x20}))
      << "an int3 on the probe alone: reported as another tracer's int3";
}

TEST(ProbeDetour, AJnoOverTheJbeHoldsItEvenUnderAnInt3) {
  const FuncPlan f = on_jbe(4);
  const std::vector<uint8_t> file = {0x49, 0x3b, 0x66, 0x10, 0x0f, 0x86};
  EXPECT_TRUE(detoured(f, file, {0x49, 0x3b, 0x66, 0x10, 0x0f, 0x81}));
  EXPECT_TRUE(detoured(f, file, {0x49, 0x3b, 0x66, 0x10, 0xcc, 0x81})) << "a uprobe on the jno";
  EXPECT_FALSE(detoured(f, file, {0x49, 0x3b, 0x66, 0x10, 0xcc, 0x86}));
}

TEST(ProbeDetour, OnlyProbesOnTheStackCheckAreLookedAt) {
  FuncPlan f = on_jbe(4);
  f.entry_probe_kind = "push_rbp";
  EXPECT_EQ(detour_span(f), 0u);
  f.entry_probe_kind = "entry";
  EXPECT_EQ(detour_span(f), 0u);
  FuncPlan far = on_jbe(200);
  EXPECT_EQ(detour_span(far), 0u) << "no stack check is that long";
  const std::vector<uint8_t> file = {0x49, 0x3b, 0x66, 0x10, 0x76, 0x20};
  EXPECT_FALSE(detoured(on_jbe(4), file, {0xe9, 0x3b, 0x66}))
      << "bytes that could not all be read say nothing";
}

}  // namespace
}  // namespace gotap
