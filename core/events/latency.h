// The one latency histogram (docs/json.md, "latency"): both backends and `gotap report` fill
// it, so that a `latency` event means the same on each. Buckets are log2 with 8 linear
// sub-buckets (relative width at most 12.5%); the BPF program computes the same bucket
// index in the kernel (bpf/gotap_shared.h, gotap_bucket; a unit test keeps the two equal).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gotap {

constexpr uint32_t kLatencyBuckets = 496;

// The fine bucket of a duration.
uint32_t latency_bucket(uint64_t ns);

struct BucketRange {
  uint64_t lo = 0, hi = 0;  // [lo, hi)
};
BucketRange latency_bucket_range(uint32_t bucket);

struct LatencySummary {
  uint64_t count = 0, sum_ns = 0, min_ns = 0, max_ns = 0;
  // kLatencyBuckets counts, or empty before the first sample: a whole binary has one
  // summary per function (caddy: 46,129 of them, 183 MB when each had its 4 KB at once).
  std::vector<uint64_t> fine;
  void add(uint64_t ns);
};

// The value below which `q` (0..1) of the samples lie, interpolated inside the fine bucket
// and clamped to [min, max]. 0 when there are no samples.
uint64_t percentile(const LatencySummary& s, double q);

struct BucketCount {
  uint64_t lo = 0, hi = 0, count = 0;  // [lo, hi)
};
// The non-empty log2 buckets ([2^k, 2^(k+1)), and [0, 2) for 0 and 1), for the text
// histogram, and the non-empty fine buckets, which tell 8 ms from 15 ms.
std::vector<BucketCount> log2_buckets(const LatencySummary& s);
std::vector<BucketCount> fine_buckets(const LatencySummary& s);

}  // namespace gotap
