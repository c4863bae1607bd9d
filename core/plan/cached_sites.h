// The plan cache's sites, checked against the binary before any is used: the cache is a file
// the user (or whoever wrote as them) can rewrite with a valid checksum, and a site that is
// not where planning would put one becomes an int3 or a uprobe in data or mid-instruction.
// Every site a backend probes (entry probe, RET sites, tail jumps, the morestack CALL, inline
// sites) must lie in the code of the function it belongs to, as the pclntab bounds it, on an
// instruction boundary of a linear decode from that function's entry (the decode planning
// does), and be an instruction of its kind: a RET, a JMP, the stack check's conditional jump,
// a `push rbp`, a CALL; a function's entry and end must be the pclntab's. The cost is one
// length decode of each function the plan holds, on every CPU, none of planning's analysis:
// about 60 ms of CPU for the whole of caddy 2.6 (36 MB), which takes 800 to plan
// (docs/benchmarks.md).
#pragma once

#include <string>
#include <vector>

#include "core/plan/plan.h"

namespace gotap {

class ElfFile;
class Pclntab;

// "" when every site of `funcs` passes; else what the first that fails is and why.
std::string check_cached_sites(const ElfFile& elf, const Pclntab& pcln,
                               const std::vector<FuncPlan>& funcs);

}  // namespace gotap
