// Reading the in-kernel aggregates (per-function counts, latency stats and histograms, and the
// global counters) out of the BPF maps: once at the end of a run, and on every --prometheus
// scrape while it runs.
#pragma once

#include <bpf/bpf.h>

#include <cerrno>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "core/events/latency.h"
#include "core/events/typed_events.h"

namespace gotap::ebpf {

// The sum over CPUs of a per-CPU u64 array's entry `key` (0 when unreadable).
uint64_t read_percpu_u64(int fd, uint32_t key);
// The same for entries [0, n), in a few system calls (batches) where the kernel allows.
std::vector<uint64_t> read_percpu_u64_all(int fd, uint32_t n);
// Function `func`'s latency summary from lat_stats (per-CPU) and lat_hist; count 0 when
// it has none.
LatencySummary read_latency(int stats_fd, int hist_fd, uint32_t func);
// The summaries of functions [0, n) that have a call, with their function's index.
std::vector<std::pair<uint32_t, LatencySummary>> read_latency_all(int stats_fd, int hist_fd,
                                                                  uint32_t n);

// count --all: proc_counts's calls by function index, each function's processes most calls
// first (ties by pid). A process whose calls summed to 0 (an UNCOUNT site's -1 met its +1) is
// left out.
std::map<uint32_t, std::vector<ProcessCount>> read_proc_counts(int fd);

// fn(key, value) for every entry of a hash map, one lookup each (keys from get_next_key; an
// entry deleted meanwhile is skipped). False when the walk stopped before the map's end.
template <typename K, typename V, typename Fn>
bool for_each_entry(int fd, Fn&& fn) {
  K key{}, next{};
  const void* prev = nullptr;
  while (bpf_map_get_next_key(fd, prev, &next) == 0) {
    V v{};
    if (bpf_map_lookup_elem(fd, &next, &v) == 0) fn(next, v);
    key = next;
    prev = &key;
  }
  return errno == ENOENT;
}

}  // namespace gotap::ebpf
