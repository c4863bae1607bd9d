#include "backends/ptrace/trap_net.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/ucontext.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "backends/ptrace/memory.h"
#include "core/sys/proc_maps.h"

// The handler, called as sa_sigaction(sig in rdi, siginfo in rsi, ucontext in rdx), on the
// signal stack Go gave the thread (the flags are Go's own, SA_ONSTACK included). It touches
// only caller-saved registers, and either returns (to sa_restorer, Go's rt_sigreturn stub)
// or tail-jumps to the program's own handler with the arguments untouched.
//   1. pc (the saved rip) inside the page: the tracer had already sent the thread to a copy
//      when it died. Return: the thread resumes there.
//   2. pc - 1 is one of our int3s (binary search of the table): resume at its copy.
//   3. Otherwise the SIGTRAP is not ours: the program's handler decides, as without gotap.
// It lives in .rodata: gotap copies it, never runs it.
asm(R"(
  .pushsection .rodata.gotap_trap_net, "a"
  .globl gotap_trap_net_begin
  .globl gotap_trap_net_end
gotap_trap_net_begin:
  movq   0xa8(%rdx), %rax
  leaq   gotap_trap_net_begin(%rip), %r8
  cmpq   %r8, %rax
  jb     1f
  cmpq   256(%r8), %rax
  jae    1f
  ret
1:
  leaq   -1(%rax), %rax
  leaq   288(%r8), %r9
  movq   272(%r8), %r10
2:
  testq  %r10, %r10
  jz     4f
  movq   %r10, %r11
  shrq   $1, %r11
  movq   %r11, %rcx
  shlq   $4, %rcx
  addq   %r9, %rcx
  cmpq   %rax, (%rcx)
  jae    3f
  leaq   16(%rcx), %r9
  subq   %r11, %r10
  decq   %r10
  jmp    2b
3:
  movq   %r11, %r10
  jmp    2b
4:
  movq   272(%r8), %rcx
  shlq   $4, %rcx
  leaq   288(%r8,%rcx), %rcx
  cmpq   %rcx, %r9
  jae    5f
  cmpq   %rax, (%r9)
  jne    5f
  movq   8(%r9), %rax
  movq   %rax, 0xa8(%rdx)
  ret
5:
  movq   264(%r8), %rax
  cmpq   $1, %rax
  jbe    6f
  jmp    *%rax
6:
  ret
gotap_trap_net_end:
  .popsection
)");

extern "C" const uint8_t gotap_trap_net_begin[];
extern "C" const uint8_t gotap_trap_net_end[];

