// Where the parameters and results of a gccgo function live: gccgo follows the System V
// AMD64 C calling convention (checked on gccgo-12's code, e.g. a string argument in
// rdx:rcx after a bool in sil, a 24-byte slice or results struct in memory with the
// caller's buffer address in rdi and back in rax).
#pragma once

#include <vector>

#include "core/binary/gccgo_dwarf.h"
#include "core/plan/abi.h"

namespace gotap {

struct SysvAssignment {
  std::vector<ParamLoc> args, results;
};

// Integer args in rdi, rsi, rdx, rcx, r8, r9; float args in xmm0-7; an aggregate of up to
// two eightbytes in registers only when all of it fits, else on the stack from entry
// RSP+8. A result of up to 16 bytes comes back in rax/rdx (INTEGER eightbytes) and
// xmm0/xmm1 (SSE), results sharing an eightbyte in their bytes of one register (two int32
// results: rax's low and high halves); a larger one in memory the caller passed in rdi
// (then the args start at rsi), whose address comes back in rax: each result at its offset
// from it (LocPiece::RegMem).
SysvAssignment assign_sysv(const GccgoDwarfFunc& f);

}  // namespace gotap
