// A gccgo program's goroutine ids on the eBPF backend: where libgo's g is in the traced
// process (core/plan/gccgo_g.h), for the BPF program's constants. In libgo.so that is known
// only once ld.so has loaded and relocated libgo: a launched program is let run from system
// call to system call until then, before its first instruction; an attached one already is.
#pragma once

#include <optional>

#include "backends/ebpf/target.h"
#include "core/plan/gccgo_g.h"
#include "core/plan/plan.h"

namespace gotap::ebpf {

// nullopt when the plan reads no gccgo g, or it cannot be found (said on stderr unless
// quiet: every process (--all), an unknown libgo, a process that never loads it).
std::optional<GccgoGAt> gccgo_goids(const ProbePlan& plan, TargetProcess& target, bool quiet);

}  // namespace gotap::ebpf
