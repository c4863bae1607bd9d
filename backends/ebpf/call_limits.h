// The loader's side of bpf/call_limits.h and bpf/stack_walk.h: sizing the error-result and
// --rate maps, writing per site where its error word and return address are, and reading
// the failed counts.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "backends/ebpf/probe_config.h"
#include "core/model/result.h"
#include "gotap_limits.h"

struct gotap_bpf;

namespace gotap::ebpf {

// Before load: map sizes, the --rate and --stack constants.
void size_limit_maps(gotap_bpf* skel, const ProbeConfig& cfg, uint32_t rate_per_s,
                     uint32_t stack_depth);
// Site i's entry in site_extra: its error word and the function's slot in `errors`, its
// return address slot.
gotap_site_extra site_extra(const ProbeConfig& cfg, uint32_t i, bool link_addrs = false);
// After load: site_extra[cookie] for every site.
// `link_addrs`: each site's link-time address too (GOTAP_GCCGO_G_DTV_SELF).
Result<void> write_site_extra(gotap_bpf* skel, const ProbeConfig& cfg, bool link_addrs = false);
// Per function (index f), its calls that returned a non-nil error; nullopt for a function
// without an error result. Read in a few system calls: the summary, a scrape.
std::vector<std::optional<uint64_t>> read_failed_all(gotap_bpf* skel, const ProbeConfig& cfg);

}  // namespace gotap::ebpf
