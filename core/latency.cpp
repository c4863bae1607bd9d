#include "core/latency.h"

#include <algorithm>
#include <map>

namespace gotap {

Event latency_event(const std::string& func, std::vector<uint64_t>& d) {
  std::sort(d.begin(), d.end());
  Event ev = {{"event", "latency"}, {"func", func}, {"count", d.size()}};
  if (d.empty()) return ev;
  // Nearest rank, as the eBPF backend's histograms report it.
  auto pct = [&](double q) { return d[std::min(d.size() - 1, size_t(q * (d.size() - 1) + 0.5))]; };
  Event buckets = Event::array();
  std::map<int, uint64_t> b;
  for (uint64_t v : d) b[v ? 63 - __builtin_clzll(v) : 0]++;
  for (auto [lg, c] : b)
    buckets.push_back(
        {{"lo_ns", lg ? (1ull << lg) : 0}, {"hi_ns", (2ull << lg) - 1}, {"count", c}});
  ev["min_ns"] = d.front();
  ev["max_ns"] = d.back();
  ev["p50_ns"] = pct(0.5);
  ev["p90_ns"] = pct(0.9);
  ev["p99_ns"] = pct(0.99);
  ev["buckets"] = std::move(buckets);
  return ev;
}

}  // namespace gotap
