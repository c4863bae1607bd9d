// The eBPF side of --if: each function's compiled condition into the `conds` map, and the
// size of `held`, where entry events wait for a condition decided at the return.
#pragma once

#include <cstdint>

#include "core/backend.h"
#include "core/cond/condition.h"

struct bpf_map;

namespace gotap::ebpf {

// Entries `held` needs: the calls in flight whose entry waits (trace mode only).
uint32_t held_capacity(const cond::Condition* cond, Mode mode);

// Writes every function's program; type descriptors' addresses are moved by the load bias
// of `tgid` (0: none known, as with --all).
Result<void> load_conditions(bpf_map* conds, const cond::Condition& cond, const ProbePlan& plan,
                             int tgid);

}  // namespace gotap::ebpf
