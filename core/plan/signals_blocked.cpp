#include "core/plan/signals_blocked.h"

#include <algorithm>
#include <cstring>
#include <string_view>

#include "core/binary/elf_file.h"
#include "core/binary/pclntab.h"

namespace gotap {
namespace {

// Read from the runtime's sources of 1.17 to 1.27 (proc.go, os_linux.go, signal_unix.go,
// sys_linux_amd64.s): clone's child runs these until minitSignalMask unblocks signals.
// Whole functions: minit's entry runs blocked, its RET does not, and neither is worth a
// thread's death.
constexpr std::string_view kBlocked[] = {
    "runtime.clone", "runtime.mstart", "runtime.mstart0", "runtime.mstart1", "runtime.asminit",
    "runtime.settls", "runtime.minit", "runtime.minitSignals", "runtime.minitSignalStack",
    "runtime.minitSignalMask", "runtime.gettid", "runtime.signalstack", "runtime.sigaltstack",
    // A cgo thread's start (crosscall1, C) sets g through it, then calls runtime.mstart.
    "setg_gcc", "runtime.setg_gcc",
    // Every handler returns through it (sa_restorer), the net's own for SIGTRAP included,
    // while SIGTRAP is blocked: a leftover int3 there killed the program at the net's first
    // catch. Named sigreturn before 1.21.
    "runtime.sigreturn__sigaction", "runtime.sigreturn"};

}  // namespace

std::vector<std::pair<uint64_t, uint64_t>> signals_blocked_ranges(const Pclntab& pcln) {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  for (std::string_view name : kBlocked)
    for (const PclnFunc* f : pcln.lookup(name))
      if (f->end > f->entry) out.push_back({f->entry, f->end});
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<uint64_t> block_all_sets(const ElfFile& elf, const Pclntab& pcln) {
  const auto funcs = pcln.lookup("runtime.sigblock");
  if (funcs.size() != 1) return {};
  const PclnFunc* f = funcs[0];
  if (f->end <= f->entry || f->end - f->entry > 4096) return {};
  Bytes code = elf.read(f->entry, f->end - f->entry);
  std::vector<uint64_t> out;
  // lea r64, [rip + disp32]: REX.W (48 or 4C), 8D, ModRM with mod 00 and r/m 101.
  for (size_t i = 0; i + 7 <= code.size(); ++i) {
    if ((code[i] != 0x48 && code[i] != 0x4C) || code[i + 1] != 0x8D || (code[i + 2] & 0xC7) != 5)
      continue;
    int32_t disp;
    std::memcpy(&disp, code.data() + i + 3, 4);
    const uint64_t to = f->entry + i + 7 + int64_t(disp);
    if (std::find(out.begin(), out.end(), to) == out.end()) out.push_back(to);
  }
  if (out.empty() || out.size() > 2) return {};  // 1: a release without sigsetAllExiting
  // Both in memory the program writes (.data or .bss), 8-byte aligned.
  for (uint64_t a : out) {
    bool writable = false;
    for (const auto& seg : elf.segments())
      if (seg.type == 1 /* PT_LOAD */ && (seg.flags & 2 /* PF_W */) && a >= seg.vaddr &&
          a + 8 <= seg.vaddr + seg.memsz)
        writable = true;
    if (!writable || a % 8) return {};
  }
  return out;
}

}  // namespace gotap
