#include "backends/ptrace/page_release.h"

#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/user.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "backends/ptrace/process.h"

namespace gotap::ptrace {

bool has_word_in(std::span<const uint8_t> bytes, uint64_t lo, uint64_t hi) {
  for (size_t i = 0; i + 8 <= bytes.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, bytes.data() + i, 8);
    if (w >= lo && w < hi) return true;
  }
  return false;
}

bool at_clone_child_start(const user_regs_struct& r, TraceeMemory& mem) {
  if (r.rax != 0 || (r.orig_rax != SYS_clone && r.orig_rax != SYS_clone3)) return false;
  uint8_t insn[2] = {};
  return mem.read(r.rip - 2, insn, 2) && insn[0] == 0x0f && insn[1] == 0x05;
}

bool may_return_into(pid_t tid, TraceeMemory& mem, uint64_t lo, uint64_t hi, uint64_t stack_hi) {
  user_regs_struct r{};
  if (::ptrace(PTRACE_GETREGS, tid, nullptr, &r) != 0) return true;  // unknown: keep it
  if (r.rip >= lo && r.rip < hi) return true;
  if (at_clone_child_start(r, mem)) return false;
  // A handler runs with its signal blocked at least (Go's, with every signal): a thread that
  // blocks none is in no handler, and what its stack holds is stale. Searched, a stack
  // found the saved pcs of other threads' past signals (a signal that arrives during a ptrace
  // stop is taken at the resume, in a copy) left in the memory above it.
  if (signal_mask(mem.pid(), tid, "SigBlk").value_or(1) == 0) return false;
  // A page at a time, so that the stack's end stops the search without hiding what came
  // before it. Signal frames are 16-byte aligned: the word grid from an aligned start holds
  // their saved pc.
  std::vector<uint8_t> buf(4096);
  uint64_t at = r.rsp & ~uint64_t{7};
  const uint64_t end = stack_hi > at ? std::min(at + kReturnScan, stack_hi) : at + kReturnScan;
  while (at < end) {
    const uint64_t n = std::min<uint64_t>(4096 - (at & 4095), end - at);
    if (!mem.read(at, buf.data(), n)) break;
    if (has_word_in({buf.data(), n}, lo, hi)) {
      return true;
    }
    at += n;
  }
  return false;
}

}  // namespace gotap::ptrace
