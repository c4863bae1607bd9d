// Where the trampoline backend jumps from, for one planned function (jump_site.h): its stack
// check (a 6-byte jbe's `jno`, or a short check's one byte) and, for `latency`, each RET's
// epilogue. One decision for the backend's plan (backends/trampoline/patch_set.h) and for
// `funcs --json --backend trampoline`, which shows it per site (`probe_via`).
#pragma once

#include <string>
#include <vector>

#include "core/binary/elf_file.h"
#include "core/plan/jump_site.h"
#include "core/plan/plan.h"

namespace gotap {

struct TrampolineSites {
  JumpSite entry;            // ok() when the entry takes a jump
  bool short_check = false;  // stack_check_short_site: its jump is one byte
  std::string refused;       // why the entry takes none: the function is not counted
  // One per FuncPlan::ret_sites, in order: ret_epilogue_site of each (none when the entry
  // is refused, or a tail call leaves the function without its RET).
  std::vector<JumpSite> rets;
  // Why the function is not timed although counted: a tail call, no RET, or the first RET
  // that takes no jump ("" when every one does).
  std::string untimed;
  Bytes code;  // the function's bytes in the file
};

TrampolineSites trampoline_sites(const ElfFile* elf, const FuncPlan& f);

}  // namespace gotap
