#include "backends/ebpf/insn_filter.h"

namespace gotap::ebpf {

bool uprobe_can_probe(Bytes code) {
  size_t i = 0;
  for (; i < code.size(); ++i) {
    uint8_t b = code[i];
    if (b == 0xf0 || b == 0x26 || b == 0x2e || b == 0x36 || b == 0x3e) return false;
    if (b == 0x66 || b == 0x67 || b == 0xf2 || b == 0xf3 || b == 0x64 || b == 0x65) continue;
    break;
  }
  uint8_t rex = 0;
  if (i < code.size() && (code[i] & 0xf0) == 0x40) rex = code[i++];
  if (i >= code.size()) return true;  // unknown: let the kernel decide
  uint8_t op = code[i];
  // The kernel takes any 0x90 for a NOP and skips it instead of stepping it, but with REX.B
  // it is `xchg rax, r8..r15`: Go's runtime.gcWriteBarrierR8 (Go 1.17 to 1.20) starts with
  // one, and a uprobe there crashed the program.
  if (op == 0x90 && (rex & 0x01)) return false;
  if (op == 0x62) return false;                                                // EVEX
  if (op >= 0xcc && op <= 0xce) return false;                                  // INT3, INT n, INTO
  if (op == 0xf4) return false;                                                // HLT
  if ((op >= 0xe4 && op <= 0xe7) || (op >= 0xec && op <= 0xef)) return false;  // IN/OUT
  return true;
}

}  // namespace gotap::ebpf
