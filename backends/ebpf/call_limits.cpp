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
  bpf_map__set_max_entries(skel->maps.errors, nfuncs);
  // Read and written only with --rate (rate_allows, and the summary's rate_limited).
  bpf_map__set_max_entries(skel->maps.rate_state, rate_per_s ? nfuncs : 1);
  bpf_map__set_max_entries(skel->maps.rate_dropped, rate_per_s ? nfuncs : 1);
}

Result<void> write_site_extra(gotap_bpf* skel, const ProbeConfig& cfg) {
  // A whole binary has 10,000s of entry sites with a return offset (caddy: 45,000; one
  // update each took 80 ms of arming here).
  MapWriter<gotap_site_extra> w(bpf_map__fd(skel->maps.site_extra));
  for (uint32_t i = 0; i < cfg.sites.size(); ++i) {
    const SiteConfig& s = cfg.sites[i];
    if (s.err_word.src == GOTAP_SRC_NONE && s.ret_off == 0) continue;  // the map's zeroes
    gotap_site_extra x{};
    x.err = s.err_word;
    x.ret_off = s.ret_off;
    GOTAP_TRY(w.put(i, x));
  }
  return w.flush();
}

std::optional<uint64_t> read_failed(gotap_bpf* skel, const ProbeConfig& cfg, uint32_t f) {
  if (f >= cfg.funcs.size() || !cfg.funcs[f].has_error) return std::nullopt;
  return read_percpu_u64(bpf_map__fd(skel->maps.errors), f);
}

uint64_t read_rate_limited(gotap_bpf* skel, uint32_t f) {
  return read_percpu_u64(bpf_map__fd(skel->maps.rate_dropped), f);
}

}  // namespace gotap::ebpf
