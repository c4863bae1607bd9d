// What the probe program cost the traced program: the kernel's run time and run count of a
// BPF program, kept while kernel.bpf_stats_enabled is 1 (or a BPF_ENABLE_STATS fd is held).
// The summary reports them (bpf_run_ns, bpf_runs) when the kernel kept them; bench/limits.sh
// reads them to measure --stack's cost in the kernel alone.
#pragma once

#include <cstdint>
#include <optional>

namespace gotap::ebpf {

struct ProgStats {
  uint64_t run_ns = 0;
  uint64_t runs = 0;
};

// nullopt when the kernel kept no statistics for the program (stats off, or never run).
std::optional<ProgStats> prog_stats(int prog_fd);

}  // namespace gotap::ebpf
