#include "backends/ptrace/goroutine.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

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

bool GoroutineReader::goids() {
  if (plan_.reads_g) return true;
  if (plan_.gccgo_g.tls == GccgoG::Tls::None || pid_ <= 0) return false;
  if (!gccgo_tried_) {
    gccgo_tried_ = true;
    auto at = locate_gccgo_g(plan_.gccgo_g, pid_);
    if (at)
      gccgo_ = *at;
    else
      fmt::print(stderr, "gotap: warning: goroutine ids are not read: {}\n", at.error().message);
  }
  return gccgo_.has_value();
}

std::optional<GInfo> GoroutineReader::gccgo_current(const user_regs_struct& regs) {
  if (!goids()) return std::nullopt;
  auto read = [&](uint64_t at, uint64_t* v) { return mem_.read(at, v, 8); };
  uint64_t slot = gccgo_g_slot(*gccgo_, regs.fs_base, read), g = 0;
  GInfo gi;
  if (!slot || !read(slot, &g) || !g || !mem_.read(g + gccgo_->g_goid, &gi.goid, 8))
    return std::nullopt;
  gi.g = g;
  return gi;
}

std::optional<GInfo> GoroutineReader::current(const user_regs_struct& regs, bool abi_internal) {
  // libgo's g is not gc's: only its goid is read.
  if (!plan_.reads_g) return gccgo_current(regs);
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
