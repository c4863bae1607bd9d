// The CALL to runtime.morestack on a function's stack-check slow path. Each time it runs, the
// function re-enters from the top and its entry probe fires again; count mode probes this
// call (a kernel-emulated CALL, cheap) and subtracts, instead of pairing entries with RETs
// (single-stepped, costly).
#pragma once

#include <cstdint>
#include <optional>

#include "core/binary/elf_file.h"
#include "core/plan/plan.h"

namespace gotap::ebpf {

std::optional<uint64_t> morestack_call(const ElfFile& elf, const FuncPlan& f);

}  // namespace gotap::ebpf
