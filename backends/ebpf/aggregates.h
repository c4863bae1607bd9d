// Reading the in-kernel aggregates (per-function counts, latency stats and histograms, and the
// global counters) out of the BPF maps: once at the end of a run, and on every --prometheus
// scrape while it runs.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "core/events/latency.h"

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

}  // namespace gotap::ebpf
