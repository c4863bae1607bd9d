#include "backends/ebpf/aggregates.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <vector>

#include "gotap_shared.h"

namespace gotap::ebpf {

namespace {

// Sums a per-CPU value array entry into one T with `add`.
template <typename T, typename Add>
bool read_percpu(int fd, uint32_t key, T& out, Add add) {
  static const int ncpu = libbpf_num_possible_cpus();
  if (ncpu <= 0) return false;
  std::vector<T> vals(static_cast<size_t>(ncpu));
  if (bpf_map_lookup_elem(fd, &key, vals.data()) != 0) return false;
  out = T{};
  for (const T& v : vals) add(out, v);
  return true;
}

}  // namespace

uint64_t read_percpu_u64(int fd, uint32_t key) {
  uint64_t n = 0;
  // Per-CPU counters may wrap below zero (count's UNCOUNT sites); their sum is still exact.
  read_percpu<uint64_t>(fd, key, n, [](uint64_t& a, uint64_t b) { a += b; });
  return n;
}

LatencySummary read_latency(int stats_fd, int hist_fd, uint32_t func) {
  gotap_lat_stats st{};
  read_percpu<gotap_lat_stats>(stats_fd, func, st,
                               [](gotap_lat_stats& a, const gotap_lat_stats& b) {
                                 if (!b.count) return;
                                 if (!a.count || b.min_ns < a.min_ns) a.min_ns = b.min_ns;
                                 if (b.max_ns > a.max_ns) a.max_ns = b.max_ns;
                                 a.count += b.count;
                                 a.sum_ns += b.sum_ns;
                               });
  LatencySummary s;
  if (st.count == 0) return s;
  s.count = st.count;
  s.sum_ns = st.sum_ns;
  s.min_ns = st.min_ns;
  s.max_ns = st.max_ns;
  s.fine.assign(GOTAP_NBUCKETS, 0);
  for (uint32_t b = 0; b < GOTAP_NBUCKETS; ++b) {
    uint32_t key = func * GOTAP_NBUCKETS + b;
    bpf_map_lookup_elem(hist_fd, &key, &s.fine[b]);
  }
  return s;
}

}  // namespace gotap::ebpf
