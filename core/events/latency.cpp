#include "core/events/latency.h"

#include <algorithm>
#include <map>

namespace gotap {

namespace {

uint32_t log2_of(uint64_t v) {
  return v ? 63 - __builtin_clzll(v) : 0;
}

}  // namespace

uint32_t latency_bucket(uint64_t v) {
  if (v < 8) return static_cast<uint32_t>(v);
  uint32_t e = log2_of(v);
  return (e - 2) * 8 + static_cast<uint32_t>((v >> (e - 3)) & 7);
}

BucketRange latency_bucket_range(uint32_t b) {
  if (b < 8) return {b, uint64_t{b} + 1};
  uint32_t e = b / 8 + 2, sub = b % 8;
  uint64_t lo = (uint64_t{8} + sub) << (e - 3);
  // The top bucket's end does not fit in 64 bits.
  uint64_t hi = e == 63 && sub == 7 ? UINT64_MAX : (uint64_t{9} + sub) << (e - 3);
  return {lo, hi};
}

void LatencySummary::add(uint64_t ns) {
  if (!count || ns < min_ns) min_ns = ns;
  if (ns > max_ns) max_ns = ns;
  ++count;
  sum_ns += ns;
  if (fine.empty()) fine.assign(kLatencyBuckets, 0);
  ++fine[latency_bucket(ns)];
}

uint64_t percentile(const LatencySummary& s, double q) {
  uint64_t total = 0;
  for (uint64_t c : s.fine) total += c;
  if (total == 0) return 0;
  double rank = q * static_cast<double>(total);
  uint64_t seen = 0;
  for (uint32_t b = 0; b < s.fine.size(); ++b) {
    uint64_t c = s.fine[b];
    if (c == 0) continue;
    if (static_cast<double>(seen + c) >= rank) {
      BucketRange r = latency_bucket_range(b);
      double frac =
          std::clamp((rank - static_cast<double>(seen)) / static_cast<double>(c), 0.0, 1.0);
      auto v = static_cast<uint64_t>(static_cast<double>(r.lo) +
                                     frac * static_cast<double>(r.hi - r.lo));
      if (s.count) v = std::clamp(v, s.min_ns, s.max_ns);
      return v;
    }
    seen += c;
  }
  return s.max_ns;
}

std::vector<BucketCount> log2_buckets(const LatencySummary& s) {
  std::map<uint32_t, uint64_t> log2;  // exponent -> count; value 0 under exponent 0 too
  for (uint32_t b = 0; b < s.fine.size(); ++b)
    if (s.fine[b]) log2[log2_of(latency_bucket_range(b).lo)] += s.fine[b];
  std::vector<BucketCount> out;
  for (auto [e, c] : log2)
    out.push_back(
        {e == 0 ? 0 : uint64_t{1} << e, e >= 63 ? UINT64_MAX : uint64_t{1} << (e + 1), c});
  return out;
}

std::vector<BucketCount> fine_buckets(const LatencySummary& s) {
  std::vector<BucketCount> out;
  for (uint32_t b = 0; b < s.fine.size(); ++b) {
    if (!s.fine[b]) continue;
    BucketRange r = latency_bucket_range(b);
    out.push_back({r.lo, r.hi, s.fine[b]});
  }
  return out;
}

}  // namespace gotap
