#include "core/plan/go_binary.h"

#include "core/binary/debuginfo.h"
#include "core/binary/moduledata.h"
#include "core/binary/wait_reason_table.h"
#include "core/model/wait_reasons.h"

#include <elf.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <sched.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <future>
#include <map>
#include <set>
#include <thread>
#include <unordered_map>

#include "core/binary/rtype_graph.h"
#include "core/plan/abi.h"
#include "core/plan/cached_sites.h"
#include "core/plan/disasm.h"
#include "core/plan/inline_mark.h"
#include "core/plan/parallel_for.h"
#include "core/plan/pattern.h"
#include "core/plan/plan_cache.h"
#include "core/plan/unnamed_receiver.h"
#include "core/sys/timing.h"

namespace gotap {

namespace {

constexpr uint8_t kFuncFlagAsm = 4;

const ElfSegment* tls_segment(const ElfFile& elf) {
  for (const auto& s : elf.segments())
    if (s.type == PT_TLS) return &s;
  return nullptr;
}

// Shape-instantiated generic code takes a hidden dictionary pointer that DWARF does not list:
// first for a function (`pkg.F[go.shape.int]`), right after the receiver for a method
// (`pkg.T[go.shape.int].M`, `pkg.(*T[...]).M`), as the callers' code shows (`LEAQ
// main..dict.Box[int], BX` after the receiver in AX). Closures inside them (`F[...].func1`)
// reach the dictionary through their context instead. nullopt: no dictionary.
std::optional<size_t> dict_position(std::string_view name) {
  auto close = name.rfind(']');
  if (close == std::string_view::npos) return std::nullopt;
  auto open = name.rfind('[', close);
  if (open == std::string_view::npos) return std::nullopt;
  std::string_view shapes = name.substr(open + 1, close - open - 1);
  if (shapes != "..." && shapes.find("go.shape.") == std::string_view::npos) return std::nullopt;
  std::string_view rest = name.substr(close + 1);
  if (rest.empty()) return 0;
  if (rest[0] == ')') rest.remove_prefix(1);
  if (rest.size() < 2 || rest[0] != '.') return std::nullopt;
  rest.remove_prefix(1);
  if (rest.find('.') != std::string_view::npos) return std::nullopt;  // nested closure
  for (std::string_view closure : {"func", "gowrap", "deferwrap"}) {
    if (rest.size() > closure.size() && rest.starts_with(closure) &&
        rest.find_first_not_of("0123456789", closure.size()) == std::string_view::npos)
      return std::nullopt;
  }
  return 1;
}

}  // namespace

Result<std::unique_ptr<GoBinary>> GoBinary::open(const std::string& path) {
  return open(path, OpenOptions{});
}

Result<std::unique_ptr<GoBinary>> GoBinary::open(const std::string& path, const OpenOptions& opts) {
  std::unique_ptr<GoBinary> b(new GoBinary());
  auto elf = ElfFile::open(path);
  if (!elf) return elf.error();
  b->elf_ = std::move(*elf);
  auto bi = read_buildinfo(*b->elf_);
  if (!bi) return bi.error();
  b->buildinfo_ = std::move(*bi);
  auto pcln = Pclntab::load(*b->elf_, b->buildinfo_.version);
  if (!pcln) return pcln.error();
  b->pclntab_ = std::move(*pcln);
  const GoVersion& go = b->buildinfo_.version;
  if (go.major > 1 || (go.major == 1 && go.minor > kNewestKnownGoMinor))
    b->warnings_.push_back(fmt::format(
        "{} is newer than the newest Go release gotap knows (go1.{}): runtime structures are "
        "read as go1.{}'s where they check out; results are best effort",
        go.raw, kNewestKnownGoMinor, kNewestKnownGoMinor));
  if (!b->pclntab_.type_data_problem().empty())
    b->warnings_.push_back(b->pclntab_.type_data_problem());
  // Corrupt DWARF is not fatal: the pclntab and the ABI still give a complete plan.
  auto dw = DwarfInfo::load(*b->elf_);
  if (dw) {
    b->dwarf_ = std::move(*dw);
  } else {
    b->warnings_.push_back(dw.error().what() + " (DWARF ignored)");
  }
  // No DWARF inside: where distributions put it (a debuglink, the build ID, debuginfod).
  if (dw && !b->dwarf_ && opts.find_debuginfo) {
    if (auto df = find_debug_file(path, opts.debug_dirs)) {
      auto delf = ElfFile::open(df->path);
      auto ddw = delf ? DwarfInfo::load(**delf) : Result<std::unique_ptr<DwarfInfo>>(delf.error());
      if (ddw && *ddw) {
        b->dwarf_ = std::move(*ddw);
        b->debug_file_ = *df;
      } else if (!ddw) {
        b->warnings_.push_back(ddw.error().what() + " (separate debug file ignored)");
      }
    } else {
      for (const auto& s : unreachable_debuginfod_servers())
        b->warnings_.push_back("debuginfod server " + s + "; no debug file could come from it");
    }
  }

  b->offsets_ = runtime_offsets_for(b->buildinfo_.version);
  if (b->dwarf_) {
    auto member = [&](const char* type, const char* field, uint32_t& out) {
      auto off = b->dwarf_->member_offset(type, field);
      if (off) out = static_cast<uint32_t>(*off);
      return off.has_value();
    };
    if (member("runtime.g", "goid", b->offsets_.g_goid)) b->offsets_.source = "dwarf";
    member("runtime.g", "atomicstatus", b->offsets_.g_atomicstatus);
    member("runtime.g", "stackguard0", b->offsets_.g_stackguard0);
    member("runtime.g", "m", b->offsets_.g_m);
    member("runtime.g", "parentGoid", b->offsets_.g_parent_goid);
    member("runtime.g", "waitreason", b->offsets_.g_waitreason);
    member("runtime.g", "gopc", b->offsets_.g_gopc);
    member("runtime.g", "startpc", b->offsets_.g_startpc);
    uint32_t stack = 0;
    if (member("runtime.g", "stack", stack)) {
      b->offsets_.g_stack_lo = stack;
      b->offsets_.g_stack_hi = stack + 8;
    }
    member("runtime.m", "procid", b->offsets_.m_procid);
    member("runtime.m", "curg", b->offsets_.m_curg);
    member("runtime.g", "sched", b->offsets_.g_sched);
    member("runtime.gobuf", "pc", b->offsets_.gobuf_pc);
    member("runtime.gobuf", "bp", b->offsets_.gobuf_bp);
  }
  b->tls_g_offset_ = b->compute_tls_g_offset();
  return b;
}

bool GoBinary::regabi() const {
  // The register ABI arrived on amd64 in 1.17 (GOEXPERIMENT=noregabi could still turn it off
  // there; the DWARF producer records which).
  if (dwarf_ && !dwarf_->producer().empty() &&
      dwarf_->producer().find("Go cmd/compile") != std::string::npos)
    return dwarf_->producer().find("regabi") != std::string::npos;
  return buildinfo_.version.at_least(1, 17);
}

bool GoBinary::cgo() const {
  // CGO_ENABLED=1 is recorded for pure-Go builds too, and PIE binaries have an interpreter
  // without cgo: what matters is whether runtime/cgo was linked in.
  for (const auto& f : pclntab_.all_funcs())
    if (f.name.starts_with("runtime/cgo.") || f.name.starts_with("_cgo_") || f.name == "crosscall2")
      return true;
  return false;
}

int64_t GoBinary::compute_tls_g_offset() const {
  const ElfSegment* tls = tls_segment(*elf_);
  if (!tls) return -8;  // internal linking: the runtime uses FS_base-8 directly
  // External linking places runtime.tlsg inside the executable's TLS block, which ends at
  // FS_base (TLS variant II): offset = tlsg - memsz rounded up to the block's alignment.
  if (const ElfSymbol* tlsg = elf_->symbol("runtime.tlsg")) {
    uint64_t memsz = tls->memsz;
    uint64_t align = tls->align ? tls->align : 1;
    memsz += (-tls->vaddr - memsz) & (align - 1);
    return static_cast<int64_t>(tlsg->value) - static_cast<int64_t>(memsz);
  }
  // Stripped: read the resolved offset from the code that loads g, the ABI wrappers'
  // `mov r14, fs:[off]`.
  int seen = 0;
  for (const auto& f : pclntab_.all_funcs()) {
    if (!f.is_wrapper || f.end <= f.entry) continue;
    if (++seen > 64) break;
    auto code = elf_->read(f.entry, std::min<uint64_t>(f.end - f.entry, 64));
    if (auto off = fs_load_offset(code)) return *off;
  }
  return -8;
}

const std::vector<GoBinary::InlineNode>& GoBinary::inline_nodes() const {
  std::call_once(inline_once_, [this] {
    const auto& funcs = pclntab_.all_funcs();
    for (uint32_t i = 0; i < funcs.size(); ++i) {
      const auto& f = funcs[i];
      if (f.is_wrapper || f.nfuncdata <= kFuncdataInlTree) continue;
      if (pclntab_.pcdata(f, kPcdataInlTreeIndex) == 0) continue;
      auto tree = pclntab_.inline_tree(f);
      for (const auto& n : tree) inline_nodes_.push_back(InlineNode{n.name, i, n.index});
    }
    std::sort(inline_nodes_.begin(), inline_nodes_.end(),
              [](const InlineNode& a, const InlineNode& b) {
                if (a.callee != b.callee) return a.callee < b.callee;
                if (a.outer != b.outer) return a.outer < b.outer;
                return a.node < b.node;
              });
  });
  return inline_nodes_;
}

void GoBinary::sites_in(uint32_t outer, const std::set<int32_t>& wanted, const SiteSink& emit,
                        const CodeBlocks* decoded) const {
  const auto& funcs = pclntab_.all_funcs();
  const bool parent_from_pc = pclntab_.format() == "1.20";
  const PclnFunc& f = funcs[outer];
  auto tree = pclntab_.inline_tree(f);
  auto ranges = pclntab_.inline_ranges(f);
  std::sort(ranges.begin(), ranges.end(),
            [](const InlineRange& a, const InlineRange& b) { return a.lo < b.lo; });
  auto index_at = [&](uint64_t pc) -> int32_t {
    auto r = std::upper_bound(ranges.begin(), ranges.end(), pc,
                              [](uint64_t v, const InlineRange& x) { return v < x.lo; });
    if (r == ranges.begin()) return -1;
    --r;
    return pc < r->hi ? r->index : -1;
  };
  // Parent of each node: stored up to 1.19, the node at the call site's PC from 1.20.
  std::unordered_map<int32_t, size_t> pos;
  for (size_t k = 0; k < tree.size(); ++k) pos[tree[k].index] = k;
  auto parent = [&](int32_t idx) -> int32_t {
    auto p = pos.find(idx);
    if (p == pos.end()) return -1;
    const InlinedCall& n = tree[p->second];
    if (!parent_from_pc) return n.parent;
    int32_t par = index_at(n.parent_pc);
    return par == idx ? -1 : par;
  };
  // The chooser asks for parents once per instruction and node: look each up once, in a
  // table by index when the indices are small (they count the tree's nodes).
  std::unordered_map<int32_t, int32_t> parents;
  int32_t max_index = -1;
  for (const auto& n : tree) {
    parents[n.index] = parent(n.index);
    max_index = std::max(max_index, n.index);
  }
  std::vector<int32_t> parent_of;
  if (max_index >= 0 && static_cast<size_t>(max_index) <= 4 * tree.size() + 64) {
    parent_of.assign(static_cast<size_t>(max_index) + 1, -1);
    for (auto [idx, par] : parents)
      if (idx >= 0) parent_of[idx] = par;
  }
  auto parent_step = [&](int32_t idx) -> int32_t {
    if (!parent_of.empty())
      return static_cast<size_t>(idx) < parent_of.size() ? parent_of[idx] : -1;
    auto p = parents.find(idx);
    return p == parents.end() ? -1 : p->second;
  };
  auto within = [&](int32_t idx, int32_t want) {
    for (int depth = 0; idx >= 0 && depth < 64; ++depth) {
      if (idx == want) return true;
      idx = parent_step(idx);
    }
    return false;
  };
  // Each inlined call is probed at its call-site mark when that provably runs once per
  // call (core/plan/inline_mark.h).
  CodeBlocks own;
  if (!decoded) own = decode_blocks(elf_->read(f.entry, f.end - f.entry), f.entry);
  const CodeBlocks& code = decoded ? *decoded : own;
  InlineFacts facts;
  facts.node_at = index_at;
  facts.within = within;
  facts.insn_node.reserve(code.insns.size());
  for (const CodeInsn& in : code.insns) facts.insn_node.push_back(index_at(in.pc));
  // Lines are asked for many times per instruction (once per node): the tables are decoded
  // once, and each pc's line looked up once.
  const FuncPcTables tables(pclntab_, f);
  // By instruction (a hash map of pcs was a malloc per instruction); a pc that starts none is
  // looked up each time.
  using FileLine = std::optional<std::pair<std::string_view, int32_t>>;
  std::vector<FileLine> lines(code.insns.size());
  std::vector<uint8_t> looked(code.insns.size(), 0);
  auto line_at = [&](uint64_t pc) -> FileLine {
    const int64_t k = code.index_of(pc);
    if (k < 0) return tables.file_line(pc);
    if (!looked[k]) {
      lines[k] = tables.file_line(pc);
      looked[k] = 1;
    }
    return lines[k];
  };
  facts.same_line = [&](uint64_t a, uint64_t b) {
    if (a == b) return line_at(a).has_value();
    const FileLine x = line_at(a), y = line_at(b);
    // Lines first, and one file's name is one string of the pclntab: the bytes are compared
    // only when the views differ (comparing them every time was 5% of a whole binary's plan).
    return x && y && x->second == y->second &&
           ((x->first.data() == y->first.data() && x->first.size() == y->first.size()) ||
            x->first == y->first);
  };
  // With a few inlined calls asked about, the chooser looks at the instructions that can
  // matter to each only, indexed once (the answers are the same; one call is cheaper asked
  // plainly). Without complete blocks it looks at no instruction at all.
  constexpr size_t kIndexFrom = 4;
  if (wanted.size() >= kIndexFrom && code.complete && !code.indirect)
    index_inline_facts(facts, code, parent_step, [&](uint64_t pc) { return tables.file_line(pc); });
  // Calls of one function per mark pc in this function.
  std::map<std::pair<std::string_view, uint64_t>, int> marks;
  for (const auto& n : tree) ++marks[{n.name, n.parent_pc}];
  for (int32_t idx : wanted) {
    auto p = pos.find(idx);
    if (p == pos.end()) continue;
    const InlinedCall& n = tree[p->second];
    InlineSite s;
    s.outer = f.name;
    auto choice = choose_inline_site(code, facts, idx, n.parent_pc);
    // Two calls of one function that share a mark (two calls on one line) would both be
    // counted by one probe hit.
    if (choice.ok && marks[{n.name, n.parent_pc}] > 1) {
      choice.ok = false;
      choice.reason = "another call of the same function shares its call-site mark";
    }
    s.pc = n.parent_pc;
    s.sp_delta = tables.sp_delta(s.pc).value_or(0);
    if (const FileLine fl = line_at(n.parent_pc)) {
      s.file = fl->first;
      s.line = fl->second;
    }
    if (!choice.ok) s.skip_reason = choice.reason;
    emit(n.name, std::move(s), choice.ok);
  }
}

GoBinary::InlineStats GoBinary::inline_stats() const {
  InlineStats st;
  const auto& nodes = inline_nodes();
  std::map<uint32_t, std::set<int32_t>> by_outer;
  for (const auto& n : nodes) by_outer[n.outer].insert(n.node);
  for (const auto& [outer, wanted] : by_outer)
    sites_in(outer, wanted, [&](std::string_view, InlineSite&&, bool probed) {
      ++(probed ? st.probed : st.skipped);
    });
  return st;
}

std::vector<InlineSite> GoBinary::inline_sites(std::string_view name,
                                               std::vector<InlineSite>* skipped) const {
  const auto& nodes = inline_nodes();
  auto lo = std::lower_bound(nodes.begin(), nodes.end(), name,
                             [](const InlineNode& n, std::string_view v) { return n.callee < v; });
  std::vector<InlineSite> out;
  for (auto it = lo; it != nodes.end() && it->callee == name;) {
    const uint32_t outer = it->outer;
    std::set<int32_t> wanted;
    for (; it != nodes.end() && it->callee == name && it->outer == outer; ++it)
      wanted.insert(it->node);
    sites_in(outer, wanted, [&](std::string_view, InlineSite&& s, bool probed) {
      if (probed) {
        out.push_back(std::move(s));
      } else if (skipped) {
        skipped->push_back(std::move(s));
      }
    });
  }
  auto by_pc = [](const InlineSite& a, const InlineSite& b) { return a.pc < b.pc; };
  std::sort(out.begin(), out.end(), by_pc);
  if (skipped) std::sort(skipped->begin(), skipped->end(), by_pc);
  return out;
}

std::unordered_map<std::string_view, GoBinary::SitesOf> GoBinary::inline_sites_of(
    const std::set<std::string_view>& names, PlanWork* plan) const {
  const auto& nodes = inline_nodes();
  // The nodes of every name, by outer function. Within one name, sites_in then sees the
  // outer functions in ascending order and each one's nodes in ascending order, as
  // inline_sites does: the lists below come out in its order, and sort the same. Names are
  // looked up by hash (a whole binary's tens of thousands, with long common prefixes, made
  // string comparisons 5% of its plan).
  std::unordered_map<std::string_view, SitesOf> out;
  out.reserve(names.size());
  for (std::string_view name : names) out[name];
  std::map<uint32_t, std::set<int32_t>> by_outer;
  if (names.size() > nodes.size() / 16) {
    // Many names: one pass over every node.
    for (const InlineNode& n : nodes)
      if (out.contains(n.callee)) by_outer[n.outer].insert(n.node);
  } else {
    for (std::string_view name : names) {
      auto it =
          std::lower_bound(nodes.begin(), nodes.end(), name,
                           [](const InlineNode& n, std::string_view v) { return n.callee < v; });
      for (; it != nodes.end() && it->callee == name; ++it) by_outer[it->outer].insert(it->node);
    }
  }
  // The outer functions are independent (sites_in only reads the binary): they go to every
  // CPU, and their sites are taken back in order, so the lists are the ones a single pass
  // gives.
  struct Found {
    std::string_view callee;
    InlineSite site;
    bool probed;
  };
  // Each function in index order: the inlined calls it holds (null: none asked), and its
  // place in plan->order (-1: not planned).
  struct Work {
    uint32_t func;
    const std::set<int32_t>* wanted;
    int64_t slot;
  };
  std::vector<Work> work;
  {
    auto o = by_outer.begin();
    size_t k = 0;
    const size_t planned = plan ? plan->order.size() : 0;
    if (plan) {
      size_t places = planned;
      for (uint32_t p : plan->place) places = std::max<size_t>(places, p + size_t{1});
      plan->planned.resize(places);
      plan->warned.resize(planned);
    }
    while (o != by_outer.end() || k < planned) {
      const uint32_t next = std::min(o != by_outer.end() ? o->first : UINT32_MAX,
                                     k < planned ? plan->order[k] : UINT32_MAX);
      Work w{next, nullptr, -1};
      if (o != by_outer.end() && o->first == next) w.wanted = &(o++)->second;
      if (k < planned && plan->order[k] == next) w.slot = static_cast<int64_t>(k++);
      work.push_back(w);
    }
  }
  const auto& funcs = pclntab_.all_funcs();
  std::vector<std::vector<Found>> found(work.size());
  auto one = [&](size_t i) {
    const Work& w = work[i];
    const PclnFunc& f = funcs[w.func];
    // Decoded once for both, when both need it and the function has code.
    std::optional<CodeBlocks> code;
    if (w.wanted && w.slot >= 0 && f.end > f.entry)
      code = decode_blocks(elf_->read(f.entry, f.end - f.entry), f.entry);
    const CodeBlocks* shared = code ? &*code : nullptr;
    if (w.wanted)
      sites_in(
          w.func, *w.wanted,
          [&](std::string_view callee, InlineSite&& s, bool probed) {
            found[i].push_back({callee, std::move(s), probed});
          },
          shared);
    if (w.slot >= 0)
      plan->planned[plan->place[w.slot]] = plan_func(f, plan->warned[w.slot], shared);
  };
  // In address order, a batch at a time: the code of each batch, decoded, is given back to
  // the system (a whole binary's text is read once, and held it was 18 MB of caddy's peak
  // resident memory). Batches are large enough to keep every CPU busy.
  constexpr size_t kBatch = 4096;
  for (size_t lo = 0; lo < work.size(); lo += kBatch) {
    const size_t hi = std::min(work.size(), lo + kBatch);
    parallel_for(hi - lo, [&](size_t k) { one(lo + k); });
    if (work.size() >= kBatch) {
      const uint64_t from = funcs[work[lo].func].entry, to = funcs[work[hi - 1].func].end;
      if (to > from) elf_->release(from, to - from);
    }
  }
  for (auto& share : found)  // empty for the functions only planned
    for (Found& f : share) {
      SitesOf& of = out.find(f.callee)->second;
      (f.probed ? of.probed : of.skipped).push_back(std::move(f.site));
    }
  auto by_pc = [](const InlineSite& a, const InlineSite& b) { return a.pc < b.pc; };
  for (auto& [name, of] : out) {
    std::sort(of.probed.begin(), of.probed.end(), by_pc);
    std::sort(of.skipped.begin(), of.skipped.end(), by_pc);
  }
  return out;
}

const TypeGraph* GoBinary::types() const {
  return dwarf_ ? &dwarf_->types() : rtypes_.get();
}

RtypeEnv GoBinary::rtype_env() const {
  RtypeEnv env;
  env.go = buildinfo_.version;
  env.swiss_maps = env.go.at_least(1, 24) &&
                   buildinfo_.setting("GOEXPERIMENT").find("noswissmap") == std::string::npos;
  const Moduledata& md = pclntab_.moduledata();
  if (md.types && md.etypes > md.types) {
    env.types = md.types;
    env.etypes = md.etypes;
  }
  return env;
}

const MethodTables* GoBinary::method_tables() const {
  if (dwarf_) return nullptr;
  std::call_once(methods_once_, [this] {
    methods_ = std::make_unique<MethodTables>(MethodTables::scan(*elf_, pclntab_, rtype_env()));
  });
  return methods_.get();
}

void GoBinary::add_method_types(const std::vector<MethodSignature>& sigs) const {
  // Functions are planned on several threads; plan() adds every matched method's types
  // before, so that here they are found, not added, but two threads must never add at once.
  std::lock_guard lock(types_mu_);
  if (!rtypes_) rtypes_ = std::make_unique<TypeGraph>();
  ElfMemoryReader mem(*elf_, 0);
  RtypeGraphBuilder b(*rtypes_, mem, rtype_env());
  for (const auto& s : sigs) {
    b.add(s.receiver);
    for (uint64_t t : s.params) b.add(t);
    for (uint64_t t : s.results) b.add(t);
  }
  if (b.added()) rtypes_->index();
}

std::map<std::string, size_t> GoBinary::signature_counts() const {
  std::map<std::string, size_t> n;
  for (const auto& f : pclntab_.all_funcs()) {
    if (f.is_wrapper || f.name.empty() || f.name.starts_with("go:")) continue;
    if (dwarf_ && dwarf_func(f))
      ++n[debug_file_ ? "debuginfo" : "dwarf"];
    else if (method_tables() && methods_->contains(f.entry))
      ++n["method-table"];
    else if (pclntab_.arg_info(f))
      ++n["arginfo"];
    else
      ++n["none"];
  }
  return n;
}

const DwarfFunc* GoBinary::dwarf_func(const PclnFunc& f) const {
  const DwarfFunc* df = dwarf_->func(std::string(f.name));
  if (df && (df->low_pc == f.entry || df->low_pc == 0)) return df;
  // Shape instantiations share one pclntab name ("main.Sum[...]") while DWARF names each
  // ("main.Sum[go.shape.int]"), as does .symtab: look the symbol up by address.
  std::call_once(symbols_once_, [this] {
    for (const auto& s : elf_->symbols())
      if (s.type == STT_FUNC && s.value) symbol_at_.emplace(s.value, s.name);
  });
  auto it = symbol_at_.find(f.entry);
  if (it == symbol_at_.end()) return nullptr;
  df = dwarf_->func(std::string(it->second));
  return df && (df->low_pc == f.entry || df->low_pc == 0) ? df : nullptr;
}

FuncPlan GoBinary::plan_func(const PclnFunc& f, std::vector<std::string>& warnings,
                             const CodeBlocks* decoded) const {
  FuncPlan p;
  p.name = std::string(f.name);
  p.entry = f.entry;
  p.end = f.end;
  p.abi = regabi() && !(f.flag & kFuncFlagAsm) ? "internal" : "abi0";
  if (auto fl = pclntab_.file_line(f, f.entry)) {
    p.file = std::string(fl->first);
    p.line = fl->second;
  }

  FuncCode code;
  Bytes bytes = f.end > f.entry ? elf_->read(f.entry, f.end - f.entry) : Bytes{};
  if (!bytes.empty())
    code = decoded ? analyze_function(bytes, f.entry, *decoded) : analyze_function(bytes, f.entry);
  p.ret_sites = code.rets;
  p.tail_jumps = code.tail_jumps;
  for (uint64_t pc : code.indirect_jumps) {
    auto sp = pclntab_.sp_delta(f, pc);
    if (sp && *sp == 0) p.tail_jumps.push_back(pc);
  }
  std::sort(p.tail_jumps.begin(), p.tail_jumps.end());

  if (code.push_rbp) {
    p.entry_probe = *code.push_rbp;
    p.entry_probe_kind = "push_rbp";
    p.entry_refires = false;
  } else if (code.stack_check_jcc) {
    p.entry_probe = *code.stack_check_jcc;
    p.entry_probe_kind = "jcc";
    p.entry_refires = true;
  } else {
    p.entry_probe = f.entry;
    p.entry_probe_kind = "entry";
    p.entry_refires = code.stack_check.has_value();
  }
  p.frame_size = pclntab_.sp_delta(f, p.entry_probe).value_or(0);
  if (code.morestack_call) p.morestack_call = *code.morestack_call;

  const DwarfFunc* df = dwarf_ ? dwarf_func(f) : nullptr;
  if (df) {
    std::vector<AbiParamIn> in;
    bool has_dict = false;
    for (const auto& dp : df->params) {
      in.push_back(AbiParamIn{dp.name, dp.type, dp.is_result});
      has_dict |= dp.name == ".dict";
    }
    // Only releases whose DWARF leaves unnamed receivers out: no work for the others.
    if (!buildinfo_.version.at_least(1, 22))
      restore_unnamed_receiver(dwarf_->types(), p.name, f.args, in);
    const GoType* uintptr_type = dwarf_->types().by_name("uintptr");
    auto dict = dict_position(f.name);
    bool hidden_dict = false;
    if (dict && !has_dict && uintptr_type && *dict <= in.size()) {
      in.insert(in.begin() + *dict, AbiParamIn{".dict", uintptr_type->id, false});
      hidden_dict = true;
    }
    auto locs = p.abi == "internal" ? assign_abi_internal(dwarf_->types(), in)
                                    : assign_abi0(dwarf_->types(), in);
    for (auto& l : locs) {
      if (hidden_dict && l.name == ".dict") continue;  // not a Go-level parameter
      (l.is_result ? p.results : p.args).push_back(std::move(l));
    }
    p.args_source = debug_file_ ? "debuginfo" : "dwarf";
  } else if (auto sig = method_tables() ? methods_->find(f.entry) : std::nullopt) {
    // Names stay positional: the method table keeps types, not names.
    add_method_types({*sig});
    std::vector<AbiParamIn> in;
    in.push_back(AbiParamIn{"arg0", sig->receiver, false});
    for (size_t i = 0; i < sig->params.size(); ++i)
      in.push_back(AbiParamIn{fmt::format("arg{}", i + 1), sig->params[i], false});
    for (size_t i = 0; i < sig->results.size(); ++i)
      in.push_back(AbiParamIn{fmt::format("~r{}", i), sig->results[i], true});
    auto locs = p.abi == "internal" ? assign_abi_internal(*rtypes_, in) : assign_abi0(*rtypes_, in);
    for (auto& l : locs) (l.is_result ? p.results : p.args).push_back(std::move(l));
    p.args_source = "method-table";
  } else if (auto items = pclntab_.arg_info(f)) {
    p.args = args_from_arginfo(*items, code.morestack_spills, p.abi == "internal");
    p.args_source = "arginfo";
  } else {
    p.args_source = "none";
  }
  if (code.decode_error) {
    warnings.push_back(
        fmt::format("{}: cannot decode the instruction at {}; RET sites after it are not probed",
                    p.name, hex(code.decode_error_at)));
  }
  if (bytes.empty())
    warnings.push_back(fmt::format("{}: no code bytes in the file; no RET sites", p.name));
  return p;
}

Result<GoroutineProbes> GoBinary::goroutine_probes(bool syscalls) const {
  GoroutineProbes g;
  std::vector<std::string> warnings;
  // Both are plain Go functions in every release from 1.17 to 1.26, never inlined (too big).
  for (auto [name, addr] :
       {std::pair{"runtime.casgstatus", &g.status}, std::pair{"runtime.newproc1", &g.create}}) {
    for (const PclnFunc* f : pclntab_.lookup(name)) {
      if (f->is_wrapper) continue;
      FuncPlan p = plan_func(*f, warnings);
      *addr = p.entry_probe;
      if (addr == &g.create) g.created = p.ret_sites;
      if (addr == &g.status) g.status_sp_delta = p.frame_size;
      if (addr == &g.create) {
        g.create_sp_delta = p.frame_size;
        // Go 1.17's newproc1(fn, argp, narg, callergp, callerpc) *g has 40 bytes of
        // arguments (narg's int32 padded to 8), 1.18's newproc1(fn, callergp, callerpc) *g
        // 24; _func.args counts the *g result too in later releases (48, 32: seen on 1.25
        // and 1.27). The size is the binary's own, so a build whose version string gotap
        // cannot read still gets the right registers.
        if (f->args == 40 || f->args == 48) {
          g.create_gp_arg = 3;
          g.create_pc_arg = 4;
        } else if (f->args != 24 && f->args != 32) {
          g.warnings.push_back(fmt::format(
              "runtime.newproc1 has {} bytes of arguments, neither Go 1.17's 40 nor 1.18+'s "
              "24 (with its result 48 or 32): goroutines are shown without their parent and "
              "creator",
              f->args));
          g.create_gp_arg = g.create_pc_arg = GoroutineProbes::kNoArg;
        }
      }
    }
    if (!*addr) return make_error("{} has no {}: cannot trace goroutines", elf_->path(), name);
  }
  if (g.created.empty())
    return make_error("{}: runtime.newproc1 has no RET to probe: cannot trace goroutines",
                      elf_->path());
  if (syscalls) {
    for (auto [name, addr] : {std::pair{"runtime.entersyscall", &g.sys_enter},
                              std::pair{"runtime.exitsyscall", &g.sys_exit}})
      for (const PclnFunc* f : pclntab_.lookup(name))
        if (!f->is_wrapper) *addr = plan_func(*f, warnings).entry_probe;
    // One without the other would leave goroutines in a system call for good.
    if (!g.sys_enter || !g.sys_exit) {
      g.sys_enter = g.sys_exit = 0;
      g.warnings.push_back(
          "runtime.entersyscall or runtime.exitsyscall not found: --why counts system-call "
          "time as running");
    }
  }
  return g;
}

namespace {

// A file's identity for the cache: size, modification time and inode ("" if it cannot be
// read), so that a rebuilt or replaced file is never taken for the one planned.
std::string file_identity(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return "";
  return fmt::format("{} {}.{:09} {}:{}", st.st_size, st.st_mtim.tv_sec, st.st_mtim.tv_nsec,
                     st.st_dev, st.st_ino);
}

// Plans smaller than this are made again each time: planning them costs less than a file.
constexpr size_t kMinCachedFuncs = 256;

}  // namespace

std::string GoBinary::plan_cache_key(const std::vector<std::string>& patterns,
                                     const PlanOptions& o) const {
  // gotap itself: its planning changes between builds, and a version string does not.
  std::string self = file_identity("/proc/self/exe");
  std::string file = file_identity(elf_->path());
  if (self.empty() || file.empty()) return "";
  std::string key = fmt::format("gotap {}\nfile {}\n", self, file);
  // The build IDs, raw: Go's and the linker's, when the binary has them.
  for (const char* note : {".note.go.buildid", ".note.gnu.build-id"})
    if (const ElfSection* s = elf_->section(note)) {
      Bytes b = elf_->section_data(*s);
      key += fmt::format("{} {:02x}\n", note, fmt::join(b, ""));
    }
  if (debug_file_)
    key += fmt::format("debug {} {}\n", debug_file_->path, file_identity(debug_file_->path));
  key += fmt::format("inline {}\npatterns {}\n", o.probe_inline_sites, patterns.size());
  for (const auto& p : patterns) key += fmt::format("{}:{}\n", p.size(), p);
  return key;
}

Result<ProbePlan> GoBinary::plan(const std::vector<std::string>& patterns,
                                 const PlanOptions& o) const {
  ProbePlan plan;
  plan.binary = elf_->path();
  plan.go = buildinfo_.version;
  plan.pie = elf_->is_pie();
  plan.regabi = regabi();
  plan.offsets = offsets_;
  plan.wait_reasons = wait_reason_names(buildinfo_.version);
  if (plan.wait_reasons.empty()) plan.wait_reasons = read_wait_reason_table(*elf_);
  plan.tls_g_offset = tls_g_offset_;
  plan.warnings = warnings_;

  std::vector<Pattern> pats;
  for (const auto& t : patterns) {
    auto p = Pattern::parse(t);
    if (!p) return p.error();
    pats.push_back(std::move(*p));
  }

  const std::string cache_key = o.cache_dir.empty() ? "" : plan_cache_key(patterns, o);
  if (!cache_key.empty()) {
    auto cached = load_plan_cache(o.cache_dir, cache_key);
    if (cached) sys::timing_mark("plan: cache read");
    // A site the binary does not confirm is planned again, never probed: the file is the
    // user's to rewrite (core/plan/cached_sites.h). Seen with GOTAP_TIMING=1.
    std::string bad = cached ? check_cached_sites(*elf_, pclntab_, cached->funcs) : "";
    if (!bad.empty()) sys::timing_mark(fmt::format("plan: cache rejected, {}", bad));
    if (cached && bad.empty()) {
      sys::timing_mark("plan: cache checked");
      // The types of the methods' signatures, as planning them would have added.
      if (method_tables()) {
        std::vector<MethodSignature> sigs;
        for (const auto& f : cached->funcs)
          if (auto sig = f.entry ? methods_->find(f.entry) : std::nullopt)
            sigs.push_back(std::move(*sig));
        add_method_types(sigs);
      }
      plan.funcs = std::move(cached->funcs);
      plan.strings = std::move(cached->strings);
      plan.warnings.insert(plan.warnings.end(), cached->warnings.begin(), cached->warnings.end());
      plan.binary_view = view();
      sys::timing_mark("plan: from the cache");
      return plan;
    }
  }

  // A stripped binary's method tables are indexed on the second CPU while the patterns are
  // matched here (each is a single-threaded 20-30 ms on a whole caddy); the future joins on
  // every way out.
  std::future<void> scanning;
  if (!dwarf_) scanning = std::async(std::launch::async, [this] { (void)method_tables(); });
  const auto& funcs = pclntab_.all_funcs();
  std::set<uint32_t> matched;          // indices into funcs
  std::set<std::string_view> inlined;  // names that exist only inlined
  for (const auto& pat : pats) {
    // A pattern that is exactly a function's name means that function alone, even when it
    // contains glob characters (generic instantiations have brackets).
    auto exact = pclntab_.lookup(pat.text());
    if (!exact.empty()) {
      for (const PclnFunc* f : exact) matched.insert(static_cast<uint32_t>(f - funcs.data()));
      continue;
    }
    const auto& nodes = inline_nodes();
    auto node =
        std::lower_bound(nodes.begin(), nodes.end(), std::string_view(pat.text()),
                         [](const InlineNode& n, std::string_view v) { return n.callee < v; });
    if (node != nodes.end() && node->callee == pat.text()) {
      inlined.insert(node->callee);
      continue;
    }
    bool any = false;
    if (!pat.is_exact()) {
      for (uint32_t i = 0; i < funcs.size(); ++i) {
        // `go:textfipsstart` and the like mark section boundaries; they are not functions.
        if (funcs[i].is_wrapper || funcs[i].name.empty() || funcs[i].name.starts_with("go:"))
          continue;
        if (pat.matches(funcs[i].name)) {
          matched.insert(i);
          any = true;
        }
      }
      std::string_view last;
      for (const auto& n : nodes) {
        if (n.callee == last) continue;
        last = n.callee;
        if (pat.matches(n.callee) && pclntab_.lookup(n.callee).empty()) {
          inlined.insert(n.callee);
          any = true;
        }
      }
    }
    if (!any) return make_error("pattern '{}' matches no function", pat.text());
  }

  if (scanning.valid()) scanning.get();
  // The runtime types of every matched method, indexed once.
  if (method_tables()) {
    std::vector<MethodSignature> sigs;
    for (uint32_t i : matched)
      if (auto sig = methods_->find(funcs[i].entry)) sigs.push_back(std::move(*sig));
    add_method_types(sigs);
  }
  std::set<std::string_view> callees(inlined.begin(), inlined.end());
  for (uint32_t i : matched) callees.insert(funcs[i].name);
  sys::timing_mark("plan: match");
  // The matched functions are planned in the pass that finds the inline sites: a function
  // both planned and holding inlined calls is decoded once (Zydis was a third of a cold
  // whole-binary plan when each was decoded twice). Every function is planned on its own
  // (plan_func reads the binary, and the method tables' types were all added above), on
  // every CPU, its warnings kept in order.
  PlanWork work;
  work.order.assign(matched.begin(), matched.end());
  {
    // The plan is by name, then entry (the matched functions in index order, then the
    // inlined-only ones, for equal keys): known before planning, so each function is planned
    // into its place.
    struct Key {
      std::string_view name;
      uint64_t entry;
    };
    std::vector<Key> keys;
    keys.reserve(work.order.size() + inlined.size());
    for (uint32_t i : work.order) keys.push_back({funcs[i].name, funcs[i].entry});
    for (std::string_view name : inlined) keys.push_back({name, 0});
    std::vector<uint32_t> by_key(keys.size());
    for (uint32_t k = 0; k < by_key.size(); ++k) by_key[k] = k;
    std::stable_sort(by_key.begin(), by_key.end(), [&](uint32_t x, uint32_t y) {
      if (keys[x].name != keys[y].name) return keys[x].name < keys[y].name;
      return keys[x].entry < keys[y].entry;
    });
    work.place.resize(keys.size());
    for (uint32_t pos = 0; pos < by_key.size(); ++pos) work.place[by_key[pos]] = pos;
  }
  auto sites = inline_sites_of(callees, &work);
  sys::timing_mark("plan: inline sites and functions");
  // A name two functions share gets the same sites in each, as inline_sites gave them:
  // copied, but moved on its last use.
  std::unordered_map<std::string_view, int> uses;
  uses.reserve(callees.size());
  for (uint32_t i : matched) ++uses[funcs[i].name];
  for (std::string_view name : inlined) ++uses[name];
  auto take_sites = [&](FuncPlan& fp, std::string_view name) {
    SitesOf& of = sites.find(name)->second;
    if (--uses[name] == 0) {
      fp.inline_sites = std::move(of.probed);
      fp.inline_skipped = std::move(of.skipped);
    } else {
      fp.inline_sites = of.probed;
      fp.inline_skipped = of.skipped;
    }
  };
  const std::vector<uint32_t>& order = work.order;
  for (auto& w : work.warned) plan.warnings.insert(plan.warnings.end(), w.begin(), w.end());
  plan.funcs = std::move(work.planned);
  plan.funcs.resize(order.size() + inlined.size());
  for (size_t j = 0; j < order.size(); ++j)
    take_sites(plan.funcs[work.place[j]], funcs[order[j]].name);
  size_t m = order.size();
  for (std::string_view name : inlined) {
    FuncPlan& fp = plan.funcs[work.place[m++]];
    fp.name = std::string(name);
    fp.entry_probe_kind = "inline";
    fp.abi = plan.regabi ? "internal" : "abi0";
    fp.args_source = "none";
    take_sites(fp, name);
  }
  sites.clear();
  sys::timing_mark("plan: functions");

  // Inlined calls that cannot be probed exactly: one warning line in all, naming the function
  // when there is one (prometheus' net/http.* has 214 such functions).
  std::vector<std::string> skipped_funcs;
  size_t skipped_sites = 0;
  for (auto& fp : plan.funcs) {
    fp.inline_probed = o.probe_inline_sites;
    const size_t all_sites = fp.inline_sites.size() + fp.inline_skipped.size();
    if (all_sites && !o.probe_inline_sites) {
      plan.warnings.push_back(fmt::format(
          "{} was inlined at {} call site(s) that are not probed: calls there are not traced",
          fp.name, all_sites));
    }
    if (!fp.inline_skipped.empty() && o.probe_inline_sites) {
      skipped_funcs.push_back(fp.name);
      skipped_sites += fp.inline_skipped.size();
    }
  }
  if (skipped_funcs.size() == 1) {
    plan.warnings.push_back(fmt::format(
        "{} was inlined at {} call site(s) with no instruction that runs exactly once per "
        "call: calls there are not traced (funcs lists them)",
        skipped_funcs[0], skipped_sites));
  } else if (!skipped_funcs.empty()) {
    plan.warnings.push_back(fmt::format(
        "{} functions were inlined at {} call site(s) with no instruction that runs exactly "
        "once per call: calls there are not traced (funcs lists them)",
        skipped_funcs.size(), skipped_sites));
  }
  if (!cache_key.empty() && plan.funcs.size() >= kMinCachedFuncs) {
    const std::vector<std::string> added(
        plan.warnings.begin() + static_cast<ptrdiff_t>(warnings_.size()), plan.warnings.end());
    store_plan_cache(o.cache_dir, cache_key, plan.funcs, added);
    sys::timing_mark("plan: cache stored");
  }
  // Last: planning may have added the method tables' types that types() returns.
  plan.binary_view = view();
  return plan;
}

BinaryView GoBinary::view() const {
  BinaryView v;
  v.elf = elf_.get();
  v.pclntab = &pclntab_;
  v.types = types();
  v.dwarf = dwarf_ != nullptr;
  v.rt = rtype_env();
  std::call_once(type_names_once_,
                 [this] { type_names_ = std::make_unique<TypeNames>(*elf_, rtype_env()); });
  v.type_names = type_names_.get();
  return v;
}

}  // namespace gotap
