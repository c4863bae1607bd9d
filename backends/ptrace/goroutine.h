// The current goroutine at a probe hit: g from R14 (ABIInternal code) or the TLS slot, then
// its goid and stack bounds. Calls are paired by (goid, g.stack.hi - entry RSP), a key that
// survives stack copies and goroutine migration between threads. A gccgo program's g (libgo's,
// core/plan/gccgo_g.h) gives its goid alone: its calls pair by (goid, -RSP).
#pragma once

#include <sys/types.h>
#include <sys/user.h>

#include <cstdint>
#include <optional>

#include "backends/ptrace/memory.h"
#include "core/plan/gccgo_g.h"
#include "core/plan/plan.h"

namespace gotap::ptrace {

struct GInfo {
  uint64_t g = 0;
  int64_t goid = 0;
  uint64_t stack_lo = 0, stack_hi = 0;
};

class GoroutineReader {
 public:
  // pid: the traced process, where a gccgo program's libgo keeps its g.
  GoroutineReader(MemoryReader& mem, const ProbePlan& plan, int pid = 0)
      : mem_(mem), plan_(plan), pid_(pid) {}
  // abi_internal: R14 holds g at this site.
  std::optional<GInfo> current(const user_regs_struct& regs, bool abi_internal);
  // Whether events carry goroutine ids: gc's g, or libgo's once found in the process (at the
  // first hit, when ld.so has loaded libgo; a warning once when it cannot be).
  bool goids();

 private:
  std::optional<GInfo> read_g(uint64_t g, uint64_t sp);
  std::optional<GInfo> gccgo_current(const user_regs_struct& regs);
  MemoryReader& mem_;
  const ProbePlan& plan_;
  int pid_ = 0;
  bool gccgo_tried_ = false;
  std::optional<GccgoGAt> gccgo_;
};

struct CallKey {
  int64_t goid;
  uint64_t frame;  // g.stack.hi - entry RSP
  bool operator==(const CallKey& o) const { return goid == o.goid && frame == o.frame; }
};
struct CallKeyHash {
  size_t operator()(const CallKey& k) const {
    return std::hash<uint64_t>()(static_cast<uint64_t>(k.goid) * 0x9E3779B97F4A7C15ull ^ k.frame);
  }
};

}  // namespace gotap::ptrace
