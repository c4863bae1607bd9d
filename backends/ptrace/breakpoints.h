// int3 breakpoints that resume with one stop per hit: the thread runs a copy of the displaced
// instruction in a scratch page mapped into the tracee, followed by an absolute jump back
// (branches are rewritten with absolute targets). No remove/single-step/re-insert, so other
// threads never run past a missing breakpoint. The same page carries the safety net
// (trap_net.h), which uses the same copies when gotap is gone.
#pragma once

#include <sys/user.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
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
  // Uncount: count's probe on the stack check's call to morestack, after which the entry
  // probe fires again for the same call.
  enum Kind : uint8_t {
    Entry,
    Return,
    TailJump,
    Inline,
    GStatus,
    GCreate,
    GCreated,
    GSysEnter,  // --why, Go 1.26+: runtime.entersyscall / exitsyscall (GoroutineProbes)
    GSysExit,
    Uncount
  } kind = Entry;
  int func = -1;        // index into ProbePlan::funcs
  int inline_idx = -1;  // Inline: index into FuncPlan::inline_sites
};

// 64 bytes: a whole binary has 100,000s of sites (caddy: 145,589), held for the whole trace.
struct Site {
  uint64_t addr = 0;    // run-time address
  uint64_t target = 0;  // Jcc/Jmp/Call
  // Its roles, in Breakpoints' pool (Breakpoints::finish), in the order they were added.
  std::span<SiteRole> roles;
  uint8_t orig[16] = {};
  int32_t sp_delta = 0;  // SP delta at the site: entry RSP = RSP + sp_delta
  uint16_t ret_imm = 0;  // ret imm16
  uint8_t len = 0;
  StepKind step = StepKind::OutOfLine;
  uint8_t cc = 0;        // Jcc condition code
  int8_t disp_off = -1;  // OutOfLine: offset of a RIP-relative disp32, -1 when none
  // A uprobe holds the site too (registered after gotap looked): the int3 is the kernel's
  // as well, and no restore writes the original byte over it (Breakpoints::share).
  bool shared = false;
};
static_assert(sizeof(Site) == 64);

// The executable's bytes as its file has them at a run-time address: n bytes, or fewer (none)
// where the file does not back them all.
using FileText = std::function<std::span<const uint8_t>(uint64_t addr, size_t n)>;

// The sites are one flat vector, sorted by address once every site is added (finish), and
// found by address through an open-addressing index of 32-bit positions: no node, bucket or
// role vector per site (a whole caddy's table went from about 25 MB to 12).
class Breakpoints {
 public:
  // Room for `n` sites (an upper bound): the table grows by doubling otherwise.
  void reserve(size_t n);
  // Reads and decodes the original instruction at addr (once per address). The pointer is
  // good until the next add; the site's roles show once finish() has run.
  Result<Site*> add(uint64_t addr, SiteRole role, int32_t sp_delta, MemoryReader& mem);
  // Sorts the sites by address and gives each its roles. After the last add; build_scratch
  // calls it (again: it is idempotent). No add after it.
  void finish();
  Site* find(uint64_t addr) {
    if (index_.empty()) return nullptr;
    for (size_t h = hash(addr);; h = (h + 1) & (index_.size() - 1)) {
      const uint32_t i = index_[h];
      if (i == kNone) return nullptr;
      if (sites_[i].addr == addr) return &sites_[i];
    }
  }
  size_t size() const { return sites_.size(); }
  const std::vector<Site>& sites() const { return sites_; }

  // Maps the scratch pages within rel32 reach of the executable's image [image_lo, image_hi)
  // (every PT_LOAD, at run time; scratch_room.h says where) with a syscall injected into the
  // stopped thread `tid` (at `syscall_at`), and writes the trap handler and the out-of-line
  // copies.
  Result<void> place_scratch(Process& proc, pid_t tid, uint64_t syscall_at, uint64_t image_lo,
                             uint64_t image_hi);
  uint64_t scratch() const { return scratch_; }
  uint64_t scratch_size() const { return scratch_size_; }
  // The page was unmapped (page_release.h): no site has a copy any more.
  void forget_scratch() { scratch_ = scratch_size_ = slots_ = 0; }
  bool in_scratch(uint64_t pc) const {
    return scratch_ && pc >= scratch_ && pc < scratch_ + scratch_size_;
  }

