// Where a probe can be a 5-byte `jmp rel32` to a trampoline instead of a trap (issue 38): the
// whole instructions the jump covers, which the trampoline then runs in their place, and why
// a site offers no such room. Only what can run elsewhere unchanged is displaced:
// - nothing a jump, a call or a return needs at its own address (branches, RIP-relative
//   operands: relocating them is left for later);
// - nothing that can fault: Go turns a fault at one of its own pcs into a panic (nil checks
//   are loads), but a fault at a trampoline's pc is fatal. Memory operands are allowed only
//   on the stack (RSP or RBP based), pushes and pops, and LEA, which reads nothing;
// - no instruction but the first may be a jump's target, or a jump would land inside the
//   five bytes. A function with a jump table (an indirect JMP) has targets nobody lists:
//   its RET sites are refused; its entry site is not, since a jump table's targets are
//   case bodies, never the prologue.
// A RET site's jump goes over the epilogue that ends with the RET (`add rsp, N; pop rbp;
// ret`): the trampoline runs them, the RET included, and never comes back.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/binary/elf_file.h"
#include "core/plan/inline_mark.h"

namespace gotap {

struct JumpSite {
  uint64_t at = 0;      // where the jmp goes: the site, or before the RET
  uint8_t len = 0;      // bytes displaced (whole instructions, at least 5); 0: refused
  std::string refused;  // why, when len is 0
  // A stack-check site: the range ends with the check's `jbe`, branch_len bytes, to
  // branch_to (the morestack path), which the trampoline takes relocated.
  uint64_t branch_to = 0;
  uint8_t branch_len = 0;
  bool ok() const { return len != 0; }
};

constexpr unsigned kJumpLen = 5;  // `jmp rel32`

// code: the bytes of the function [entry, entry + code.size()); blocks: decode_blocks of them
// (leaders needed, dominators not).
JumpSite entry_jump_site(Bytes code, uint64_t entry, const CodeBlocks& blocks, uint64_t site);
JumpSite ret_jump_site(Bytes code, uint64_t entry, const CodeBlocks& blocks, uint64_t ret);

// The stack check's compare and jbe at a function's entry (`cmp rsp,[r14+0x10]; jbe`, after
// `lea r12,[rsp-N]` for a larger frame, which stays where it is: `cmp r12,[r14+0x10]; jbe`),
// whose pcs analyze_function finds (cmp, jbe). The trampoline runs the compare, takes the
// `jbe` to the same morestack path, and counts only past it: a call whose stack grows enters
// again (morestack's `jmp entry`) and is counted once. Unlike a site after the check, no
// goroutine is ever parked by async preemption inside it: the compiler marks the jbe's pc
// unsafe for it (PCDATA_UnsafePoint), so only the threads' own pcs need checking before a
// patch. (The lea before a larger frame's compare is not marked: a goroutine may resume at
// the compare, which is why the range starts there.) Its load of g.stackguard0 is the one
// memory access off the stack it allows: g (R14) is valid in every Go function that has the
// check, and the same load runs at the same moment unpatched.
JumpSite stack_check_jump_site(Bytes code, uint64_t entry, const CodeBlocks& blocks, uint64_t cmp,
                               uint64_t jbe);

// The stack check's `jbe` alone, when it is the 6-byte rel32 form: the trampoline backend's
// entry site, whose jump is a `jno` that keeps the jbe's first byte (trampoline_code.h). Its
// compare stays in place, so the patched bytes hold no pc of the original code but the jbe's
// own: no thread, parked goroutine or signal frame can resume inside them, and another
// tracer's uprobe at the function's first instruction (the compare, or the lea before it)
// still steps that instruction and lands on the jump. A uprobe on the jbe itself takes the
// original jbe from the file and skips the trampoline: the program is unchanged, those calls
// are not counted. The 2-byte `jbe rel8` of a short function is refused here.
JumpSite stack_check_branch_site(Bytes code, uint64_t entry, const CodeBlocks& blocks, uint64_t cmp,
                                 uint64_t jbe);

// A short function's stack check: a 4-byte compare and a 2-byte `jbe rel8` (0x76). Only the
// compare's first byte changes, to a `jmp rel32` whose displacement is the compare's other
// three bytes and the jbe's opcode (trampoline_code.h): the range [at, at + len) is the
// compare and the jbe, and every pc the original code had there is still an instruction
// boundary. A uprobe at the function's first instruction steps the compare and lands on the
// jbe (the call is not counted); one on the jbe finds the file's bytes.
JumpSite stack_check_short_site(Bytes code, uint64_t entry, const CodeBlocks& blocks, uint64_t cmp,
                                uint64_t jbe);
constexpr uint8_t kShortJbe = 0x76;

// A RET whose epilogue is Go 1.21's `add rsp, N; pop rbp; ret` with N below 128 (the 4-byte
// imm8 form), or with a one-byte `nop` before the RET (Go 1.26): the range is those, 6 or 7
// bytes from the add. A frame of 128 bytes or more has the 7-byte imm32 form (9 or 10
// bytes), whose stub's place is site + 5 + (N's two low bytes << 16 | 0xC481): 8 MiB to 2
// GiB past the site under 32 KiB, below it from there. Only the add's first byte (the
// REX 0x48) changes, to a `jmp rel32` whose displacement is the add's other three bytes and
// the `pop rbp` (0x5D): its stub's place is fixed, 0x5D00C488 to 0x5D7FC488 bytes past the
// site. Every pc of the original code there stays an instruction boundary with its own byte:
// a goroutine parked by async preemption at the pop, or a jump to it, runs the epilogue as it
// was, and a thread at the add itself takes the jump. A uprobe on the add steps the file's
// add and lands on the pop; when it goes, it puts back the file's byte: the code is the
// file's again, never half a jump. So no jump-target or parked-goroutine check is needed.
//
// Go 1.17 to 1.20 end a frame with `mov rbp, [rsp+D]; add rsp, N; ret` instead: the same one
// byte changes at the mov (`48 8B 6C 24 D`, or `48 8B AC 24` and a 32-bit D, or `48 8B 2C
// 24` for D 0, the add's REX after it), whose other bytes make the displacement: its stub's
// place is site + 5 + (D's low byte << 24 | 0x246C8B, or 0x24AC8B; 0x48242C8B): up to 2 GiB
// past the site, or (D's low byte 0x80 or more) below it, which only a PIE has room for. The
// trampoline runs the mov alone and jumps back to the add.
JumpSite ret_epilogue_site(Bytes code, uint64_t entry, const CodeBlocks& blocks, uint64_t ret);

// A RET site's bytes (from its first, ret_epilogue_site's range), as its trampoline runs
// them: the bytes it copies and runs (the add and the pop; or the old form's mov), and how
// far RSP still is below where it is at the RET once they ran (the old form's N; else 0).
struct RetEpilogue {
  uint8_t runs = 0;
  uint32_t rsp_below = 0;
  // Not the imm8 form of Go 1.21: its stub is not in the window 1.45 GiB past the site.
  bool far = false;
};
std::optional<RetEpilogue> ret_epilogue_form(Bytes original);
constexpr uint8_t kPopRbp = 0x5d;

}  // namespace gotap
