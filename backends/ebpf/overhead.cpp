#include "backends/ebpf/overhead.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <algorithm>
#include <cstdlib>

#include "gotap.skel.h"

namespace gotap::ebpf {

namespace {

// bpf/overhead.h's struct gotap_site_cost (the BPF side's map value).
struct SiteCost {
  uint64_t ns = 0;
  uint64_t hits = 0;
};
static_assert(sizeof(SiteCost) == 16);

}  // namespace

TrapCost trap_cost() {
  TrapCost t;
  if (const char* e = getenv("GOTAP_TRAP_NS")) {
    char* end = nullptr;
    const uint64_t a = strtoull(e, &end, 10);
    if (end && *end == ',') {
      const uint64_t b = strtoull(end + 1, nullptr, 10);
      if (a && b) t = {a, b};
    }
  }
  return t;
}

bool uprobe_emulates(std::span<const uint8_t> insn) {
  if (insn.empty()) return false;
  size_t i = 0;
  if (insn[0] == 0x41 && insn.size() > 1) i = 1;  // REX.B: push r8-r15
  const uint8_t op = insn[i];
  if (op >= 0x50 && op <= 0x57) return true;  // push reg
  if (i) return false;
  if (op == 0x90 || op == 0xe8 || op == 0xe9 || op == 0xeb) return true;       // nop, call, jmp
  if (op >= 0x70 && op <= 0x7f) return true;                                   // jcc rel8
  return op == 0x0f && insn.size() > 1 && insn[1] >= 0x80 && insn[1] <= 0x8f;  // jcc rel32
}

EbpfOverhead::EbpfOverhead(const ProbeConfig& cfg, const BinaryView& bin, TrapCost trap)
    : cfg_(cfg), trap_ns_(cfg.sites.size()) {
  for (size_t i = 0; i < cfg.sites.size(); ++i)
    trap_ns_[i] =
        uprobe_emulates(bin.elf->read(cfg.sites[i].addr, 16)) ? trap.emulated_ns : trap.stepped_ns;
}

void EbpfOverhead::configure(gotap_bpf* skel, const ProbeConfig& cfg, bool on) {
  skel->rodata->measure_cost = on ? 1 : 0;
  const uint32_t n = on ? std::max<uint32_t>(1, static_cast<uint32_t>(cfg.sites.size())) : 1;
  bpf_map__set_max_entries(skel->maps.site_cost, n);
  bpf_map__set_max_entries(skel->maps.site_off, n);
}

uint32_t EbpfOverhead::slot(uint32_t func_id) const {
  const uint32_t n = static_cast<uint32_t>(cfg_.funcs.size());
  return func_id < n || func_id >= GOTAP_FUNC_GSTATUS ? std::min(func_id, n) : UINT32_MAX;
}

void EbpfOverhead::silence(gotap_bpf* skel, uint32_t func) const {
  const int fd = bpf_map__fd(skel->maps.site_off);
  const uint32_t off = 1;
  for (uint32_t i = 0; i < cfg_.sites.size(); ++i)
    if (slot(cfg_.sites[i].func_id) == func) bpf_map_update_elem(fd, &i, &off, BPF_ANY);
}

void EbpfOverhead::costs(gotap_bpf* skel, std::vector<uint64_t>& out,
                         std::vector<uint64_t>& hits) const {
  out.assign(cfg_.funcs.size() + 1, 0);
  hits.assign(cfg_.funcs.size() + 1, 0);
  static const int ncpu = libbpf_num_possible_cpus();
  if (ncpu <= 0) return;
  const int fd = bpf_map__fd(skel->maps.site_cost);
  std::vector<SiteCost> vals(static_cast<size_t>(ncpu));
  for (uint32_t i = 0; i < cfg_.sites.size(); ++i) {
    const uint32_t f = slot(cfg_.sites[i].func_id);
    if (f >= out.size() || bpf_map_lookup_elem(fd, &i, vals.data()) != 0) continue;
    for (const SiteCost& v : vals) {
      out[f] += v.ns + v.hits * trap_ns_[i];
      hits[f] += v.hits;
    }
  }
}

}  // namespace gotap::ebpf
