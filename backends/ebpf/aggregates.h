// Reading the in-kernel aggregates (per-function counts, latency stats and histograms, and the
// global counters) out of the BPF maps: once at the end of a run, and on every --prometheus
// scrape while it runs.
#pragma once

#include <cstdint>

#include "core/events/latency.h"

namespace gotap::ebpf {

// The sum over CPUs of a per-CPU u64 array's entry `key` (0 when unreadable).
uint64_t read_percpu_u64(int fd, uint32_t key);
// Function `func`'s latency summary from lat_stats (per-CPU) and lat_hist; count 0 when
// it has none.
LatencySummary read_latency(int stats_fd, int hist_fd, uint32_t func);

}  // namespace gotap::ebpf
