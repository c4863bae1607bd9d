// A Go binary with everything the resolver knows about it: ELF, build info, pclntab,
// DWARF (when present), and the runtime offsets. The one entry point for commands.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/binary/buildinfo.h"
#include "core/binary/debuginfo.h"
#include "core/binary/dwarf_info.h"
#include "core/binary/elf_file.h"
#include "core/binary/method_table.h"
#include "core/binary/pclntab.h"
#include "core/binary/type_names.h"
#include "core/model/go_types.h"
#include "core/model/runtime_offsets.h"
#include "core/plan/plan.h"

namespace gotap {

struct CodeBlocks;  // core/plan/inline_mark.h

struct PlanOptions {
  bool probe_inline_sites = true;
  // Where plans are cached (core/plan/plan_cache.h); "" plans every time.
  std::string cache_dir;
};

struct OpenOptions {
  // Without DWARF inside, look for a separate debug file (core/binary/debuginfo.h).
  bool find_debuginfo = true;
  std::vector<std::string> debug_dirs;  // --debug-dir: searched as /usr/lib/debug is
};

class GoBinary {
 public:
  // BadInput errors: not ELF, not Go, corrupt pclntab.
  static Result<std::unique_ptr<GoBinary>> open(const std::string& path);
  static Result<std::unique_ptr<GoBinary>> open(const std::string& path, const OpenOptions& opts);

  const ElfFile& elf() const { return *elf_; }
  const BuildInfo& buildinfo() const { return buildinfo_; }
  const Pclntab& pclntab() const { return pclntab_; }
  const DwarfInfo* dwarf() const { return dwarf_.get(); }  // null without DWARF
  // Where the DWARF came from when it is not in the binary itself.
  const std::optional<DebugFile>& debug_file() const { return debug_file_; }
  const RuntimeOffsets& offsets() const { return offsets_; }
  // The types the plan's ParamLoc.type ids name: DWARF's, or without DWARF the runtime type
  // descriptors that method-table signatures reached (null before any).
  const TypeGraph* types() const;
  // Where the type descriptors are in the file (link-time addresses; add the load bias for
  // the running process).
  RtypeEnv rtype_env() const;
  // Method signatures from the type descriptors; scanned on first use. Null with DWARF, which
  // knows better.
  const MethodTables* method_tables() const;
  // How many functions get their signature from each source ("dwarf", "debuginfo",
  // "method-table", "arginfo", "none"), over every function a pattern can name.
  std::map<std::string, size_t> signature_counts() const;
  bool regabi() const;
  bool cgo() const;
  // Where the TLS slot holding g sits relative to FS_base (-8 unless externally linked).
  int64_t tls_g_offset() const { return tls_g_offset_; }
  // Problems found while opening that did not stop it (e.g. unreadable DWARF).
  const std::vector<std::string>& warnings() const { return warnings_; }

  // Every traceable function name: out-of-line functions and inlined-only callees.
  // Plans the functions matching any pattern. Error (BadInput) names the first pattern that
  // matches nothing.
  // The plan's binary_view points into this object.
  Result<ProbePlan> plan(const std::vector<std::string>& patterns, const PlanOptions& o) const;
  // The plan cache's key (core/plan/plan_cache.h): gotap's executable, this file and its
  // build IDs, the debug file, the patterns and options. "" when the file cannot be
  // identified (then nothing is cached).
  std::string plan_cache_key(const std::vector<std::string>& patterns, const PlanOptions& o) const;
  // What the backends need of this binary; valid while it lives.
  BinaryView view() const;

  // Where the goroutine probes go (the entry probes of runtime.casgstatus and
  // runtime.newproc1). BadInput when the runtime has neither.
  // syscalls: also runtime.entersyscall and runtime.exitsyscall (GoroutineProbes::sys_enter).
  Result<GoroutineProbes> goroutine_probes(bool syscalls = false) const;

