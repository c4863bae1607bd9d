// Instruction-level facts about one function, found by decoding it with Zydis: every RET,
// tail-call JMPs, the stack-check prologue, the first `push rbp`, and the register spills of
// the morestack path (which tell a stripped binary's argument registers).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "core/binary/elf_file.h"
#include "core/plan/abi.h"
#include "core/plan/inline_mark.h"

namespace gotap {

struct FuncCode {
  std::vector<uint64_t> rets;        // every RET instruction
  std::vector<uint64_t> tail_jumps;  // direct JMPs leaving [entry, end)
  // Indirect JMPs (`jmp reg`, `jmp [mem]`): a tail call when the frame is torn down there
  // (pcsp == 0), else a jump table. The disassembler cannot tell; GoBinary asks pcsp.
  std::vector<uint64_t> indirect_jumps;
  std::optional<uint64_t> stack_check;      // the CMP of the stack-check prologue
  std::optional<uint64_t> stack_check_jcc;  // the JBE/JLS of the stack-check prologue
  // The `push rbp` right after the stack check, or at the entry of a function without one
  // (Go >= 1.21 only: older compilers store BP with a MOV after SUB RSP).
  std::optional<uint64_t> push_rbp;
  std::vector<RegSpill> morestack_spills;  // register -> spill slot, from the morestack path
  // The CALL to runtime.morestack* on that path: a probe there sees each call that will
  // enter again once the stack has grown.
  std::optional<uint64_t> morestack_call;
  // Zydis could not decode the bytes at decode_error_at; decoding stopped there, so RETs after
  // it are missing (guessing instruction boundaries could put a probe inside an instruction).
  bool decode_error = false;
  uint64_t decode_error_at = 0;
};

// code: the bytes of [entry, end). Never reads outside `code`.
FuncCode analyze_function(Bytes code, uint64_t entry);
// The same from `code`'s instructions already decoded (decode_blocks of the same bytes): a
// whole-binary plan decodes each function once for its RET sites and its inlined calls.
FuncCode analyze_function(Bytes code, uint64_t entry, const CodeBlocks& decoded);

// The displacement of the first `mov reg, fs:[disp32]` among the first few instructions of
// `code`: how ABI0 code and ABI wrappers load g from TLS, so it is the g slot's offset from
// FS_base as the linker resolved it (-8 with internal linking).
std::optional<int64_t> fs_load_offset(Bytes code);

// Length of the instruction at `code` (0 when it does not decode).
unsigned instruction_length(Bytes code, uint64_t addr);

// The length of the instruction at `code` (0 when it does not decode) and what kind of
// control flow it is, as the planner tells its sites apart (a RET, a JMP of either form, a
// conditional jump, a CALL): for checking sites read from the plan cache.
struct InsnKind {
  unsigned len = 0;
  bool ret = false, jmp = false, jcc = false, call = false;
};
InsnKind instruction_kind(Bytes code);

}  // namespace gotap
