// --max-overhead on the eBPF backend: what each function's probes cost the traced program,
// from the per-site run time the BPF program measures (bpf/overhead.h) plus the uprobe trap
// per hit, which the program cannot see (it runs after the trap). The budget itself is
// core's (core/events/overhead_budget.h).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backends/ebpf/probe_config.h"
#include "core/plan/binary_view.h"

struct gotap_bpf;

namespace gotap::ebpf {

// The uprobe trap's cost per hit beyond the BPF program's run time, as `gotap bench` measures
// it with an empty program (docs/benchmarks.md, "eBPF backend", re-run of 2026-11-23 on this
// machine kind: 813 ns at an emulated site, 13360 ns at a single-stepped RET). The lower
// figures of the recordings are used, so that only a function surely over budget is
// detached. GOTAP_TRAP_NS=EMULATED,STEPPED overrides them (another host).
struct TrapCost {
  uint64_t emulated_ns = 800;
  uint64_t stepped_ns = 13000;
};
TrapCost trap_cost();

// Whether the kernel emulates the probed instruction (x86 uprobes: push reg, nop, jmp, call,
// jcc) instead of single-stepping a copy of it: an emulated hit costs ~16x less.
bool uprobe_emulates(std::span<const uint8_t> insn);

class EbpfOverhead {
 public:
  EbpfOverhead(const ProbeConfig& cfg, const BinaryView& bin, TrapCost trap = trap_cost());
  // Before load: turns the kernel's measuring on and sizes its map.
  static void configure(gotap_bpf* skel, const ProbeConfig& cfg, bool on);
  // Before func's uprobes go: its sites' hits do nothing from now on, so that the removal,
  // one site at a time, reports no return whose entry probe went first. func: a slot().
  void silence(gotap_bpf* skel, uint32_t func) const;
  // The running totals of each function's probe cost, in ns, and of its probe hits
  // (index = func_id), and last those of the goroutine probes (kGoroutineProbes).
  void costs(gotap_bpf* skel, std::vector<uint64_t>& cost, std::vector<uint64_t>& hits) const;
  // The budget's slot of a site's func_id: itself for a function, funcs.size() for every
  // goroutine probe.
  uint32_t slot(uint32_t func_id) const;

 private:
  const ProbeConfig& cfg_;
  std::vector<uint64_t> trap_ns_;  // per site
};

}  // namespace gotap::ebpf
