// The code of a counting trampoline (issue 38), and the jump that sends a probe site to it:
// what the trampoline backend writes into a program, made here from a JumpSite
// (jump_site.h) alone, so that it is checked by running it (tests/unit/test_trampoline_code.cpp)
// before any program sees it. A trampoline:
//
//   pushfq                          the flags may be live at the site: `lock inc` sets them
//   lock inc qword [rip + counter]  one count per pass, exact across threads
//   popfq
//   <the displaced instructions>    copied as they are: JumpSite allows only code that runs
//                                   anywhere (no branches, nothing RIP-relative, no fault)
//   jmp site + len                  back after them; none after a RET site's epilogue, whose
//                                   own RET returns to the caller
//
// At a stack-check site (stack_check_jump_site) the check comes first: its compare, then its
// `jbe` relocated as a rel32 to the same morestack path, then the count and the jump back:
// only a call that goes on is counted, once however often its stack grows.
// No pushfq/popfq there: past the check the flags are dead (the compare is the check's own,
// read by its jbe alone), and the trampoline then writes nothing below the stack pointer.
//
// It touches no register but RSP's 8 bytes below the stack pointer for the flags: Go code
// keeps nothing there (no red zone), and a site after the stack check has hundreds of bytes
// free below it (docs/design.md, "Probes without a trap").
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "core/binary/elf_file.h"
#include "core/model/result.h"
#include "core/plan/event_ring.h"
#include "core/plan/jump_site.h"

