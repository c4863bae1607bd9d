#include "core/plan/probe_detour.h"

#include <cstring>

namespace gotap {

namespace {

// A prologue before the jbe is a few instructions (`mov rcx,fs:[-8]; cmp`, `lea; cmp`, the
// huge frame's `mov; sub; jb; cmp`): anything longer is not a stack check's.
constexpr size_t kMostPrologue = 64;

}  // namespace

size_t detour_span(const FuncPlan& f) {
  if (f.entry_probe_kind != "jcc" || f.entry_probe <= f.entry) return 0;
  const uint64_t n = f.entry_probe - f.entry + 2;  // a jbe's opcode: 76, or 0F 86
  return n <= kMostPrologue ? static_cast<size_t>(n) : 0;
}

bool entry_probe_detoured(const FuncPlan& f, Bytes file, Bytes live) {
  const size_t n = detour_span(f);
  if (!n || file.size() != n || live.size() != n) return false;
  // An int3 on the probe is another matter (a uprobe's, a debugger's), which the backends
  // report as such: only the other bytes are looked at.
  const size_t probe = n - 2;
  return std::memcmp(file.data(), live.data(), probe) != 0 ||
         (live[probe] != 0xcc && live[probe] != file[probe]) || live[probe + 1] != file[probe + 1];
}

}  // namespace gotap
