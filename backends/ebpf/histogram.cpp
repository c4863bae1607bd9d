#include "backends/ebpf/histogram.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "gotap_shared.h"

namespace gotap::ebpf {

BucketRange bucket_range(uint32_t b) {
  if (b < 8) return {b, uint64_t{b} + 1};
  uint32_t e = b / 8 + 2, sub = b % 8;
  uint64_t lo = (uint64_t{8} + sub) << (e - 3);
  // The top bucket's end does not fit in 64 bits.
  uint64_t hi = e == 63 && sub == 7 ? UINT64_MAX : (uint64_t{9} + sub) << (e - 3);
  return {lo, hi};
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
      BucketRange r = bucket_range(b);
      double frac = c ? (rank - static_cast<double>(seen)) / static_cast<double>(c) : 0;
      frac = std::clamp(frac, 0.0, 1.0);
      auto v = static_cast<uint64_t>(static_cast<double>(r.lo) +
                                     frac * static_cast<double>(r.hi - r.lo));
      if (s.count) v = std::clamp(v, s.min_ns, s.max_ns);
      return v;
    }
    seen += c;
  }
  return s.max_ns;
}

Event latency_event(const std::string& func, const LatencySummary& s) {
  std::map<uint32_t, uint64_t> log2;  // exponent -> count; value 0 under exponent 0 too
  for (uint32_t b = 0; b < s.fine.size(); ++b) {
    if (!s.fine[b]) continue;
    uint64_t lo = bucket_range(b).lo;
    log2[lo ? gotap_log2(lo) : 0] += s.fine[b];
  }
  auto buckets = nlohmann::json::array();
  for (auto [e, c] : log2) {
    uint64_t lo = e == 0 ? 0 : uint64_t{1} << e;
    uint64_t hi = e >= 63 ? UINT64_MAX : uint64_t{1} << (e + 1);
    buckets.push_back({{"lo_ns", lo}, {"hi_ns", hi}, {"count", c}});
  }
  // The fine buckets too: log2 alone is too coarse to tell 8 ms from 15 ms.
  auto fine = nlohmann::json::array();
  for (uint32_t b = 0; b < s.fine.size(); ++b) {
    if (!s.fine[b]) continue;
    BucketRange r = bucket_range(b);
    fine.push_back({{"lo_ns", r.lo}, {"hi_ns", r.hi}, {"count", s.fine[b]}});
  }
  return {{"event", "latency"},
          {"func", func},
          {"count", s.count},
          {"min_ns", s.min_ns},
          {"max_ns", s.max_ns},
          {"avg_ns", s.count ? s.sum_ns / s.count : 0},
          {"p50_ns", percentile(s, 0.50)},
          {"p90_ns", percentile(s, 0.90)},
          {"p99_ns", percentile(s, 0.99)},
          {"buckets", buckets},
          {"fine_buckets", fine}};
}

}  // namespace gotap::ebpf
