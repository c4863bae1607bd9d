// The latency histogram the BPF program fills (log2 buckets with 8 linear sub-buckets, see
// bpf/gotap_shared.h) and what user space derives from it: percentiles and log2 buckets.
#pragma once

#include <cstdint>
#include <vector>

#include "core/events.h"

namespace gotap::ebpf {

struct BucketRange {
  uint64_t lo = 0, hi = 0;  // [lo, hi)
};

BucketRange bucket_range(uint32_t bucket);

struct LatencySummary {
  uint64_t count = 0, sum_ns = 0, min_ns = 0, max_ns = 0;
  std::vector<uint64_t> fine;  // GOTAP_NBUCKETS counts
};

// The value below which `q` (0..1) of the samples lie, interpolated inside the fine bucket
// and clamped to [min, max]. 0 when there are no samples.
uint64_t percentile(const LatencySummary& s, double q);

// {"event":"latency",...} of CONTRACT.md, with log2 buckets [2^k, 2^(k+1)).
Event latency_event(const std::string& func, const LatencySummary& s);

}  // namespace gotap::ebpf
