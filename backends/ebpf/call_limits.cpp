#include "backends/ebpf/call_limits.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <algorithm>

#include "backends/ebpf/aggregates.h"
#include "gotap.skel.h"

namespace gotap::ebpf {

void size_limit_maps(gotap_bpf* skel, const ProbeConfig& cfg, uint32_t rate_per_s) {
  const uint32_t nsites = std::max<uint32_t>(1, static_cast<uint32_t>(cfg.sites.size()));
  const uint32_t nfuncs = std::max<uint32_t>(1, static_cast<uint32_t>(cfg.funcs.size()));
  skel->rodata->rate_per_s = rate_per_s;
  bpf_map__set_max_entries(skel->maps.err_words, nsites);
  bpf_map__set_max_entries(skel->maps.errors, nfuncs);
  bpf_map__set_max_entries(skel->maps.rate_state, nfuncs);
  bpf_map__set_max_entries(skel->maps.rate_dropped, nfuncs);
}

Result<void> write_err_words(gotap_bpf* skel, const ProbeConfig& cfg) {
  const int fd = bpf_map__fd(skel->maps.err_words);
  for (uint32_t i = 0; i < cfg.sites.size(); ++i) {
    if (cfg.sites[i].err_word.src == GOTAP_SRC_NONE) continue;
    if (bpf_map_update_elem(fd, &i, &cfg.sites[i].err_word, BPF_ANY) != 0)
      return errno_error(ErrorKind::Runtime, "cannot configure the error check of probe {}", i);
  }
  return {};
}

std::optional<uint64_t> read_failed(gotap_bpf* skel, const ProbeConfig& cfg, uint32_t f) {
  if (f >= cfg.funcs.size() || !cfg.funcs[f].has_error) return std::nullopt;
  return read_percpu_u64(bpf_map__fd(skel->maps.errors), f);
}

uint64_t read_rate_limited(gotap_bpf* skel, uint32_t f) {
  return read_percpu_u64(bpf_map__fd(skel->maps.rate_dropped), f);
}

}  // namespace gotap::ebpf