namespace gotap {

// The bytes of a counting trampoline placed at `at`, for `site` (ok()), whose original bytes
// are `original` ([site.at, site.at + site.len)); `counter` is an 8-byte aligned address the
// program can write. `ret`: the site's range ends with the function's RET (ret_jump_site).
// An error when a rel32 from `at` cannot reach the counter or the way back.
Result<std::vector<uint8_t>> count_trampoline(uint64_t at, const JumpSite& site, Bytes original,
                                              uint64_t counter, bool ret);

// Its size, to lay trampolines out before their addresses are known.
size_t count_trampoline_size(const JumpSite& site, bool ret);

// What replaces the site's bytes: `jmp trampoline`, then int3 up to site.len. Nothing may run
// those (no jump lands inside the range, and the patcher waits for every thread and parked
// goroutine to be out of it): a stray pass traps at once rather than running half of an
// instruction. An error when the trampoline is out of rel32 reach.
Result<std::vector<uint8_t>> site_jump(const JumpSite& site, uint64_t trampoline);

// A 6-byte jbe's jump (stack_check_branch_site): `jno rel32` (0F 81), always taken there.
// The check's compare never overflows: its operands are user-space addresses (below 2^56) or,
// for the guard, Go's small negative poison values (stackPreempt, stackFork), and no
// difference of two such values leaves the signed 64-bit range. Its first byte is the jbe's
// own 0F: a uprobe placed there later and removed before gotap ends puts back the file's
// first byte, which is that same 0F, and leaves the jump whole. An error when the trampoline
// is out of rel32 reach.
Result<std::vector<uint8_t>> branch_site_jump(const JumpSite& site, uint64_t trampoline);

// A short stack check's jump (stack_check_short_site): a single byte, `jmp` (E9) over the
// compare's first; the compare's other three bytes and the jbe's opcode 0x76 are its
// displacement, so that its trampoline must start at short_site_trampoline, 0x76000005 to
// 0x76ffffff bytes past the site. Nothing else changes: every pc the original code has there
// is still an instruction boundary, a uprobe on the jbe finds the file's bytes, and one on
// the compare that is removed before gotap ends puts the file's first byte back: the
// function then runs unpatched, uncounted. `original`: the file's bytes at the site.
uint64_t short_site_trampoline(const JumpSite& site, Bytes original);
Result<std::vector<uint8_t>> short_site_jump(const JumpSite& site, Bytes original);

// Timed trampolines (`latency`): each pass writes a record into the program's event ring
// (event_ring.h) in place of a count. The record's code pushes and pops RAX, RCX, RDX and
// RSI (32 bytes below the stack pointer: past the stack check, and at a return below the
// frame just freed), reads the TSC and g's goid and stack.hi through R14 (ABIInternal's g,
// loaded at every function's stack check), and clobbers the flags, which are dead at both
// places: past the check's jbe, and at a RET (Go keeps no flags across a call).
struct EventTarget {
  uint64_t ring = 0;  // where the ring (its head) is in the program
  uint32_t goid_off = 0, stack_hi_off = 8;
  RingShape shape = kTimedRing;
  // Trace records (a RecordCapture): the thread's id, from g.m.procid.
  uint32_t m_off = 0, procid_off = 0;
};

// What a tracing trampoline copies into its record past the RingRecord (event_ring.h,
// kTraceRing): the thread's id, then words and copies. It reads only memory Go's own
// invariants make readable there: the stack slots of its frame, the bytes of a string or
// byte slice the function was passed or returns (its data pointer and length, from its
// words; a length over `max` copies `max`), and the type word of a non-nil itab.
struct CaptureWord {
  enum Src : uint8_t { Reg, Stack, Deref } src = Reg;
  // Reg: in Go's ABIInternal integer order (RAX RBX RCX RDI RSI R8 R9 R10 R11), then RDX R12
  // R13 R14 R15 RBP RSP (bpf/gotap_shared.h's gotap_reg).
  uint8_t reg = 0;
  // Stack: from RSP at the site, as it was before the trampoline ran. Deref: from the address
  // in word `base`.
  int32_t off = 0;
  // Deref (an --if's field of what a Go pointer points to): the `size` bytes (1, 2, 4 or 8,
  // zero-extended) at words[base] + off, read only when words[base] is a user-space address
  // past the first page (deref_read). Go's own invariant makes a non-nil typed pointer's
  // target readable; `base` is an earlier word.
  uint8_t base = 0, size = 8;
};
// Whether a Deref word was read: its base word's value is an address it reads from.
constexpr bool deref_read(uint64_t base_value) {
  return base_value >= 4096 && (base_value >> 47) == 0;
}
struct CaptureCopy {
  // None: a place kept, nothing read. Stack (--stack): return addresses, 8 bytes each.
  // Payload: the value an interface's data word leads to (eBPF's 16-byte payload), read only
  // where Go's invariants make it readable (append_payload in trampoline_code.cpp): a boxed
  // value's own bytes, a typed pointer's target's, a map's or channel's header.
  enum Kind : uint8_t { None, String, Itab, Stack, Payload } kind = None;
  // String: data words[word], length words[aux]; Itab: words[word]; Payload: data
  // words[word], type words[aux] (an itab when off is 1: a non-empty interface).
  uint8_t word = 0, aux = 0;
  uint16_t max = 0;  // String, Payload: bytes at most; Stack: 8 x the addresses at most
  // Stack: where the return address is, from RSP at the site (bpf/stack_walk.h's ret_off).
  // The walk reads only the goroutine's own stack: the return address at that slot, then
  // Go's frame records ({saved RBP, return address}), each above the last, 8-aligned and
  // wholly below g.stack.hi; and none at all unless RSP is within [g.stack.lo, g.stack.hi)
  // (a thread on another stack than its g's, as in a signal handler, walks nothing).
  int32_t off = 0;
};
struct RecordCapture {
  std::vector<CaptureWord> words;   // at most kTraceMaxWords
  std::vector<CaptureCopy> copies;  // at most kTraceMaxCopies
  // Where copy i's bytes begin in the record, and how many it may take (its max, cut to the
  // record's room).
  uint32_t copy_at(size_t i) const;
  uint16_t copy_room(size_t i) const;
};

// An entry's body. At a 6-byte jbe (stack_check_branch_site), the site's jno lands here: the
// jbe relocated to the morestack path, the record, the jump back past the jbe. At a short
// check (stack_check_short_site), its stub (short_stub) ran the check: the record and the
// jump back past the jbe. An error when a rel32 does not reach.
// `cap` (may be null): a trace record's words and copies (the target's shape kTraceRing).
Result<std::vector<uint8_t>> entry_body(uint64_t at, const JumpSite& site, const EventTarget& t,
                                        uint32_t id, const RecordCapture* cap = nullptr);
// A short check's code at its fixed place (short_site_trampoline) when timed: the compare,
// the jbe relocated, a jump to its body.
Result<std::vector<uint8_t>> short_stub(uint64_t at, const JumpSite& site, Bytes original,
                                        uint64_t body);
// A RET site's body (ret_epilogue_site): the epilogue's `add rsp, N` and `pop rbp`, the
// record, then a jump past the pop (to the RET, or the NOP before it), which runs where it
// is (another tracer's probe on the RET still fires). Its stub at the fixed place
// (one_byte_jump_place) is a plain jump to the body.
Result<std::vector<uint8_t>> ret_body(uint64_t at, const JumpSite& site, Bytes original,
                                      const EventTarget& t, uint32_t id,
                                      const RecordCapture* cap = nullptr);
// `count` of functions with an `error` result (docs/cli.md, "Failed calls"): the same sites,
// stubs and places as a timed run's, bodies that count instead of writing a record, into
// 8-byte aligned counters the program can write. The entry's body adds one to the calls
// (after the relocated jbe, as entry_body: only a call that goes on); a RET's body runs the
// epilogue, adds one to the failures when the error's type word (`err`: a register, or a
// stack slot from RSP at the RET) is not zero, and jumps to the RET. Nothing is pushed, no
// register is written: the flags alone, dead at both places (entry_body, ret_body). No ring:
// each count is exact, as a plain count's.
Result<std::vector<uint8_t>> entry_count_body(uint64_t at, const JumpSite& site, uint64_t counter);
Result<std::vector<uint8_t>> ret_fail_body(uint64_t at, const JumpSite& site, Bytes original,
                                           uint64_t counter, const CaptureWord& err);
// `jmp to`, placed at `at`.
Result<std::vector<uint8_t>> jump_to(uint64_t at, uint64_t to);
// Where a one-byte jump (E9 over the site's first byte, its displacement the next four of
// the file's) lands: site + 5 + those bytes as a rel32.
uint64_t one_byte_jump_place(uint64_t site, Bytes original);
// Whether such a place can be mapped at all: past the first MiB, and in the 47-bit user
// space (a place below its site may wrap past 0).
constexpr bool mappable_place(uint64_t at) {
  return at >= (1u << 20) && at < (uint64_t{1} << 47);
}
// The longest body without a capture: what a slot for one holds.
constexpr size_t kBodyMax = 160;
// A body's length, which its address does not change.
size_t entry_body_size(const JumpSite& site, const RecordCapture* cap);
size_t ret_body_size(const JumpSite& site, Bytes original, const RecordCapture* cap);
size_t entry_count_body_size(const JumpSite& site);
size_t ret_fail_body_size(const JumpSite& site, Bytes original, const CaptureWord& err);

}  // namespace gotap
