// The loader's side of bpf/call_limits.h and bpf/stack_walk.h: sizing the error-result and
// --rate maps, writing per site where its error word and return address are, and reading
// the failed and rate-limited counts.
#pragma once

#include <cstdint>
#include <optional>

#include "backends/ebpf/probe_config.h"
#include "core/model/result.h"

struct gotap_bpf;

namespace gotap::ebpf {

// Before load: map sizes, the --rate and --stack constants.
void size_limit_maps(gotap_bpf* skel, const ProbeConfig& cfg, uint32_t rate_per_s,
                     uint32_t stack_depth);
// After load: site_extra[cookie] for every site (error word, return address slot).
Result<void> write_site_extra(gotap_bpf* skel, const ProbeConfig& cfg);
// Calls of function `f` that returned a non-nil error; nullopt when it has no error result.
std::optional<uint64_t> read_failed(gotap_bpf* skel, const ProbeConfig& cfg, uint32_t f);
// Calls of function `f` that --rate left out.
uint64_t read_rate_limited(gotap_bpf* skel, uint32_t f);

}  // namespace gotap::ebpf
