#include "backends/ebpf/call_limits.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <algorithm>

#include "backends/ebpf/aggregates.h"
#include "backends/ebpf/map_writer.h"
#include "gotap.skel.h"
#include "gotap_limits.h"

namespace gotap::ebpf {

void size_limit_maps(gotap_bpf* skel, const ProbeConfig& cfg, uint32_t rate_per_s,
                     uint32_t stack_depth) {
  const uint32_t nsites = std::max<uint32_t>(1, static_cast<uint32_t>(cfg.sites.size()));
  const uint32_t nfuncs = std::max<uint32_t>(1, static_cast<uint32_t>(cfg.funcs.size()));
  skel->rodata->rate_per_s = rate_per_s;
  skel->rodata->stack_depth = stack_depth;
  bpf_map__set_max_entries(skel->maps.site_extra, nsites);
  bpf_map__set_max_entries(skel->maps.errors, std::max<uint32_t>(1, cfg.error_funcs));
  // Read and written only with --rate (rate_allows, and the summary's rate_limited).
  bpf_map__set_max_entries(skel->maps.rate_state, rate_per_s ? nfuncs : 1);
  bpf_map__set_max_entries(skel->maps.rate_dropped, rate_per_s ? nfuncs : 1);
}

gotap_site_extra site_extra(const ProbeConfig& cfg, uint32_t i, bool link_addrs) {
  const SiteConfig& s = cfg.sites[i];
  gotap_site_extra x{};
  x.err = s.err_word;
  x.ret_off = s.ret_off;
  if (link_addrs) x.link_addr = s.addr;
  if (s.err_word.src != GOTAP_SRC_NONE) x.err_slot = cfg.funcs[s.func_id].err_slot;
  return x;
}

Result<void> write_site_extra(gotap_bpf* skel, const ProbeConfig& cfg, bool link_addrs) {
  // A whole binary has 10,000s of entry sites with a return offset (caddy: 45,000; one
  // update each took 80 ms of arming here).
  MapWriter<gotap_site_extra> w(bpf_map__fd(skel->maps.site_extra));
  for (uint32_t i = 0; i < cfg.sites.size(); ++i) {
    const SiteConfig& s = cfg.sites[i];
    if (s.err_word.src == GOTAP_SRC_NONE && s.ret_off == 0 && !link_addrs)
      continue;  // the map's zeroes
    GOTAP_TRY(w.put(i, site_extra(cfg, i, link_addrs)));
  }
  return w.flush();
}

std::vector<std::optional<uint64_t>> read_failed_all(gotap_bpf* skel, const ProbeConfig& cfg) {
  std::vector<std::optional<uint64_t>> out(cfg.funcs.size());
  const std::vector<uint64_t> by_slot =
      read_percpu_u64_all(bpf_map__fd(skel->maps.errors), cfg.error_funcs);
  for (size_t f = 0; f < cfg.funcs.size(); ++f)
    if (cfg.funcs[f].has_error && cfg.funcs[f].err_slot < by_slot.size())
      out[f] = by_slot[cfg.funcs[f].err_slot];
  return out;
}

}  // namespace gotap::ebpf
