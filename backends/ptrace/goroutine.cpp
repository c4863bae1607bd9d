#include "backends/ptrace/goroutine.h"

#include <algorithm>
#include <cstring>

namespace gotap::ptrace {

std::optional<GInfo> GoroutineReader::read_g(uint64_t g, uint64_t sp) {
  if (g == 0) return std::nullopt;
  const RuntimeOffsets& o = plan_.offsets;
  uint32_t end = std::max({o.g_goid + 8, o.g_stack_hi + 8, o.g_stack_lo + 8});
  if (end > 512) return std::nullopt;
  uint8_t buf[512];
  if (!mem_.read(g, buf, end)) return std::nullopt;
  GInfo gi;
  gi.g = g;
  std::memcpy(&gi.goid, buf + o.g_goid, 8);
  std::memcpy(&gi.stack_lo, buf + o.g_stack_lo, 8);
  std::memcpy(&gi.stack_hi, buf + o.g_stack_hi, 8);
  // The stack must hold sp; otherwise this is not the running goroutine's g.
  if (sp && (sp < gi.stack_lo || sp > gi.stack_hi)) return std::nullopt;
  return gi;
}

std::optional<GInfo> GoroutineReader::current(const user_regs_struct& regs, bool abi_internal) {
  // libgo's g is not gc's: nothing is read as one.
  if (!plan_.reads_g) return std::nullopt;
  if (abi_internal) {
    if (auto gi = read_g(regs.r14, regs.rsp)) return gi;
  }
  uint64_t g = 0;
  if (regs.fs_base && mem_.read(regs.fs_base + plan_.tls_g_offset, &g, 8)) {
    if (auto gi = read_g(g, regs.rsp)) return gi;
  }
  return std::nullopt;
}

}  // namespace gotap::ptrace
