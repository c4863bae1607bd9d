// The length and the control flow of the x86-64 instructions Go's compiler emits most (MOV,
// LEA, CMP, TEST, arithmetic, MOVUPS, Jcc, JMP, CALL, RET, INT3 padding...), read from
// opcode tables without Zydis. Planning a whole binary decodes every instruction of it
// (caddy: about 4 million), and Zydis' decoder, even in its minimal mode, was a fifth of a
// cold plan.
//
// It answers only for encodings it knows completely, with the same length and the same flow
// as Zydis; for anything else (VEX, x87, LOCK, 0F 38/3A, prefixes on branches, encodings
// that are invalid or whose validity depends on the CPU) it answers nothing and the caller
// asks Zydis. Disasm.QuickDecodeAgreesWithZydis checks the agreement on random encodings and
// on every instruction of real programs.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gotap {

struct QuickInsn {
  enum Flow : uint8_t {
    kPlain,        // falls through to the next instruction
    kRet,          // RET, RET imm16
    kJmp,          // JMP rel8/rel32: `rel` from the next instruction
    kJcc,          // Jcc rel8/rel32
    kCall,         // CALL rel32 or CALL r/m (Go's "after a call" rules do not need which)
    kJmpIndirect,  // JMP r/m
    kInt3,         // INT3: padding between functions, or a breakpoint
    kUd2,          // UD2
  };
  uint8_t len = 0;
  Flow flow = kPlain;
  int32_t rel = 0;
};

// Decodes the instruction at p (n bytes readable). False: not one it knows; ask Zydis.
bool quick_decode(const uint8_t* p, size_t n, QuickInsn& out);

}  // namespace gotap