  // The scratch page's bytes for a page at `base` (trap_net.h), handed to `put` a part at a
  // time in address order (offset from base, bytes), so that a whole binary's copies (7 MB
  // for caddy) are never all in gotap's memory at once. Checks every copy first: on an error
  // nothing is put. Sets where each site's copy is (slot). False from put: an error.
  using ScratchPut = std::function<bool(uint64_t off, std::span<const uint8_t> bytes)>;
  Result<void> write_scratch(uint64_t base, const ScratchPut& put);
  // All of it at once (tests).
  Result<std::vector<uint8_t>> build_scratch(uint64_t base);
  static uint64_t scratch_size_for(size_t nsites);
  // Where s's copy is, once the scratch is built; 0 before.
  uint64_t slot(const Site& s) const {
    return slots_ ? slots_ + uint64_t(&s - sites_.data()) * kSlotSize : 0;
  }

  // The int3s, and the original bytes back: a page's sites in one write where `file` shows
  // that nothing but the sites differs from the file there (site_bytes.h). Without `file`,
  // one write per site. An int3 goes only over the byte read at add(); on a failure the sites
  // written get their bytes back, and the others are no longer gotap's to write (shared).
  Result<void> insert_all(TraceeMemory& mem, const FileText& file = {});
  // --max-overhead: takes func's roles off every site, and puts the original byte back where
  // no role is left. The site stays known, so that a hit taken before the write still
  // resumes through its copy. False when a byte could not be written.
  bool drop_func(int func, TraceeMemory& mem);
  // The site at addr is a uprobe's as well: every restore leaves its int3, which the kernel
  // takes back (with the file's byte) when that uprobe goes. False when addr is no site.
  bool share(uint64_t addr);
  // Where insert_all found another tracer's int3 that was not there when the site was read;
  // 0 when it did not.
  uint64_t changed_at() const { return changed_at_; }
  void restore_all(TraceeMemory& mem, const FileText& file = {});
  // The original bytes in another copy of the text (a forked child's), the table unchanged.
  void restore_in(TraceeMemory& mem, const FileText& file = {}) const;
  bool inserted() const { return inserted_; }

  // Sets regs (taken at the trap, rip = addr + 1) so that the thread resumes in the site's
  // copy. Nothing else changes, so a thread whose tracer dies before it resumes is still in
  // a state the safety net understands (trap_net.h). False when the site has no copy.
  bool step_over(const Site& s, user_regs_struct& regs) const;

  // Where in the text a thread stopped at `pc` in a copy resumes the same: the site itself
  // when nothing of the copy has run (the site must hold its original byte again, which
  // `mem` shows), the jump's target when only the jump back is left. Lets the detach take
  // a stopped thread out of the page, so that the page can go. nullopt for any other pc.
  std::optional<uint64_t> text_pc_for(uint64_t pc, MemoryReader& mem) const;

  static constexpr uint64_t kSlotSize = 32;

 private:
  static constexpr uint32_t kNone = UINT32_MAX;
  // Fibonacci hashing: the top bits of addr times 2^64 / phi.
  size_t hash(uint64_t addr) const { return (addr * 0x9E3779B97F4A7C15ull) >> shift_; }
  // index_ for sites_ as they are, at most about 70% full.
  void rebuild_index(size_t min_sites);

  std::vector<Site> sites_;
  std::vector<uint32_t> index_;  // positions in sites_, kNone where empty
  unsigned shift_ = 64;
  // Before finish: each added role and its site's position. After: every role, by site.
  std::vector<std::pair<uint32_t, SiteRole>> added_roles_;
  std::vector<SiteRole> roles_;
  bool finished_ = false;
  uint64_t scratch_ = 0, scratch_size_ = 0;
  uint64_t slots_ = 0;  // the first site's copy
  bool inserted_ = false;
  bool shared_ = false;      // some site is Site::shared
  uint64_t changed_at_ = 0;  // insert_all
};

}  // namespace gotap::ptrace
