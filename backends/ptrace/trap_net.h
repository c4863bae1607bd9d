// The safety net (docs/design.md, "When gotap dies"): a SIGTRAP handler that gotap places in
// the tracee's scratch page, next to the out-of-line copies of the displaced instructions.
// While gotap is alive it never runs: every SIGTRAP of an int3 stops the thread for the
// tracer, which resumes it without the signal. When gotap dies without removing its int3s
// (SIGKILL, the OOM killer), the kernel detaches and the next hit raises a real SIGTRAP, which
// Go turns into a fatal "SIGTRAP: trace trap". The handler instead sends the thread to the
// out-of-line copy of the instruction the int3 displaced, and the program carries on.
//
// The page, as the handler reads it (all offsets from the page's start):
//   [0, kNetHeaderOff)          the handler's code (position independent)
//   kNetHeaderOff               NetHeader
//   kNetTableOff                NetHeader::nsites NetEntry, sorted by site
//   after the table             the out-of-line slots
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <vector>

#include <signal.h>
#include <sys/user.h>

#include "backends/ptrace/process.h"
#include "core/model/result.h"

namespace gotap::ptrace {

constexpr uint64_t kNetHeaderOff = 256;
constexpr uint64_t kNetTableOff = kNetHeaderOff + 32;

struct NetHeader {
  uint64_t end = 0;          // the page's end: a SIGTRAP whose pc is in [page, end) is one the
                             // tracer had already handled when it died: nothing left to do
  uint64_t old_handler = 0;  // the program's own handler, for SIGTRAPs that are not ours
  uint64_t nsites = 0;
  uint64_t reserved = 0;
};
static_assert(sizeof(NetHeader) == kNetTableOff - kNetHeaderOff);

struct NetEntry {
  uint64_t site = 0;  // the int3's address
  uint64_t slot = 0;  // where the thread resumes: the displaced instruction's copy
};

// The kernel's struct sigaction on x86-64 (rt_sigaction(2) with sigsetsize 8).
struct KernelSigaction {
  uint64_t handler = 0;
  uint64_t flags = 0;
  uint64_t restorer = 0;
  uint64_t mask = 0;
};

// The handler's machine code, to be copied to the start of the page.
std::span<const uint8_t> net_handler_code();

// A gotap that died leaves its int3s and its page in the program. Finds such pages
// (anonymous executable mappings that start with the handler's code), puts the original
// bytes back wherever the int3s still are, and says how many it restored. `handlers` maps
// each page (its handler's address) to the handler it chained to: the program's own.
// A gotap that ended normally emptied its page's table (retire_table): nothing of it is
// taken for a dead one's. An int3 that `held_by_other` says is another tracer's (a uprobe
// at that site) stays, even if the table names its site: kept, and counted in `held`.
struct Leftovers {
  size_t pages = 0;
  size_t restored = 0;
  size_t held = 0;
  std::map<uint64_t, uint64_t> handlers;
  std::vector<uint64_t> sites;  // where a byte was put back, sorted
};
Leftovers remove_leftovers(pid_t pid, TraceeMemory& mem,
                           const std::function<bool(uint64_t addr)>& held_by_other);

// A thread that ran a dead gotap's int3 before remove_leftovers put the byte back still has
// that int3's SIGTRAP to take: queued, or reported as a stop after the restore. Delivered to
// the program, it would meet a handler that no longer knows the site (or, during an injected
// system call, find the thread at the stub) and Go would die of it. Since the original byte
// is back, the thread only has to run it again: when `r` stopped one byte past one of
// `sites` and no int3 is there any more, rip goes back to the site and this says true.
bool rewind_leftover(const std::vector<uint64_t>& sites, TraceeMemory& mem, user_regs_struct& r);

// On a normal end, after the int3s are removed and the program's SIGTRAP handler is back:
// empties the table of the page at `page`, so that no later gotap restores bytes at its
// sites (where another tracer may have put its own int3 since).
bool retire_table(TraceeMemory& mem, uint64_t page);

// Makes the page's handler the tracee's SIGTRAP handler, and puts the program's own back.
// Both inject rt_sigaction(2) into a stopped thread.
class TrapNet {
 public:
  // `page` holds the handler (Breakpoints::build_scratch). Returns false, changing nothing,
  // while the program has no SIGTRAP handler of its own: a launched Go program before
  // runtime.initsig, which would replace ours. Call again once it has one.
  Result<bool> arm(Process& proc, pid_t tid, uint64_t syscall_at, uint64_t page);
  // Restores the program's handler, unless the program replaced ours meanwhile.
  Result<void> disarm(Process& proc, pid_t tid, uint64_t syscall_at);
  // An int3 hit by a thread that blocks SIGTRAP (in a signal handler: Go's block every
  // signal) has its SIGTRAP forced by the kernel, which first resets the handler to SIG_DFL
  // (force_sig_info_to_task): the net is gone, and a gotap that died then would leave the
  // program to die of the next leftover int3 it hits. Puts ours back when that happened (the
  // process no longer catches SIGTRAP); true when it did.
  Result<bool> rearm(Process& proc, pid_t tid, uint64_t syscall_at);
  // Go's handlers block every signal while they run, SIGTRAP included: an int3 in code they
  // run (sigtrampgo, findfunc and pcvalue for each SIGURG preemption) would, once gotap is
  // killed, have its SIGTRAP forced past the net and kill the program. arm() takes SIGTRAP
  // out of each caught signal's sa_mask, so that the net catches those hits too; disarm()
  // puts it back where the handler is still the one it changed. How many it changed.
  size_t unblocked() const { return unblocked_.size(); }
  // The same for Go's own "every signal" masks (core/plan/signals_blocked.h), at these
  // addresses in the tracee: arm() clears SIGTRAP in each that holds a full mask; disarm()
  // puts it back where the value is still the one gotap wrote. Set before arm().
  void set_block_all_sets(std::vector<uint64_t> addrs) { sets_ = std::move(addrs); }
  size_t sets_cleared() const { return cleared_.size(); }
  bool armed() const { return armed_; }
  // Whether the page's handler may still be called: it was installed and is not known to be
  // gone (disarm found the program's own handler in its place: that one may chain to it).
  bool handler_out() const { return handler_out_; }
  // Unmaps the data page (after the last query or set).
  void release_data(Process& proc, pid_t tid, uint64_t syscall_at);
  // Handlers of dead gotaps' pages, and the program's handler behind each (remove_leftovers):
  // found installed, such a handler is replaced, not chained to.
  void set_leftovers(std::map<uint64_t, uint64_t> handlers) { leftovers_ = std::move(handlers); }

