// The latency bucket scheme shared by the BPF program and user space, and the uprobe
// instruction filter. No root needed.
#include <gtest/gtest.h>

#include "backends/ebpf/insn_filter.h"
#include "core/events/typed_events.h"
#include "gotap_shared.h"

namespace gotap::ebpf {
namespace {

// The kernel's bucket index and core's are one scheme.
TEST(EbpfHistogram, KernelAndCoreAgree) {
  ASSERT_EQ(uint32_t(GOTAP_NBUCKETS), kLatencyBuckets);
  for (int shift = 0; shift < 64; ++shift)
    for (uint64_t v : {uint64_t{1} << shift, (uint64_t{1} << shift) - 1, (uint64_t{1} << shift) + 1,
                       (uint64_t{1} << shift) * 3 / 2})
      ASSERT_EQ(gotap_bucket(v), latency_bucket(v)) << v;
}

TEST(EbpfHistogram, BucketsTileTheRange) {
  for (uint32_t b = 0; b + 1 < GOTAP_NBUCKETS; ++b) {
    BucketRange r = latency_bucket_range(b), next = latency_bucket_range(b + 1);
    ASSERT_EQ(r.hi, next.lo) << b;
    ASSERT_EQ(gotap_bucket(r.lo), b);
    ASSERT_EQ(gotap_bucket(r.hi - 1), b);
    // Sub-buckets keep the relative width at most 1/8 from value 8 on.
    if (r.lo >= 8) ASSERT_LE((r.hi - r.lo) * 8, r.lo) << b;
  }
  EXPECT_EQ(gotap_bucket(UINT64_MAX), GOTAP_NBUCKETS - 1);
  EXPECT_EQ(gotap_bucket(0), 0u);
}

// A summary holds its buckets from its first sample on: a whole binary has one per function,
// and 46,129 of 4 KB each were most of a ptrace `count 're:.'`'s 390 MB.
TEST(EbpfHistogram, SummaryHasBucketsOnlyOnceItHasSamples) {
  LatencySummary s;
  EXPECT_TRUE(s.fine.empty());
  EXPECT_EQ(percentile(s, 0.5), 0u);
  EXPECT_TRUE(fine_buckets(s).empty());
  s.add(1000);
  ASSERT_EQ(s.fine.size(), kLatencyBuckets);
  EXPECT_EQ(s.fine[latency_bucket(1000)], 1u);
  EXPECT_EQ(percentile(s, 0.5), 1000u);
}

TEST(EbpfHistogram, PercentilesFromFineBuckets) {
  LatencySummary s;
  // 90 samples of 1 ms, 10 of 30 ms.
  s.fine.assign(kLatencyBuckets, 0);
  s.fine[gotap_bucket(1'000'000)] = 90;
  s.fine[gotap_bucket(30'000'000)] = 10;
  s.count = 100;
  s.min_ns = 1'000'000;
  s.max_ns = 30'000'000;
  EXPECT_LT(percentile(s, 0.5), 1'125'000u);
  EXPECT_GE(percentile(s, 0.5), 1'000'000u);
  EXPECT_LE(percentile(s, 0.99), 30'000'000u);
  EXPECT_GE(percentile(s, 0.99), 28'000'000u);
  Event e = to_event(FuncLatency{"f", s});
  uint64_t total = 0;
  for (const auto& b : e["buckets"]) total += b["count"].get<uint64_t>();
  EXPECT_EQ(total, 100u);
}

TEST(EbpfInsnFilter, RefusesWhatUprobesRefuse) {
  const uint8_t push_rbp[] = {0x55};
  const uint8_t ret[] = {0xc3};
  const uint8_t lock_xadd[] = {0xf0, 0x48, 0x0f, 0xc1, 0x03};
  const uint8_t evex[] = {0x62, 0xf1, 0xfe, 0x48, 0x6f};
  const uint8_t int3[] = {0xcc};
  EXPECT_TRUE(uprobe_can_probe(push_rbp));
  EXPECT_TRUE(uprobe_can_probe(ret));
  EXPECT_FALSE(uprobe_can_probe(lock_xadd));
  EXPECT_FALSE(uprobe_can_probe(evex));
  EXPECT_FALSE(uprobe_can_probe(int3));
}

// 0x90 is NOP only without REX.B; with it, xchg rax, r8..r15, which the kernel would skip as
// a NOP (runtime.gcWriteBarrierR8 begins with 49 90).
TEST(EbpfInsnFilter, RefusesTheXchgTheKernelTakesForANop) {
  const uint8_t nop[] = {0x90};
  const uint8_t pause[] = {0xf3, 0x90};
  const uint8_t xchg_rax_rax[] = {0x48, 0x90};
  const uint8_t xchg_r8[] = {0x49, 0x90};
  const uint8_t xchg_r8d[] = {0x41, 0x90};
  EXPECT_TRUE(uprobe_can_probe(nop));
  EXPECT_TRUE(uprobe_can_probe(pause));
  EXPECT_TRUE(uprobe_can_probe(xchg_rax_rax));
  EXPECT_FALSE(uprobe_can_probe(xchg_r8));
  EXPECT_FALSE(uprobe_can_probe(xchg_r8d));
}

}  // namespace
}  // namespace gotap::ebpf