namespace gotap::ptrace {

// The offsets the assembly above uses.
static_assert(offsetof(ucontext_t, uc_mcontext.gregs) + REG_RIP * 8 == 0xa8);
static_assert(kNetHeaderOff == 256 && kNetTableOff == 288);
static_assert(offsetof(NetHeader, end) == 0 && offsetof(NetHeader, old_handler) == 8 &&
              offsetof(NetHeader, nsites) == 16);
static_assert(sizeof(NetEntry) == 16);

std::span<const uint8_t> net_handler_code() {
  return {gotap_trap_net_begin, static_cast<size_t>(gotap_trap_net_end - gotap_trap_net_begin)};
}

bool retire_table(TraceeMemory& mem, uint64_t page) {
  const uint64_t zero = 0;
  return page && mem.write(page + kNetHeaderOff + offsetof(NetHeader, nsites), &zero, 8);
}

Leftovers remove_leftovers(pid_t pid, TraceeMemory& mem,
                           const std::function<bool(uint64_t addr)>& held_by_other) {
  Leftovers out;
  const auto code = net_handler_code();
  for (const sys::Mapping& m : sys::read_maps(pid)) {
    const uint64_t lo = m.start, hi = m.end;
    if (m.inode != 0 || m.perms != "r-xp" || hi - lo < 4096) continue;
    std::vector<uint8_t> head(code.size());
    if (!mem.read(lo, head.data(), head.size()) ||
        std::memcmp(head.data(), code.data(), code.size()) != 0)
      continue;
    NetHeader hdr;
    if (!mem.read(lo + kNetHeaderOff, &hdr, sizeof hdr)) continue;
    // Bytes of a dead process's page: trusted no further than they check out.
    if (hdr.end != hi || hdr.nsites > (hi - lo) / sizeof(NetEntry)) continue;
    std::vector<NetEntry> table(hdr.nsites);
    std::vector<uint8_t> orig(hdr.nsites);
    if (!mem.read(lo + kNetTableOff, table.data(), table.size() * sizeof(NetEntry)) ||
        !mem.read(lo + kNetTableOff + table.size() * sizeof(NetEntry), orig.data(), orig.size()))
      continue;
    ++out.pages;
    out.handlers[lo] = hdr.old_handler;
    for (size_t i = 0; i < table.size(); ++i) {
      uint8_t now = 0;
      if (orig[i] == 0xCC || !mem.read(table[i].site, &now, 1) || now != 0xCC) continue;
      // The dead gotap's int3 went, and another tracer put its own here since.
      if (held_by_other && held_by_other(table[i].site)) {
        ++out.held;
        continue;
      }
      if (mem.write(table[i].site, &orig[i], 1)) {
        ++out.restored;
        out.sites.push_back(table[i].site);
      }
    }
  }
  std::sort(out.sites.begin(), out.sites.end());
  out.sites.erase(std::unique(out.sites.begin(), out.sites.end()), out.sites.end());
  return out;
}

bool rewind_leftover(const std::vector<uint64_t>& sites, TraceeMemory& mem, user_regs_struct& r) {
  const uint64_t at = r.rip - 1;
  if (!std::binary_search(sites.begin(), sites.end(), at)) return false;
  uint8_t now = 0;
  if (!mem.read(at, &now, 1) || now == 0xCC) return false;
  r.rip = at;
  return true;
}

namespace {
constexpr uint64_t kTrapBit = 1ull << (SIGTRAP - 1);
}  // namespace

bool TrapNet::catches_sigtrap(pid_t pid) {
  return signal_mask(pid, 0, "SigCgt").value_or(0) & kTrapBit;
}

Result<KernelSigaction> TrapNet::query(Process& proc, pid_t tid, uint64_t syscall_at, int sig) {
  if (!data_) {
    auto r = proc.inject_syscall(tid, syscall_at, SYS_mmap,
                                 {0, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                                  static_cast<uint64_t>(-1), 0});
    if (!r) return r.error();
    if (syscall_failed(*r))
      return runtime_error("cannot map a data page in the tracee: {}", strerror(-int64_t(*r)));
    data_ = *r;
  }
  auto r = proc.inject_syscall(tid, syscall_at, SYS_rt_sigaction,
                               {uint64_t(sig), 0, data_, sizeof(KernelSigaction::mask)});
  if (!r) return r.error();
  if (*r != 0)
    return runtime_error("rt_sigaction in the tracee failed: {}", strerror(-int64_t(*r)));
  KernelSigaction sa;
  if (!proc.mem().read(data_, &sa, sizeof sa)) return runtime_error("cannot read {:#x}", data_);
  return sa;
}

Result<void> TrapNet::set(Process& proc, pid_t tid, uint64_t syscall_at, const KernelSigaction& sa,
                          int sig) {
  if (!proc.mem().write(data_ + 64, &sa, sizeof sa))
    return runtime_error("cannot write {:#x}", data_ + 64);
  auto r = proc.inject_syscall(tid, syscall_at, SYS_rt_sigaction,
                               {uint64_t(sig), data_ + 64, 0, sizeof(KernelSigaction::mask)});
  if (!r) return r.error();
  if (*r != 0)
    return runtime_error("rt_sigaction in the tracee failed: {}", strerror(-int64_t(*r)));
  return {};
}

// Best effort, signal by signal: a signal left as it was keeps today's exposure, no more.
void TrapNet::unblock_in_handlers(Process& proc, pid_t tid, uint64_t syscall_at) {
  const uint64_t caught = signal_mask(proc.pid(), 0, "SigCgt").value_or(0);
  for (int sig = 1; sig <= 64; ++sig) {
    if (sig == SIGTRAP || !(caught & (1ull << (sig - 1)))) continue;
    auto sa = query(proc, tid, syscall_at, sig);
    if (!sa) return;
    if (sa->handler <= 1 || !(sa->mask & kTrapBit)) continue;
    sa->mask &= ~kTrapBit;
    if (!set(proc, tid, syscall_at, *sa, sig)) return;
    unblocked_[sig] = *sa;
  }
}

void TrapNet::unblock_in_sets(TraceeMemory& mem) {
  for (uint64_t a : sets_) {
    uint64_t v = 0;
    // A full mask, as Go's are once the runtime is initialised (cgo's lacks glibc's 32-34).
    if (!mem.read(a, &v, 8) || !(v & kTrapBit) || __builtin_popcountll(v) < 56) continue;
    const uint64_t mine = v & ~kTrapBit;
    if (mem.write(a, &mine, 8)) cleared_[a] = mine;
  }
}

void TrapNet::block_in_sets(TraceeMemory& mem) {
  for (auto [a, mine] : cleared_) {
    uint64_t v = 0;
    if (!mem.read(a, &v, 8) || v != mine) continue;
    v |= kTrapBit;
    (void)mem.write(a, &v, 8);
  }
  cleared_.clear();
}

void TrapNet::block_in_handlers(Process& proc, pid_t tid, uint64_t syscall_at) {
  for (auto& [sig, mine] : unblocked_) {
    auto now = query(proc, tid, syscall_at, sig);
    if (!now) break;
    // The program set this signal's action since: it stays as the program wants it.
    if (now->handler != mine.handler || now->mask != mine.mask || now->flags != mine.flags)
      continue;
    now->mask |= kTrapBit;
    if (!set(proc, tid, syscall_at, *now, sig)) break;
  }
  unblocked_.clear();
}

Result<bool> TrapNet::arm(Process& proc, pid_t tid, uint64_t syscall_at, uint64_t page) {
  if (armed_) return true;
  auto old = query(proc, tid, syscall_at);
  if (!old) return old.error();
  // A dead gotap's handler: the program's own is the one behind it.
  if (auto it = leftovers_.find(old->handler); it != leftovers_.end()) old->handler = it->second;
  // SIG_DFL or SIG_IGN: the runtime has not installed its handler yet.
  if (old->handler <= 1) return false;
  // The handler chains to the program's for SIGTRAPs that are not ours.
  uint64_t h = old->handler;
  if (!proc.mem().write(page + kNetHeaderOff + offsetof(NetHeader, old_handler), &h, 8))
    return runtime_error("cannot write the scratch page at {:#x}", page);
  KernelSigaction ours = *old;
  ours.handler = page;
  ours.flags |= SA_SIGINFO;
  GOTAP_TRY(set(proc, tid, syscall_at, ours));
  ours_ = ours;
  old_ = *old;
  page_ = page;
  armed_ = true;
  handler_out_ = true;
  unblock_in_handlers(proc, tid, syscall_at);
  unblock_in_sets(proc.mem());
  return true;
}

Result<void> TrapNet::disarm(Process& proc, pid_t tid, uint64_t syscall_at) {
  if (!armed_) return {};
  block_in_sets(proc.mem());
  block_in_handlers(proc, tid, syscall_at);
  auto now = query(proc, tid, syscall_at);
  if (!now) return now.error();
  armed_ = false;
  // SIG_DFL is the kernel's reset (rearm), not the program's choice: its handler goes back.
  // Another handler: the program set its own since.
  if (now->handler != page_ && now->handler != 0) return {};
  GOTAP_TRY(set(proc, tid, syscall_at, old_));
  handler_out_ = false;
  return {};
}

Result<bool> TrapNet::rearm(Process& proc, pid_t tid, uint64_t syscall_at) {
  if (!armed_ || catches_sigtrap(proc.pid())) return false;
  GOTAP_TRY(set(proc, tid, syscall_at, ours_));
  return true;
}

void TrapNet::release_data(Process& proc, pid_t tid, uint64_t syscall_at) {
  if (!data_) return;
  (void)proc.inject_syscall(tid, syscall_at, SYS_munmap, {data_, 4096});
  data_ = 0;
}

}  // namespace gotap::ptrace