  // Whether the process catches SIGTRAP (SigCgt in /proc/PID/status): cheaper than asking
  // through an injected syscall, for the launched program's first hits.
  static bool catches_sigtrap(pid_t pid);

 private:
  Result<KernelSigaction> query(Process& proc, pid_t tid, uint64_t syscall_at, int sig = SIGTRAP);
  Result<void> set(Process& proc, pid_t tid, uint64_t syscall_at, const KernelSigaction& sa,
                   int sig = SIGTRAP);
  void unblock_in_handlers(Process& proc, pid_t tid, uint64_t syscall_at);
  void block_in_handlers(Process& proc, pid_t tid, uint64_t syscall_at);
  void unblock_in_sets(TraceeMemory& mem);
  void block_in_sets(TraceeMemory& mem);

  bool armed_ = false;
  bool handler_out_ = false;
  uint64_t page_ = 0;
  uint64_t data_ = 0;  // a read-write page in the tracee for rt_sigaction's arguments
  KernelSigaction old_;
  KernelSigaction ours_;
  std::map<uint64_t, uint64_t> leftovers_;
  std::map<int, KernelSigaction> unblocked_;  // as unblock_in_handlers set them
  std::vector<uint64_t> sets_;
  std::map<uint64_t, uint64_t> cleared_;  // address -> the value gotap wrote there
};

}  // namespace gotap::ptrace
