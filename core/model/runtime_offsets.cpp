#include "core/model/runtime_offsets.h"

namespace gotap {

// Offsets of runtime.g and runtime.m fields on linux/amd64 by release. Rows marked
// "DWARF" were read from the DWARF of binaries built with that toolchain (go 1.19.8,
// 1.21.13, 1.22.12, 1.23.5, 1.24.4, 1.26.10, 1.27.3; tests/unit/test_runtime_offsets.cpp re-checks
// them against every fixture with DWARF). 1.25 was read from the machine code of a go1.25.4
// binary; the others are inferred from the runtime sources.
RuntimeOffsets runtime_offsets_for(const GoVersion& v) {
  RuntimeOffsets o;  // stack 0/8, stackguard0 16, m 48: unchanged from 1.17 to 1.27 (DWARF)
  if (v.at_least(1, 25)) o.gobuf_bp = 40;  // gobuf.ret removed
  if (v.at_least(1, 26)) {
    // DWARF 1.26 and 1.27 (same g; 1.27 changed m only after curg): gobuf lost its ret word (1.25),
    // which moves atomicstatus/goid back and m.procid/m.curg down by 8; new g fields before
    // parentGoid keep it at 280.
    o.g_atomicstatus = 144;
    o.g_goid = 152;
    o.g_parent_goid = 280;
    o.g_waitreason = 176;
    o.g_gopc = 288;
    o.g_startpc = 304;
    o.m_procid = 64;
    o.m_curg = 184;
  } else if (v.at_least(1, 25)) {
    // Read from the code of esbuild 0.27.0's go1.25.4 build (no toolchain to take DWARF
    // from): gopark stores the reason at g+176, newproc1 parentGoid, gopc and startpc at
    // 272, 280 and 296, 8 below where 1.26 stores them (1.26 added a g field before them).
    o.g_atomicstatus = 144;
    o.g_goid = 152;
    o.g_parent_goid = 272;
    o.g_waitreason = 176;
    o.g_gopc = 280;
    o.g_startpc = 296;
    o.m_procid = 64;
    o.m_curg = 184;
  } else if (v.at_least(1, 23)) {
    // DWARF 1.23, 1.24: g.syscallbp was added before atomicstatus.
    o.g_atomicstatus = 152;
    o.g_goid = 160;
    o.g_parent_goid = 280;
    o.g_waitreason = 184;
    o.g_gopc = 288;
    o.g_startpc = 304;
  } else if (v.at_least(1, 21)) {
    // DWARF 1.21, 1.22: parentGoid appears.
    o.g_atomicstatus = 144;
    o.g_goid = 152;
    o.g_parent_goid = 272;
    o.g_waitreason = 176;
    o.g_gopc = 280;
    o.g_startpc = 296;
  } else {
    // DWARF 1.19; 1.17, 1.18 and 1.20 from the sources (same g prefix). No parentGoid.
    o.g_atomicstatus = 144;
    o.g_goid = 152;
    o.g_parent_goid = 0;
    o.g_waitreason = 176;
    o.g_gopc = 296;
    o.g_startpc = 312;
  }
  return o;
}

}  // namespace gotap
