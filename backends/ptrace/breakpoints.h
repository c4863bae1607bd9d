// int3 breakpoints that resume with one stop per hit: the thread runs a copy of the displaced
// instruction in a scratch page mapped into the tracee, followed by an absolute jump back
// (branches are rewritten with absolute targets). No remove/single-step/re-insert, so other
// threads never run past a missing breakpoint. The same page carries the safety net
// (trap_net.h), which uses the same copies when gotap is gone.
#pragma once

#include <sys/user.h>

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "backends/ptrace/memory.h"
#include "backends/ptrace/process.h"
#include "core/model/result.h"

namespace gotap::ptrace {

enum class StepKind : uint8_t { PushRbp, Ret, Jcc, Jmp, Call, Nop, OutOfLine };

// What a breakpoint means to the tracer; a site may serve several purposes.
struct SiteRole {
  // TailJump: a jump that leaves the function as a RET does, with its results not set up.
  // The goroutine probes: runtime.casgstatus, runtime.newproc1's entry and its RETs.
  enum Kind : uint8_t { Entry, Return, TailJump, Inline, GStatus, GCreate, GCreated } kind = Entry;
  int func = -1;        // index into ProbePlan::funcs
  int inline_idx = -1;  // Inline: index into FuncPlan::inline_sites
};

struct Site {
  uint64_t addr = 0;  // run-time address
  uint8_t orig[16] = {};
  uint8_t len = 0;
  StepKind step = StepKind::OutOfLine;
  uint8_t cc = 0;        // Jcc condition code
  uint16_t ret_imm = 0;  // ret imm16
  uint64_t target = 0;   // Jcc/Jmp/Call
  int disp_off = -1;     // OutOfLine: offset of a RIP-relative disp32, -1 when none
  uint64_t slot = 0;     // OutOfLine: the copy in the scratch page
  int32_t sp_delta = 0;  // SP delta at the site: entry RSP = RSP + sp_delta
  std::vector<SiteRole> roles;
};

class Breakpoints {
 public:
  // Reads and decodes the original instruction at addr (once per address).
  Result<Site*> add(uint64_t addr, SiteRole role, int32_t sp_delta, MemoryReader& mem);
  Site* find(uint64_t addr) {
    auto it = sites_.find(addr);
    return it == sites_.end() ? nullptr : &it->second;
  }
  size_t size() const { return sites_.size(); }
  const std::unordered_map<uint64_t, Site>& sites() const { return sites_; }

  // Maps the scratch pages within rel32 reach of the executable's image [image_lo, image_hi)
  // (every PT_LOAD, at run time; scratch_room.h says where) with a syscall injected into the
  // stopped thread `tid` (at `syscall_at`), and writes the trap handler and the out-of-line
  // copies.
  Result<void> place_scratch(Process& proc, pid_t tid, uint64_t syscall_at, uint64_t image_lo,
                             uint64_t image_hi);
  uint64_t scratch() const { return scratch_; }
  bool in_scratch(uint64_t pc) const {
    return scratch_ && pc >= scratch_ && pc < scratch_ + scratch_size_;
  }

  // The scratch page's bytes for a page at `base` (trap_net.h); sets each site's slot.
  Result<std::vector<uint8_t>> build_scratch(uint64_t base);
  static uint64_t scratch_size_for(size_t nsites);

  Result<void> insert_all(TraceeMemory& mem);
  // --max-overhead: takes func's roles off every site, and puts the original byte back where
  // no role is left. The site stays known, so that a hit taken before the write still
  // resumes through its copy. False when a byte could not be written.
  bool drop_func(int func, TraceeMemory& mem);
  void restore_all(TraceeMemory& mem);
  bool inserted() const { return inserted_; }

  // Sets regs (taken at the trap, rip = addr + 1) so that the thread resumes in the site's
  // copy. Nothing else changes, so a thread whose tracer dies before it resumes is still in
  // a state the safety net understands (trap_net.h). False when the site has no copy.
  static bool step_over(const Site& s, user_regs_struct& regs);

 private:
  std::unordered_map<uint64_t, Site> sites_;
  uint64_t scratch_ = 0, scratch_size_ = 0;
  bool inserted_ = false;
};

}  // namespace gotap::ptrace
