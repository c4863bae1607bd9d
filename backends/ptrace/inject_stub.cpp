#include "backends/ptrace/inject_stub.h"

#include <elf.h>
#include <sys/syscall.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/sys/proc_maps.h"

namespace gotap::ptrace {

namespace {

// The kernel's internal "restart me" results, which a stopped thread can show in rax while
// its interrupted syscall waits for the resume to restart it.
constexpr int64_t kERestartSys = -512, kERestartNoIntr = -513, kERestartNoHand = -514,
                  kERestartBlock = -516;

uint8_t* put_movabs(uint8_t* p, uint8_t rex, uint8_t op, uint64_t v) {
  p[0] = rex;
  p[1] = op;
  std::memcpy(p + 2, &v, 8);
  return p + 10;
}

}  // namespace

user_regs_struct resume_point(const user_regs_struct& regs) {
  user_regs_struct b = regs;
  if (static_cast<int64_t>(regs.orig_rax) >= 0) {
    switch (static_cast<int64_t>(regs.rax)) {
      case kERestartSys:
      case kERestartNoIntr:
      case kERestartNoHand:
        b.rax = regs.orig_rax;
        b.rip -= 2;
        break;
      case kERestartBlock:
        b.rax = SYS_restart_syscall;
        b.rip -= 2;
        break;
      default:
        break;
    }
  }
  b.orig_rax = static_cast<unsigned long long>(-1);
  return b;
}

std::array<uint8_t, kStubSize> syscall_stub(const user_regs_struct& back) {
  std::array<uint8_t, kStubSize> s;
  s.fill(0xCC);
  uint8_t* p = s.data();
  *p++ = 0x0f;  // syscall
  *p++ = 0x05;
  // movabs reg, imm64: REX.W (+B for r8-r15), B8+reg. None of them touches the flags, which
  // `syscall` leaves as they were.
  p = put_movabs(p, 0x48, 0xb8, back.rax);
  p = put_movabs(p, 0x48, 0xbf, back.rdi);
  p = put_movabs(p, 0x48, 0xbe, back.rsi);
  p = put_movabs(p, 0x48, 0xba, back.rdx);
  p = put_movabs(p, 0x49, 0xba, back.r10);
  p = put_movabs(p, 0x49, 0xb8, back.r8);
  p = put_movabs(p, 0x49, 0xb9, back.r9);
  p = put_movabs(p, 0x48, 0xb9, back.rcx);
  p = put_movabs(p, 0x49, 0xbb, back.r11);
  // jmp qword [rip+0]; .quad back.rip: reaches anywhere, uses no register and no stack.
  static const uint8_t kJmpAbs[6] = {0xff, 0x25, 0, 0, 0, 0};
  std::memcpy(p, kJmpAbs, 6);
  const uint64_t to = back.rip;
  std::memcpy(p + 6, &to, 8);
  return s;
}

uint64_t find_stub_area(pid_t pid, MemoryReader& mem) {
  for (const sys::Mapping& m : sys::read_maps(pid)) {
    if (m.path != "[vdso]") continue;
    const uint64_t lo = m.start, hi = m.end;
    Elf64_Ehdr eh;
    if (!mem.read(lo, &eh, sizeof eh) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
        eh.e_ident[EI_CLASS] != ELFCLASS64)
      return 0;
    // The image ends after its last section header, program header or segment.
    uint64_t end = std::max<uint64_t>(eh.e_shoff + uint64_t(eh.e_shnum) * eh.e_shentsize,
                                      eh.e_phoff + uint64_t(eh.e_phnum) * eh.e_phentsize);
    if (eh.e_phentsize == sizeof(Elf64_Phdr) && eh.e_phnum < 64) {
      std::vector<Elf64_Phdr> ph(eh.e_phnum);
      if (!mem.read(lo + eh.e_phoff, ph.data(), ph.size() * sizeof(Elf64_Phdr))) return 0;
      for (const auto& p : ph) end = std::max<uint64_t>(end, p.p_offset + p.p_filesz);
    }
    const uint64_t at = lo + ((end + 63) & ~uint64_t(63));
    if (end == 0 || at + kStubSize > hi) return 0;
    // Unused: zeros, or a stub a killed gotap left.
    std::array<uint8_t, kStubSize> now;
    if (!mem.read(at, now.data(), now.size())) return 0;
    const bool zero = std::all_of(now.begin(), now.end(), [](uint8_t b) { return b == 0; });
    const bool stub = now[0] == 0x0f && now[1] == 0x05 && now[2] == 0x48 && now[3] == 0xb8;
    return zero || stub ? at : 0;
  }
  return 0;
}

}  // namespace gotap::ptrace
