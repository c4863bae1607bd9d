// Offsets into the Go runtime's structures (runtime.g, runtime.m, ...) per Go version, for
// binaries without DWARF. DWARF, when present, overrides them (see GoBinary).
#pragma once

#include <cstdint>
#include <string>

#include "core/model/go_version.h"

namespace gotap {

struct RuntimeOffsets {
  uint32_t g_stack_lo = 0;
  uint32_t g_stack_hi = 8;
  uint32_t g_stackguard0 = 16;
  uint32_t g_m = 48;
  uint32_t g_atomicstatus = 144;
  uint32_t g_goid = 152;
  uint32_t g_parent_goid = 0;  // 0: unknown
  uint32_t g_waitreason = 0;   // uint8; 0: unknown
  uint32_t g_gopc = 0;         // pc of the go statement that created it; 0: unknown
  uint32_t g_startpc = 0;      // pc of its start function; 0: unknown
  // g.sched, the gobuf a goroutine's pc, sp and bp are saved in when it is switched out
  // (parked, or its thread on the system stack), and the gobuf's pc and bp.
  uint32_t g_sched = 56;
  uint32_t gobuf_pc = 8;
  uint32_t gobuf_bp = 48;
  uint32_t m_procid = 72;
  uint32_t m_curg = 192;
  std::string source = "table";  // "table" (per-version) or "dwarf"
};

RuntimeOffsets runtime_offsets_for(const GoVersion& v);

}  // namespace gotap
