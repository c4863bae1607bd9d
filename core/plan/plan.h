// The probe plan: what both backends execute. Computed once, in core, from the binary and the
// user's patterns: per function the entry probe site, every RET site, where each argument and
// result lives, and where the function was inlined; plus how to find the goroutine id.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/model/go_version.h"
#include "core/model/runtime_offsets.h"
#include "core/plan/abi.h"
#include "core/plan/binary_view.h"

namespace gotap {

// A whole binary has tens of thousands of inline sites, each naming its outer function and
// file: copied into each site, they were 15% of a cold plan's time (malloc and free) and a
// good part of its memory. They are views instead: into the binary's pclntab (a plan made by
// GoBinary::plan, valid while the GoBinary lives, as its binary_view is), into the strings a
// plan read from the cache keeps (ProbePlan::strings), or of string literals.
struct InlineSite {
  std::string_view outer;  // the function it was inlined into
  // The call-site mark (the inline tree's parentPc): the entry probe of a probed site.
  uint64_t pc = 0;
  std::string_view file;  // the call site
  int line = 0;
  int32_t sp_delta = 0;  // the outer function's frame there (pcsp): its SP is RSP + sp_delta
  std::string_view skip_reason;  // why a skipped site has no probe ("" for a probed one)
};

struct FuncPlan {
  std::string name;
  uint64_t entry = 0, end = 0;  // 0 when the function exists only inlined
  uint64_t entry_probe = 0;
  // "push_rbp": the `push rbp` after the stack check (kernel-emulated, fires once per call);
  // "jcc": the stack check's conditional jump (emulated, refires after morestack);
  // "entry": the first instruction (refires after morestack when there is a stack check).
  std::string entry_probe_kind;
  bool entry_refires = false;  // a re-entry after morestack hits the entry probe again
  // The stack check's CALL to runtime.morestack* (0: none found): a backend that counts in
  // the kernel subtracts the refire there instead of tracking returns.
  uint64_t morestack_call = 0;
  std::vector<uint64_t> ret_sites;
  std::vector<uint64_t> tail_jumps;
  std::string abi;  // "internal" or "abi0"
  // "dwarf" (in the binary), "debuginfo" (a separate debug file), "arginfo" or "none".
  std::string args_source;
  std::vector<ParamLoc> args;
  std::vector<ParamLoc> results;
  // SP delta at the entry probe (pcsp). Every entry probe sits before the frame is
  // allocated, and every RET and tail jump after it is torn down, so both are 0 in practice
  // (tests/unit/test_plan.cpp checks it); backends still add it.
  int32_t frame_size = 0;
  std::string file;
  int line = 0;
  std::vector<InlineSite> inline_sites;
  // Inlined calls with no instruction that provably runs once per call: never probed, since
  // a probe there could count calls that did not happen.
  std::vector<InlineSite> inline_skipped;
  bool inline_probed = true;  // inline sites get entry probes in this plan
};

// The runtime functions `gotap goroutines` probes at their entry; 0: not probed.
struct GoroutineProbes {
  uint64_t status = 0;  // runtime.casgstatus(gp, oldval, newval): every status change
  // SP delta at that probe: the return address (its caller) is at RSP + status_sp_delta.
  int32_t status_sp_delta = 0;
  uint64_t create = 0;  // runtime.newproc1(fn, ..., callergp, callerpc): every go statement
  int32_t create_sp_delta = 0;
  // Which ABIInternal integer argument (0 RAX, 1 RBX, 2 RCX, 3 RDI, 4 RSI) of newproc1 holds
  // callergp and callerpc: Go 1.18+ has newproc1(fn, callergp, callerpc), Go 1.17
  // newproc1(fn, argp, narg, callergp, callerpc).
  // kNoArg: newproc1's signature is not one gotap knows; creations then have no parent or
  // creator (never values read from the wrong register), and `warnings` says so.
  static constexpr uint8_t kNoArg = 0xff;
  uint8_t create_gp_arg = 1;
  uint8_t create_pc_arg = 2;
  // newproc1's RET sites, where RAX is the new g: up to Go 1.23 its goid is set only after
  // the status change that makes it runnable.
  std::vector<uint64_t> created;
  // --why: at a park and at a wake-up, also walk the stack of the goroutine parked and of
  // the one that woke it (core/why/why_tracker.h).
  bool walk = false;
  // Whether every goroutine's status changes are wanted (--goroutines, `gotap goroutines`), or
  // (--why alone) only those of goroutines with a traced call open: eBPF then drops the rest
  // in the kernel.
  bool all_changes = true;
  // --why on Go 1.26 and later, whose fast system-call path changes a goroutine's status
  // without casgstatus: the entries of runtime.entersyscall and runtime.exitsyscall stand for
  // its running -> syscall and syscall -> running changes (0: not probed).
  uint64_t sys_enter = 0, sys_exit = 0;
  // gccgo's libgo (GccgoBinary::goroutine_probes): casgstatus(gp, old, new) takes System V
  // arguments (RDI, ESI, EDX), and creation is __go_go(fn, arg) *g: fn (RDI) is the start
  // function's code, the parent is the goroutine running it, and the go statement is at its
  // return address. create_gp_arg and create_pc_arg do not apply.
  bool sysv = false;
  // The file these probes go into when it is not the planned binary's: libgo.so for a gccgo
  // program linked against it. Owned by the GccgoBinary that made them.
  const ElfFile* image = nullptr;
  const std::vector<GccgoFunc>* image_funcs = nullptr;  // its functions, by entry
  std::vector<std::string> warnings;                    // once each, for the user
};

// Where a gccgo program keeps its current g: libgo's thread-local variable `runtime.g`
// (core/plan/gccgo_g.h). Only the goroutine id is read from that g.
struct GccgoG {
  enum class Tls : uint8_t {
    None,    // no goid is read: why_not says why
    Exec,    // libgo linked in: local-exec TLS, the g pointer at FS base + fs_offset
    Module,  // in libgo.so: its TLS block, found per process through the thread's DTV
  };
  Tls tls = Tls::None;
  int64_t fs_offset = 0;
  std::string libgo;  // Module: the soname of the libgo.so that defines it ("libgo.so.21")
  uint32_t g_goid = 0;
  std::string why_not;
};

struct ProbePlan {
  std::string binary;
  GoVersion go;
  bool pie = false;
  bool regabi = true;
  RuntimeOffsets offsets;
  // runtime.waitReasonStrings: gotap's table for the release, else read from the binary
  // (core/binary/wait_reason_table.h); empty when neither has it.
  std::vector<std::string> wait_reasons;
  // How the backends find the current g: R14 (ABIInternal code) or the TLS slot at
  // FS_base + tls_g_offset (ABI0 / cgo / Go < 1.17).
  int64_t tls_g_offset = -8;
  // False for a gccgo program: libgo's g is not gc's, so the backends read no gc g. Its
  // goroutine ids come from gccgo_g; without them calls pair by stack pointer alone and
  // events carry no goid (kNoGoid).
  bool reads_g = true;
  // A gccgo program's goroutine ids (with reads_g false).
  GccgoG gccgo_g;
  bool has_goids() const { return reads_g || gccgo_g.tls != GccgoG::Tls::None; }
  std::vector<FuncPlan> funcs;
  GoroutineProbes goroutines;
  std::vector<std::string> warnings;  // e.g. inlined sites not probed
  // The binary the plan was made from, for the backends (lifetime: core/plan/binary_view.h).
  BinaryView binary_view;
  // The bytes the inline sites' views point into when the plan came from the cache (null
  // when they point into the binary).
  std::shared_ptr<const std::string> strings;

  // entry probes + RET sites and tail jumps + inline sites + goroutine probes
  size_t probe_count() const;
};

// Key order is fixed ("event" first) so the output reads like docs/json.md's examples.
nlohmann::ordered_json to_json(const ParamLoc& p);
nlohmann::ordered_json to_json(const FuncPlan& f);
std::string hex(uint64_t v);  // "0x4c0460"

}  // namespace gotap