  // Every inline-tree node of every function, sorted by callee name; built on first use
  // (it decodes every function's inline tree).
  struct InlineNode {
    std::string_view callee;
    uint32_t outer = 0;  // index into pclntab().all_funcs()
    int32_t node = 0;    // index in the outer function's inline tree
  };
  const std::vector<InlineNode>& inline_nodes() const;

  // How many inlined calls of the whole binary get a probe, and how many are skipped
  // (decodes every function that has inlined calls).
  struct InlineStats {
    size_t probed = 0, skipped = 0;
  };
  InlineStats inline_stats() const;

 private:
  GoBinary() = default;
  // `decoded`: f's code already decoded (decode_blocks), else it is decoded here.
  FuncPlan plan_func(const PclnFunc& f, std::vector<std::string>& warnings,
                     const CodeBlocks* decoded = nullptr) const;
  // The sites probed; `skipped` gets those with no instruction that runs once per call.
  std::vector<InlineSite> inline_sites(std::string_view name,
                                       std::vector<InlineSite>* skipped = nullptr) const;
  // inline_sites of every name at once: each outer function is decoded once for all the
  // callees it inlines, not once per callee (a whole-binary plan decoded the large ones
  // hundreds of times). Same sites, in the same order, as inline_sites gives for each name.
  struct SitesOf {
    std::vector<InlineSite> probed, skipped;
  };
  // With `plan`, the functions plan->order are planned in the same pass (into plan->planned
  // and plan->warned, by position): a function both planned and holding inlined calls is
  // decoded once for both.
  struct PlanWork {
    std::vector<uint32_t> order;  // indices into all_funcs(), ascending
    // Where order[k]'s plan goes in `planned` (its place in the final plan, whose other
    // places are left for the inlined-only functions): each FuncPlan is made in its place,
    // never moved (sorting a whole binary's plan held it twice).
    std::vector<uint32_t> place;
    std::vector<FuncPlan> planned;
    std::vector<std::vector<std::string>> warned;  // by position in order
  };
  std::unordered_map<std::string_view, SitesOf> inline_sites_of(
      const std::set<std::string_view>& names, PlanWork* plan = nullptr) const;
  int64_t compute_tls_g_offset() const;
  const DwarfFunc* dwarf_func(const PclnFunc& f) const;
  // Adds the types of these signatures to the runtime-type graph (one index pass).
  void add_method_types(const std::vector<MethodSignature>& sigs) const;

  int64_t tls_g_offset_ = -8;
  std::vector<std::string> warnings_;
  // The sites of inline nodes `wanted` of function `outer` (an index in all_funcs()).
  // Each wanted inline node of `outer`, with its callee's name, probed or skipped.
  using SiteSink = std::function<void(std::string_view callee, InlineSite&& site, bool probed)>;
  // `decoded`: the function's code already decoded with its dominators, else decoded here.
  void sites_in(uint32_t outer, const std::set<int32_t>& wanted, const SiteSink& emit,
                const CodeBlocks* decoded = nullptr) const;
  mutable std::once_flag inline_once_;
  mutable std::vector<InlineNode> inline_nodes_;
  mutable std::once_flag symbols_once_;
  mutable std::unordered_map<uint64_t, std::string_view> symbol_at_;  // .symtab by address
  std::unique_ptr<ElfFile> elf_;
  BuildInfo buildinfo_;
  Pclntab pclntab_;
  std::unique_ptr<DwarfInfo> dwarf_;
  std::optional<DebugFile> debug_file_;
  RuntimeOffsets offsets_;
  mutable std::once_flag methods_once_;
  mutable std::unique_ptr<MethodTables> methods_;
  mutable std::unique_ptr<TypeGraph> rtypes_;
  mutable std::mutex types_mu_;  // add_method_types
  mutable std::once_flag type_names_once_;
  mutable std::unique_ptr<TypeNames> type_names_;  // its index is built on first use
};

}  // namespace gotap
