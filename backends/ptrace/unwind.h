// --stack N: the call stack at a probe hit, walked with Go's frame pointers (every Go
// function with a frame saves RBP) and symbolized through the plan's BinaryView, with inlined
// frames.
#pragma once

#include <sys/user.h>

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "backends/ptrace/memory.h"
#include "core/plan/binary_view.h"
#include "core/plan/stack_symbols.h"

namespace gotap::ptrace {

// ret_addr_slot: where the hit function's return address is (RSP + the pcsp delta at the
// probed pc); 0 when unknown (then only the RBP chain is walked).
std::vector<uint64_t> walk_frames(TraceeMemory& mem, const user_regs_struct& regs,
                                  uint64_t ret_addr_slot, int max);

// The frames of those pcs: symbolize() of core/plan/stack_symbols.h, shared with eBPF.

}  // namespace gotap::ptrace
