#include "backends/ebpf/aggregates.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
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

// Entries [first, first + n) of an array map, `stride` bytes each (a per-CPU array's entry is
// every CPU's value), into `out`. BPF_MAP_LOOKUP_BATCH reads thousands a system call (Linux
// 5.6+; a whole binary's 46,129 functions took 100 ms one lookup each); where the kernel has
// no batches, or an entry cannot be read in one, the rest is read one entry at a time. False
// when an entry could not be read at all (it is left zero).
bool read_array(int fd, uint32_t first, uint32_t n, size_t stride, uint8_t* out) {
  constexpr uint32_t kChunk = 4096;
  std::vector<uint32_t> keys(std::min(kChunk, n));
  uint32_t done = 0, token = 0;
  bool batches = n > 1;
  while (batches && done < n) {
    uint32_t count = std::min<uint32_t>(kChunk, n - done);
    // The batch starts after in_batch's key: none for entry 0.
    uint32_t after = first + done - 1;
    LIBBPF_OPTS(bpf_map_batch_opts, o);
    const int err = bpf_map_lookup_batch(fd, first + done == 0 ? nullptr : &after, &token,
                                         keys.data(), out + size_t(done) * stride, &count, &o);
    const bool end = err != 0 && errno == ENOENT;
    if (err != 0 && !end) break;
    // An array's entries come in key order from in_batch on; anything else is read again
    // one entry at a time.
    uint32_t good = 0;
    while (good < count && keys[good] == first + done + good) ++good;
    done += good;
    if (end || good < count || count == 0) break;
  }
  bool ok = true;
  for (; done < n; ++done) {
    uint32_t key = first + done;
    if (bpf_map_lookup_elem(fd, &key, out + size_t(done) * stride) != 0) ok = false;
  }
  return ok;
}

}  // namespace

std::vector<uint64_t> read_percpu_u64_all(int fd, uint32_t n) {
  std::vector<uint64_t> sums(n, 0);
  static const int ncpu = libbpf_num_possible_cpus();
  if (ncpu <= 0 || n == 0) return sums;
  std::vector<uint64_t> vals(size_t(n) * size_t(ncpu), 0);
  read_array(fd, 0, n, sizeof(uint64_t) * size_t(ncpu), reinterpret_cast<uint8_t*>(vals.data()));
  // Per-CPU counters may wrap below zero (count's UNCOUNT sites); their sum is still exact.
  for (uint32_t k = 0; k < n; ++k)
    for (int c = 0; c < ncpu; ++c) sums[k] += vals[size_t(k) * size_t(ncpu) + size_t(c)];
  return sums;
}

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
  read_array(hist_fd, func * GOTAP_NBUCKETS, GOTAP_NBUCKETS, sizeof(uint64_t),
             reinterpret_cast<uint8_t*>(s.fine.data()));
  return s;
}

std::vector<std::pair<uint32_t, LatencySummary>> read_latency_all(int stats_fd, int hist_fd,
                                                                  uint32_t n) {
  std::vector<std::pair<uint32_t, LatencySummary>> out;
  static const int ncpu = libbpf_num_possible_cpus();
  if (ncpu <= 0 || n == 0) return out;
  // Only the functions with a call have a histogram worth reading.
  std::vector<gotap_lat_stats> st(size_t(n) * size_t(ncpu));
  read_array(stats_fd, 0, n, sizeof(gotap_lat_stats) * size_t(ncpu),
             reinterpret_cast<uint8_t*>(st.data()));
  for (uint32_t f = 0; f < n; ++f)
    for (int c = 0; c < ncpu; ++c)
      if (st[size_t(f) * size_t(ncpu) + size_t(c)].count) {
        out.emplace_back(f, read_latency(stats_fd, hist_fd, f));
        break;
      }
  return out;
}

std::map<uint32_t, std::vector<ProcessCount>> read_proc_counts(int fd) {
  std::map<uint32_t, std::vector<ProcessCount>> out;
  for_each_entry<gotap_proc_key, gotap_proc_count>(
      fd, [&](const gotap_proc_key& k, const gotap_proc_count& v) {
        if (!v.count) return;
        out[k.func].push_back({static_cast<int64_t>(k.tgid),
                               std::string(v.comm, strnlen(v.comm, sizeof(v.comm))), v.count});
      });
  for (auto& [f, procs] : out)
    std::sort(procs.begin(), procs.end(), [](const ProcessCount& a, const ProcessCount& b) {
      return a.count != b.count ? a.count > b.count : a.pid < b.pid;
    });
  return out;
}

}  // namespace gotap::ebpf
