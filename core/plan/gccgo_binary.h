// A gccgo executable (or libgo itself): functions from the ELF symbol tables with gccgo's
// mangling undone, their code's entry and RET sites, and with DWARF their parameters and
// results placed by the System V ABI. What `info` and `funcs` show, and the plan `count`,
// `trace` and `latency` run; of libgo's g only the goroutine id is read (ProbePlan::gccgo_g).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/binary/elf_file.h"
#include "core/binary/gccgo_dwarf.h"
#include "core/binary/gccgo_symbols.h"
#include "core/model/result.h"
#include "core/plan/gccgo_types.h"
#include "core/plan/plan.h"

namespace gotap {

struct GccgoFunc {
  // The Go name, GCC clone suffix kept ("main.add.constprop.0"); pkg.(*T).M for a method
  // whose DWARF shows a pointer receiver.
  std::string name;
  std::string symbol;  // as in the symbol table
  uint64_t entry = 0, size = 0;
  bool global = false;
};

class GccgoBinary {
 public:
  // BadInput when the file is not ELF or not gccgo's (then GoBinary's error applies).
  static Result<std::unique_ptr<GccgoBinary>> open(const std::string& path);
  // True when `path` is a readable ELF file that gccgo made: for the tracing commands'
  // refusal. Never fails.
  static bool is_gccgo(const std::string& path);

  const ElfFile& elf() const { return *elf_; }
  const GccgoFacts& facts() const { return facts_; }
  const GccgoDwarf* dwarf() const { return dwarf_.get(); }
  // The Go functions: symbols whose name, without a GCC clone suffix, has a '.' (C
  // functions, from libgcc's split-stack support to _start, have none).
  const std::vector<GccgoFunc>& funcs() const { return funcs_; }
  const std::string& symbol_table() const { return table_; }
  // "go1.18", from the GCC release in DW_AT_producer or the libgo needed; "" when unknown.
  std::string go_version() const;
  // "dwarf_producer", "libgo_soname" (stripped, linked against a known libgo), "none".
  std::string go_version_source() const;
  const std::vector<std::string>& warnings() const { return warnings_; }

  nlohmann::json info_json() const;
  // Functions whose Go name, with or without the clone suffix, matches a pattern. BadInput
  // names the first pattern matching nothing. The plan's binary_view points into this
  // object: valid while it lives.
  Result<ProbePlan> plan(const std::vector<std::string>& patterns) const;
  // libgo's status changes (runtime.casgstatus) and creations (__go_go, libgo's newproc): in
  // the program when libgo is linked in, else in the libgo.so that process `pid` maps (or,
  // without one, the one ld.so would load), opened here and kept (GoroutineProbes::image).
  // BadInput naming what is missing.
  Result<GoroutineProbes> goroutine_probes(int pid = 0) const;
  // libgo's g offsets gotap reads for goroutine events (goid, status, waitreason, gopc,
  // startpc), for a GCC release it knows.
  static std::optional<RuntimeOffsets> libgo_offsets(int gcc_major);

 private:
  GccgoBinary() = default;
  FuncPlan plan_func(const GccgoFunc& f) const;
  const GccgoDwarfFunc* dwarf_func(uint64_t entry) const;  // the DWARF at this entry

  std::unique_ptr<ElfFile> elf_;
  GccgoFacts facts_;
  std::unique_ptr<GccgoDwarf> dwarf_;
  GccgoTypes types_;  // of every parameter DWARF gives: the plans' binary_view.types
  std::vector<GccgoFunc> funcs_;
  std::string table_;
  std::vector<std::string> warnings_;
  mutable std::unique_ptr<ElfFile> libgo_;  // goroutine_probes' libgo.so
  mutable std::vector<GccgoFunc> libgo_funcs_;
};

// The Go functions of a symbol table (names demangled, one per address, by entry).
std::vector<GccgoFunc> gccgo_functions(const GccgoSymbols& syms);
// The function of `funcs` (by entry) that holds pc; "" when none.
std::string gccgo_func_name(const std::vector<GccgoFunc>& funcs, uint64_t pc);

// The RET that follows the CALL to __morestack on the split-stack path of a function whose
// code is `code` (at `entry`): after a stack switch, the body returns into __morestack and
// this RET then returns to the caller a second time, so it is no return site of its own.
// 0 when the function has no split-stack prologue. Sets *call to the CALL.
uint64_t morestack_ret(Bytes code, uint64_t entry, uint64_t* call);

}  // namespace gotap
