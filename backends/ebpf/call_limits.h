// The loader's side of bpf/call_limits.h: sizing the error-result and --rate maps, writing
// where each RET site finds its error word, and reading the failed and rate-limited counts.
#pragma once

#include <cstdint>
#include <optional>

#include "backends/ebpf/probe_config.h"
#include "core/model/result.h"

struct gotap_bpf;

namespace gotap::ebpf {

// Before load: map sizes and the --rate constant.
void size_limit_maps(gotap_bpf* skel, const ProbeConfig& cfg, uint32_t rate_per_s);
// After load: err_words[cookie] for every RET site that checks an error result.
Result<void> write_err_words(gotap_bpf* skel, const ProbeConfig& cfg);
// Calls of function `f` that returned a non-nil error; nullopt when it has no error result.
std::optional<uint64_t> read_failed(gotap_bpf* skel, const ProbeConfig& cfg, uint32_t f);
// Calls of function `f` that --rate left out.
uint64_t read_rate_limited(gotap_bpf* skel, uint32_t f);

}  // namespace gotap::ebpf
