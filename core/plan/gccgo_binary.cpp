#include "core/plan/gccgo_binary.h"

#include <elf.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>

#include <fmt/format.h>

#include "core/binary/wait_reason_table.h"
#include "core/plan/disasm.h"
#include "core/plan/gccgo_g.h"
#include "core/plan/pattern.h"
#include "core/plan/sysv_abi.h"

namespace gotap {

namespace {

// The target of a JB/JNAE at `code` (rel8 or rel32), or 0.
uint64_t jb_target(Bytes code, uint64_t addr) {
  if (code.size() >= 2 && code[0] == 0x72) return addr + 2 + int8_t(code[1]);
  if (code.size() >= 6 && code[0] == 0x0f && code[1] == 0x82) {
    int32_t rel;
    std::memcpy(&rel, code.data() + 2, 4);
    return addr + 6 + int64_t(rel);
  }
  return 0;
}

// `cmp reg, fs:[0x70]`: split-stack's check of the stack limit in the TCB.
bool is_stack_limit_cmp(Bytes insn) {
  static constexpr uint8_t kLimit[] = {0x25, 0x70, 0x00, 0x00, 0x00};
  return insn.size() >= 9 && insn[0] == 0x64 && insn[2] == 0x3b &&
         std::memcmp(insn.data() + insn.size() - 5, kLimit, 5) == 0;
}

}  // namespace

uint64_t morestack_ret(Bytes code, uint64_t entry, uint64_t* call) {
  // The prologue: [lea r11, [rsp-N];] cmp rsp|r11, fs:[0x70]; jb stub. The stub: moves of
  // the frame size into r10/r11, call __morestack, ret, jmp back to the body.
  uint64_t at = 0;
  bool cmp = false;
  for (int i = 0; i < 3 && at < code.size(); ++i) {
    unsigned len = instruction_length(code.subspan(at), entry + at);
    if (len == 0) return 0;
    Bytes insn = code.subspan(at, len);
    if (is_stack_limit_cmp(insn)) {
      cmp = true;
    } else if (cmp) {
      uint64_t stub = jb_target(insn, entry + at);
      if (stub <= entry || stub >= entry + code.size()) return 0;
      uint64_t s = stub - entry;
      for (int k = 0; k < 8 && s < code.size(); ++k) {
        InsnKind kind = instruction_kind(code.subspan(s));
        if (kind.len == 0) return 0;
        if (kind.call) {
          uint64_t next = s + kind.len;
          if (next >= code.size() || !instruction_kind(code.subspan(next)).ret) return 0;
          if (call) *call = entry + s;
          return entry + next;
        }
        s += kind.len;
      }
      return 0;
    }
    at += len;
  }
  return 0;
}

std::vector<GccgoFunc> gccgo_functions(const GccgoSymbols& syms) {
  std::vector<GccgoFunc> funcs;
  for (const auto& s : syms.funcs) {
    std::string_view base =
        std::string_view(s.symbol).substr(0, s.symbol.size() - gcc_clone_suffix(s.symbol).size());
    if (base.find('.') == std::string_view::npos || base.front() == '.') continue;
    funcs.push_back({gccgo_demangle(s.symbol), s.symbol, s.value, s.size, s.global});
  }
  // One function per address: the symbol table may list an alias twice (.symtab has both
  // a global and a local name for some libgo functions); the global one stays.
  std::stable_sort(funcs.begin(), funcs.end(), [](const GccgoFunc& x, const GccgoFunc& y) {
    return x.entry != y.entry ? x.entry < y.entry : x.global > y.global;
  });
  funcs.erase(std::unique(funcs.begin(), funcs.end(),
                          [](const GccgoFunc& x, const GccgoFunc& y) {
                            return x.entry == y.entry && x.name == y.name;
                          }),
              funcs.end());
  return funcs;
}

std::string gccgo_func_name(const std::vector<GccgoFunc>& funcs, uint64_t pc) {
  auto it = std::upper_bound(funcs.begin(), funcs.end(), pc,
                             [](uint64_t v, const GccgoFunc& f) { return v < f.entry; });
  if (it == funcs.begin()) return "";
  --it;
  return pc < it->entry + it->size ? it->name : std::string();
}

bool GccgoBinary::is_gccgo(const std::string& path) {
  auto elf = ElfFile::open(path);
  return elf && detect_gccgo(**elf).gccgo;
}

Result<std::unique_ptr<GccgoBinary>> GccgoBinary::open(const std::string& path) {
  auto elf = ElfFile::open(path);
  if (!elf) return elf.error();
  std::unique_ptr<GccgoBinary> b(new GccgoBinary());
  b->elf_ = std::move(*elf);
  b->facts_ = detect_gccgo(*b->elf_);
  if (!b->facts_.gccgo) return make_error("{}: not a gccgo binary", path);
  GccgoSymbols syms = read_function_symbols(*b->elf_);
  b->table_ = syms.table;
  if (!syms.error.empty()) b->warnings_.push_back(syms.error);
  b->funcs_ = gccgo_functions(syms);
  auto dw = read_gccgo_dwarf(*b->elf_);
  if (!dw)
    b->warnings_.push_back(dw.error().message);
  else
    b->dwarf_ = std::move(*dw);
  if (b->dwarf_) {
    // Interfaces by name first (a name DWARF also gives another type is not one).
    // Struct fields and pointers' structs included.
    std::map<std::string, std::pair<int, bool>> ifaces;  // name: (1 iface, 2 other), empty
    // A struct is its layout's type (core/plan/gccgo_types.h): a struct of an interface's
    // name (strings.Reader, io.Reader: both "Reader" in gccgo's DWARF) leaves it one.
    std::function<void(const SysvType&)> note = [&](const SysvType& t) {
      auto& [how, empty] = ifaces[t.name];
      how |= t.iface ? 1 : t.fields.empty() ? 2 : 0;
      empty = t.empty;
      for (const auto& f : t.fields) note(f.type);
      for (const auto& e : t.pointee) note(e);
    };
    for (const auto& f : b->dwarf_->funcs)
      for (const auto* list : {&f.params, &f.results})
        for (const auto& p : *list) note(p.type);
    for (const auto& [name, v] : ifaces)
      if (v.first == 1 && name != "error" && name != "interface {}")
        b->types_.add_interface(name, v.second);
    for (const auto& f : b->dwarf_->funcs) {
      for (const auto& p : f.params) b->types_.add(p.type);
      for (const auto& r : f.results) b->types_.add(r.type);
    }
    b->types_.finish();
  }
  // Methods with a pointer receiver read as gc names them, pkg.(*T).M, when DWARF tells.
  for (auto& f : b->funcs_)
    if (const GccgoDwarfFunc* d = b->dwarf_func(f.entry);
        d && !d->receiver_copied && !d->params.empty() &&
        d->params[0].type.name.rfind('*', 0) == 0 && gcc_clone_suffix(f.symbol).empty())
      if (std::string p = pointer_method_name(f.symbol, f.name); !p.empty()) f.name = p;
  return b;
}

std::string GccgoBinary::go_version() const {
  if (dwarf_) return gccgo_go_version(gnu_go_major(dwarf_->producer));
  // Without DWARF, the libgo the program needs: libgo.so.21 is GCC 12's (Debian's libgo21,
  // built from gcc-12).
  const std::string& lib = facts_.libgo.empty() ? facts_.soname : facts_.libgo;
  return lib == "libgo.so.21" ? gccgo_go_version(12) : "";
}

std::string GccgoBinary::go_version_source() const {
  if (go_version().empty()) return "none";
  return dwarf_ ? "dwarf_producer" : "libgo_soname";
}

nlohmann::json GccgoBinary::info_json() const {
  size_t global = 0;
  for (const auto& f : funcs_) global += f.global;
  nlohmann::json j = {
      {"event", "info"},
      {"path", elf_->path()},
      {"compiler", "gccgo"},
      {"go_version", go_version()},
      {"go_version_source", go_version_source()},
      {"gccgo_evidence", facts_.evidence},
      // Linked against libgo.so ("libgo.so.21"), with libgo inside ("static"), or libgo
      // itself ("self").
      {"libgo", facts_.soname.rfind("libgo.so", 0) == 0 ? "self"
                : facts_.libgo.empty()                  ? "static"
                                                        : facts_.libgo},
      {"symbol_table", table_.empty() ? "none" : table_},
      {"stripped", !elf_->has_symtab()},
      {"dwarf", dwarf_ != nullptr},
      {"pie", elf_->is_pie()},
      {"functions", funcs_.size()},
      {"global_functions", global},
  };
  if (dwarf_) j["dwarf_producer"] = dwarf_->producer;
  j["warnings"] = warnings_;
  return j;
}

const GccgoDwarfFunc* GccgoBinary::dwarf_func(uint64_t entry) const {
  if (!dwarf_) return nullptr;
  auto it = std::lower_bound(dwarf_->funcs.begin(), dwarf_->funcs.end(), entry,
                             [](const GccgoDwarfFunc& d, uint64_t pc) { return d.low_pc < pc; });
  return it != dwarf_->funcs.end() && it->low_pc == entry ? &*it : nullptr;
}

FuncPlan GccgoBinary::plan_func(const GccgoFunc& f) const {
  FuncPlan p;
  p.name = f.name;
  p.entry = f.entry;
  p.end = f.entry + f.size;
  p.entry_probe = f.entry;
  // The split-stack check jumps away before the body and comes back after the new stack
  // is set up, without passing the entry again: the entry runs once per call.
  p.entry_probe_kind = "entry";
  p.abi = "sysv";
  p.args_source = "none";
  Bytes code = elf_->read(f.entry, f.size);
  if (!code.empty() && code.size() == f.size) {
    FuncCode fc = analyze_function(code, f.entry);
    uint64_t call = 0;
    uint64_t skip = morestack_ret(code, f.entry, &call);
    if (skip) p.morestack_call = call;
    for (uint64_t r : fc.rets)
      if (r != skip) p.ret_sites.push_back(r);
    p.tail_jumps = fc.tail_jumps;
  }
  // A GCC clone (".constprop", ".isra") may take other parameters than the Go function
  // DWARF describes, so a clone gets none.
  if (const GccgoDwarfFunc* d = dwarf_func(f.entry); d && gcc_clone_suffix(f.symbol).empty()) {
    SysvAssignment a = assign_sysv(*d);
    p.args = std::move(a.args);
    p.results = std::move(a.results);
    // One place per parameter and per result, in DWARF's order (assign_sysv).
    for (size_t i = 0; i < p.args.size() && i < d->params.size(); ++i)
      p.args[i].type = types_.find(d->params[i].type);
    for (size_t i = 0; i < p.results.size() && i < d->results.size(); ++i)
      p.results[i].type = types_.find(d->results[i].type);
    p.args_source = "dwarf";
  }
  return p;
}

std::optional<RuntimeOffsets> GccgoBinary::libgo_offsets(int gcc_major) {
  auto goid = libgo_goid_offset(gcc_major);
  if (!goid) return std::nullopt;
  // GCC 12's libgo `struct g` (its DWARF, checked by test_gccgo_g.cpp): atomicstatus 48,
  // goid 56, waitreason (uint8) 80, gopc 200, startpc 216. No parentGoid (Go 1.18).
  RuntimeOffsets o;
  o.g_atomicstatus = 48;
  o.g_goid = *goid;
  o.g_waitreason = 80;
  o.g_gopc = 200;
  o.g_startpc = 216;
  return o;
}

namespace {

// The RET sites of a function of `elf`, the split-stack path's second RET left out.
std::vector<uint64_t> return_sites(const ElfFile& elf, uint64_t entry, uint64_t size) {
  std::vector<uint64_t> out;
  Bytes code = elf.read(entry, size);
  if (code.empty() || code.size() != size) return out;
  uint64_t call = 0;
  const uint64_t skip = morestack_ret(code, entry, &call);
  for (uint64_t r : analyze_function(code, entry).rets)
    if (r != skip) out.push_back(r);
  return out;
}

// The directories of a search list, as ld.so reads it: entries separated by ':' (and ';' in
// LD_LIBRARY_PATH), an empty one the current directory (the launched program's is gotap's),
// $ORIGIN (or ${ORIGIN}) the directory of the program itself.
void add_search_dirs(std::vector<std::string>& dirs, std::string_view list,
                     const std::string& origin, std::string_view separators = ":") {
  if (list.empty()) return;
  for (size_t at = 0; at <= list.size();) {
    size_t end = list.find_first_of(separators, at);
    if (end == std::string_view::npos) end = list.size();
    std::string d(list.substr(at, end - at));
    at = end + 1;
    for (std::string_view token : {"${ORIGIN}", "$ORIGIN"})
      for (size_t k = 0; (k = d.find(token, k)) != std::string::npos; k += origin.size())
        d.replace(k, token.size(), origin);
    dirs.push_back(d.empty() ? "." : std::move(d));
  }
}

// Where ld.so would find `soname` for the program `exe`, in the order it looks (ld.so.cache
// aside): DT_RPATH (when there is no DT_RUNPATH), LD_LIBRARY_PATH, DT_RUNPATH, then the
// multiarch and default directories. A traced process's own mapping is used instead when
// there is one (libgo_in).
std::string find_library(const std::string& soname, const GccgoFacts& facts,
                         const std::string& exe) {
  std::error_code ec;
  const std::filesystem::path real = std::filesystem::canonical(exe, ec);
  const std::string origin =
      ec ? std::filesystem::path(exe).parent_path().string() : real.parent_path().string();
  std::vector<std::string> dirs;
  if (facts.runpath.empty()) add_search_dirs(dirs, facts.rpath, origin);
  if (const char* env = getenv("LD_LIBRARY_PATH")) add_search_dirs(dirs, env, origin, ":;");
  add_search_dirs(dirs, facts.runpath, origin);
  for (const char* d : {"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64",
                        "/usr/lib64", "/lib", "/usr/lib"})
    dirs.emplace_back(d);
  for (const auto& d : dirs) {
    std::string path = d + "/" + soname;
    if (access(path.c_str(), R_OK) == 0) return path;
  }
  return "";
}

// The copy of `soname` process pid maps, as /proc/PID/map_files names it ("" when none).
std::string libgo_in(int pid, const std::string& soname) {
  auto m = library_mapping(pid, soname);
  return m ? fmt::format("/proc/{}/map_files/{:x}-{:x}", pid, m->start, m->end) : "";
}

}  // namespace

Result<GoroutineProbes> GccgoBinary::goroutine_probes(int pid) const {
  const ElfFile* image = elf_.get();
  GoroutineProbes g;
  if (!facts_.libgo.empty()) {
    // In libgo.so: its own file, the one the process maps when there is one.
    std::string path =
        pid > 0 ? libgo_in(pid, facts_.libgo) : find_library(facts_.libgo, facts_, elf_->path());
    if (path.empty())
      return make_error("cannot find {}{}: goroutine states need probes in it", facts_.libgo,
                        pid > 0 ? fmt::format(" in pid {}", pid) : std::string());
    auto lib = ElfFile::open(path);
    if (!lib) return lib.error();
    libgo_ = std::move(*lib);
    image = libgo_.get();
    g.image = image;
    // Its functions, for the names of the pcs the probes see there (wait reasons are told
    // by their caller, runtime.park_m).
    libgo_funcs_ = gccgo_functions(read_function_symbols(*libgo_));
    g.image_funcs = &libgo_funcs_;
  }
  g.sysv = true;
  g.create_gp_arg = g.create_pc_arg = GoroutineProbes::kNoArg;
  if (const ElfSymbol* s = image->symbol("runtime.casgstatus"); s && s->type == STT_FUNC)
    g.status = s->value;
  // __go_go has no Go name (no dot): it is not among funcs_.
  if (const ElfSymbol* s = image->symbol("__go_go"); s && s->type == STT_FUNC && s->size) {
    g.create = s->value;
    g.created = return_sites(*image, s->value, s->size);
  }
  if (!g.status || !g.create || g.created.empty())
    return make_error("{} has no runtime.casgstatus or __go_go to probe (stripped?)",
                      image->path());
  return g;
}

Result<ProbePlan> GccgoBinary::plan(const std::vector<std::string>& patterns) const {
  std::vector<Pattern> pats;
  for (const auto& t : patterns) {
    auto p = Pattern::parse(t);
    if (!p) return p.error();
    pats.push_back(std::move(*p));
  }
  std::vector<bool> used(pats.size(), false);
  ProbePlan plan;
  plan.binary = elf_->path();
  plan.pie = elf_->is_pie();
  plan.regabi = false;
  plan.reads_g = false;
  const int gcc_major = dwarf_ ? gnu_go_major(dwarf_->producer) : 0;
  plan.gccgo_g = place_gccgo_g(*elf_, facts_, gcc_major);
  // The offsets goroutine events read, of the libgo the program runs with.
  const std::string& lib = !facts_.libgo.empty() ? facts_.libgo : facts_.soname;
  if (auto o = libgo_offsets(lib.empty() ? gcc_major : libgo_gcc_major(lib))) {
    plan.offsets = *o;
    plan.wait_reasons = read_wait_reason_table(*elf_);
  }
  plan.binary_view.elf = elf_.get();
  plan.binary_view.types = &types_.graph();
  plan.binary_view.rt.gccgo = true;  // an interface's dynamic type is a libgo descriptor
  plan.binary_view.gccgo_funcs = &funcs_;
  plan.warnings = warnings_;
  for (const auto& f : funcs_) {
    std::string_view clone = gcc_clone_suffix(f.symbol);
    std::string_view base = std::string_view(f.name).substr(0, f.name.size() - clone.size());
    // A pointer method also matches as gccgo's symbol spells it (pkg.T.M).
    const std::string plain = value_method_spelling(f.name);
    bool hit = false;
    for (size_t i = 0; i < pats.size(); ++i)
      if (pats[i].matches(f.name) || (!clone.empty() && pats[i].matches(base)) ||
          (plain != f.name && pats[i].matches(plain))) {
        used[i] = true;
        hit = true;
      }
    if (hit) plan.funcs.push_back(plan_func(f));
  }
  for (size_t i = 0; i < pats.size(); ++i)
    if (!used[i]) return make_error("pattern '{}' matches no function", patterns[i]);
  return plan;
}

}  // namespace gotap
