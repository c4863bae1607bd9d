// The ptrace backend's interpreter of a compiled condition (bpf/gotap_cond.h): the same
// bytecode and the same results as bpf/cond_vm.h in the kernel, on the stopped tracee's
// registers and memory (and its X registers, which BPF cannot read).
#pragma once

#include <cstdint>

#include "core/decode/value_decoder.h"
#include "gotap_cond.h"

namespace gotap::cond {

struct EvalEnv {
  const RegState* regs = nullptr;  // sp: RSP at the probe
  MemoryReader* mem = nullptr;
  int64_t goid = 0;
  uint64_t duration_ns = 0;
  uint64_t bias = 0;            // load bias: type descriptors' addresses in the process
  uint64_t bits = 0;            // the entry's parts: set by the entry program, read by the return's
  ValueDecoder* dec = nullptr;  // m[k]: walks the map (none: m[k] is never found)
  uint64_t vals[GOTAP_COND_VALS] = {};  // arguments kept for the return (GOTAP_COP_SAVE)
};

// Runs the entry program (at_ret false) or the return program; the top of the stack is the
// verdict (an entry program of an AT_RET condition only sets bits).
bool run(const gotap_cond& p, bool at_ret, EvalEnv& env);

}  // namespace gotap::cond
