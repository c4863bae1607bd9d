#include "backends/ebpf/probe_config.h"

#include <algorithm>
#include <array>
#include <optional>

#include "backends/ebpf/value_kind.h"
#include "core/cond/condition.h"
#include "core/plan/error_result.h"
#include "gotap_limits.h"

namespace gotap::ebpf {

namespace {

struct Builder {
  gotap_probe& probe;
  int max_str;
  const TypeGraph* types;

  int add_word(gotap_word w) {
    if (probe.nwords >= GOTAP_MAX_WORDS) return -1;
    probe.words[probe.nwords] = w;
    return probe.nwords++;
  }

  int add_cap(uint8_t kind, int word, int aux, int max) {
    if (word < 0 || probe.ncaps >= GOTAP_MAX_CAPS) return -1;
    gotap_cap& c = probe.caps[probe.ncaps];
    c.kind = kind;
    c.word = static_cast<uint8_t>(word);
    c.aux = static_cast<uint8_t>(aux < 0 ? 0 : aux);
    c.max = static_cast<uint16_t>(std::clamp(max, 0, GOTAP_DATA_MAX));
    return probe.ncaps++;
  }

  // One captured word per 8 bytes of the value, in value order.
  ParamCapture capture(const ParamLoc& p) {
    ParamCapture pc;
    pc.param = &p;
    uint64_t nwords = (p.size + 7) / 8;
    pc.words.assign(nwords, -1);
    for (const auto& piece : p.loc.pieces) {
      if (piece.kind == LocPiece::IntReg) {
        uint64_t slot = piece.value_offset / 8;
        if (slot < nwords) pc.words[slot] = add_word({GOTAP_SRC_REG, piece.reg, 0, 0});
      } else if (piece.kind == LocPiece::Stack || piece.kind == LocPiece::RegMem) {
        const bool mem = piece.kind == LocPiece::RegMem;
        for (uint64_t off = 0; off < piece.size; off += 8) {
          uint64_t slot = (piece.value_offset + off) / 8;
          if (slot >= nwords) break;
          pc.words[slot] = add_word({uint8_t(mem ? GOTAP_SRC_REGMEM : GOTAP_SRC_STACK),
                                     uint8_t(mem ? piece.reg : 0), 0,
                                     static_cast<int32_t>(piece.stack_offset + off)});
        }
      }
      // Float registers are not in pt_regs: those words stay uncaptured.
    }
    ValueShape shape = shape_of(p, types);
    pc.shape = shape;
    // A []byte's words start like a string's (data, len): its bytes are copied the same way.
    if ((shape == ValueShape::String || shape == ValueShape::Bytes) && nwords >= 2) {
      pc.string_cap = add_cap(GOTAP_CAP_STRING, pc.words[0], pc.words[1], max_str);
    } else if ((shape == ValueShape::Eface || shape == ValueShape::Iface) && nwords >= 2) {
      if (shape == ValueShape::Iface) pc.itab_cap = add_cap(GOTAP_CAP_ITAB, pc.words[0], -1, 8);
      pc.payload_cap = add_cap(GOTAP_CAP_DEREF, pc.words[1], -1, kIfacePayloadBytes);
    }
    return pc;
  }

  // A struct's string and []byte fields (one level): their bytes, for core's decoder. Called after
  // every parameter has its caps, so that a struct never takes a string's or an interface's.
  void add_field_caps(ParamCapture& pc) {
    const ParamLoc& p = *pc.param;
    if (pc.shape != ValueShape::Other || !types || !p.type) return;
    const GoType* t = types->get(p.type);
    if (!t || t->kind != GoKind::Struct) return;
    const uint64_t nwords = pc.words.size();
    for (const auto& f : t->fields) {
      const GoType* ft = types->get(f.type);
      uint64_t slot = f.offset / 8;
      bool copied = ft && (ft->kind == GoKind::String || is_byte_slice(ft, types));
      if (!copied || f.offset % 8 || slot + 1 >= nwords) continue;
      int c = add_cap(GOTAP_CAP_STRING, pc.words[slot], pc.words[slot + 1], max_str);
      if (c >= 0) pc.field_caps.push_back({c, static_cast<int>(slot)});
    }
  }

  // An interface's value beyond its first 16 bytes (value_chain.h): last, so that it takes only
  // the caps and the event bytes the other copies left. Two untyped words (ArgInfo's) may be an
  // interface too: core's decoder guesses so from the words, and the kernel from the types.
  void add_chain_cap(ParamCapture& pc) {
    const ParamLoc& p = *pc.param;
    const bool eface = pc.shape == ValueShape::Eface;
    const bool guess = pc.shape == ValueShape::Other && !p.type && p.size == 16;
    if ((!eface && !guess && pc.shape != ValueShape::Iface) || pc.words.size() != 2 ||
        pc.words[0] < 0 || pc.words[1] < 0)
      return;
    pc.chain_cap = add_cap(GOTAP_CAP_CHAIN, pc.words[0], pc.words[1], max_str);
    if (pc.chain_cap >= 0)
      probe.caps[pc.chain_cap].off = eface   ? GOTAP_CHAIN_CAP_EFACE
                                     : guess ? GOTAP_CHAIN_CAP_GUESS
                                             : 0;
  }
};

SiteConfig& make_site(ProbeConfig& cfg, uint64_t addr, uint32_t func_id, uint8_t flags,
                      const std::vector<ParamLoc>* params, bool want_results, int max_str,
                      const TypeGraph* types) {
  gotap_probe probe{};
  probe.func_id = func_id;
  probe.flags = flags;
  std::vector<ParamCapture> caps;
  if (params) {
    Builder b{probe, max_str, types};
    for (const auto& p : *params)
      if (p.is_result == want_results) caps.push_back(b.capture(p));
    for (auto& pc : caps) b.add_field_caps(pc);
    if (max_str > 0)
      for (auto& pc : caps) b.add_chain_cap(pc);
  }
  SiteConfig& s = cfg.add_site(addr, probe);
  s.params = std::move(caps);
  return s;
}

// The RET after `entry` is at the same address: one uprobe there runs both, entry first,
// when the entry's flags are those gotap_folded_entry gives it back (else both stay, as
// before: never a call counted twice).
void fold_entry(ProbeConfig& cfg, size_t entry) {
  SiteConfig& e = cfg.sites[entry];
  SiteConfig& r = cfg.sites[entry + 1];
  r.flags |= GOTAP_PROBE_ALSO_ENTRY;
  const gotap_u64 want = gotap_cookie(entry, e.flags, e.func_id);
  if (gotap_folded_entry(gotap_cookie(entry + 1, r.flags, r.func_id)) != want) {
    r.flags &= ~GOTAP_PROBE_ALSO_ENTRY;
    return;
  }
  e.folded = true;
  ++cfg.folded_sites;
}

}  // namespace

SiteConfig& ProbeConfig::add_site(uint64_t addr, const gotap_probe& p) {
  SiteConfig s;
  s.addr = addr;
  s.func_id = p.func_id;
  s.flags = p.flags;
  if (p.nwords || p.ncaps) {
    s.record = static_cast<uint32_t>(records.size());
    records.push_back(p);
  }
  sites.push_back(std::move(s));
  return sites.back();
}

gotap_probe ProbeConfig::record(size_t i) const {
  const SiteConfig& s = sites[i];
  gotap_probe p{};
  if (s.record != SiteConfig::kNoRecord) p = records[s.record];
  p.func_id = s.func_id;
  p.flags = s.flags;
  return p;
}

ProbeConfig build_probe_config(const ProbePlan& plan, Mode mode, int max_str,
                               const TypeGraph* types, const cond::Condition* cond,
                               bool count_failed) {
  ProbeConfig cfg;
  cfg.no_goid = !plan.reads_g;
  // Room for every site up front: growing by doubling held up to twice a whole binary's
  // sites (tens of MB) at the peak of arming.
  size_t most = plan.goroutines.created.size() + 2;
  for (const auto& f : plan.funcs)
    most += 2 + f.ret_sites.size() + f.tail_jumps.size() + f.inline_sites.size();
  cfg.sites.reserve(most);
  cfg.funcs.reserve(plan.funcs.size());
  const bool words = mode == Mode::Trace;
  for (const auto& f : plan.funcs) {
    const uint32_t id = static_cast<uint32_t>(cfg.funcs.size());
    FuncConfig fc;
    fc.plan = &f;
    uint8_t base = 0;
    if (f.abi == "abi0" || !plan.regabi) base |= GOTAP_PROBE_TLS_G;
    // Count needs returns only to recognise an entry probe's refire after morestack, and not
    // even then when the morestack call can be probed instead.
    std::optional<uint64_t> uncount;
    // A condition may reject the first entry and accept the refire: no blind uncount then.
    if (mode == Mode::Count && f.entry_refires && f.entry_probe && f.morestack_call && !cond)
      uncount = f.morestack_call;
    const bool at_ret = cond && cond->at_ret(id);
    const std::optional<LocPiece> err = count_failed ? error_word(f) : std::nullopt;
    fc.has_error = err && failures_countable(f);
    if (fc.has_error) fc.err_slot = cfg.error_funcs++;
    // With a condition, a failure counts only for a call the condition selected, so the
    // entry's decision must be remembered for its RET.
    const bool track =
        mode == Mode::Count && ((f.entry_refires && !uncount) || at_ret || (cond && fc.has_error));
    fc.traced_returns = f.entry_probe != 0 && (mode != Mode::Count || track);
    if (uncount) {
      make_site(cfg, *uncount, id, base | GOTAP_PROBE_UNCOUNT, nullptr, false, 0, types);
      ++cfg.morestack_sites;
    }
    std::optional<size_t> entry_site;
    if (f.entry_probe) {
      uint8_t flags = base;
      if (f.entry_refires && !uncount) flags |= GOTAP_PROBE_DEDUPE;
      if (track) flags |= GOTAP_PROBE_TRACK;
      // Params of both kinds live in f.args / f.results; entries capture the arguments.
      entry_site = cfg.sites.size();
      make_site(cfg, f.entry_probe, id, flags, words ? &f.args : nullptr, false, max_str, types)
          .ret_off = f.frame_size;
    }
    if (fc.traced_returns || fc.has_error) {
      uint8_t flags = base | GOTAP_PROBE_RET;
      if (mode == Mode::Count && fc.traced_returns) flags |= GOTAP_PROBE_TRACK;
      gotap_word ew{};
      if (fc.has_error) {
        flags |= GOTAP_PROBE_ERRCHECK;
        ew =
            err->kind == LocPiece::IntReg ? gotap_word{GOTAP_SRC_REG, err->reg, 0, 0}
            : err->kind == LocPiece::RegMem
                ? gotap_word{GOTAP_SRC_REGMEM, err->reg, 0, static_cast<int32_t>(err->stack_offset)}
                : gotap_word{GOTAP_SRC_STACK, 0, 0, static_cast<int32_t>(err->stack_offset)};
      }
      // A RET at the entry probe comes first, right after the entry it folds (gotap_shared.h,
      // GOTAP_PROBE_ALSO_ENTRY).
      std::vector<uint64_t> rets = f.ret_sites;
      std::stable_partition(rets.begin(), rets.end(),
                            [&](uint64_t a) { return a == f.entry_probe; });
      for (uint64_t a : rets) {
        const bool fold = entry_site && a == f.entry_probe && *entry_site + 1 == cfg.sites.size();
        SiteConfig& s =
            make_site(cfg, a, id, flags, words ? &f.results : nullptr, true, max_str, types);
        s.err_word = ew;
        if (fold) fold_entry(cfg, *entry_site);
      }
      // A tail jump leaves the function like a RET; the results are not set up there (the
      // function jumped to returns them: a failure there is not counted).
      if (fc.traced_returns)
        for (uint64_t a : f.tail_jumps)
          make_site(cfg, a, id, static_cast<uint8_t>(flags & ~GOTAP_PROBE_ERRCHECK), nullptr, true,
                    0, types);
    }
    // Inlined copies have no RET: their entries count and trace, but have no latency.
    if (f.inline_probed && mode != Mode::Latency) {
      for (const auto& site : f.inline_sites) {
        SiteConfig& s =
            make_site(cfg, site.pc, id, base | GOTAP_PROBE_INLINE, nullptr, false, 0, types);
        s.inlined_in = site.outer;
        s.ret_off = site.sp_delta;
        ++cfg.inline_sites;
      }
    }
    cfg.funcs.push_back(fc);
  }
  add_goroutine_sites(cfg, plan);
  return cfg;
}

void add_goroutine_sites(ProbeConfig& cfg, const ProbePlan& plan) {
  // Both are ABIInternal Go functions: arguments in RAX, RBX, RCX, RDI, RSI (the gotap_reg
  // order is the ABI's). Entry only, no state: the INLINE path of the BPF program emits one
  // event per hit. Words 0 to 2 are (gp, old, new) and (fn, callergp, callerpc).
  // Each record is built whole, then added (ProbeConfig::add_site).
  auto site = [&](uint32_t id,
                  std::array<uint8_t, 3> regs = {GOTAP_RAX, GOTAP_RBX, GOTAP_RCX}) -> gotap_probe {
    gotap_probe p{};
    p.func_id = id;
    p.flags = GOTAP_PROBE_INLINE;
    Builder b{p, 0, nullptr};
    for (uint8_t r : regs) b.add_word({GOTAP_SRC_REG, r, 0, 0});
    return p;
  };
  auto deref = [](gotap_probe& p, int word, uint32_t off, int bytes = 8) {
    Builder b{p, 0, nullptr};
    int c = b.add_cap(GOTAP_CAP_DEREF, word, -1, bytes);
    if (c >= 0) p.caps[c].off = static_cast<uint16_t>(off);
    return c;
  };
  const uint32_t goid = plan.offsets.g_goid;
  // libgo's casgstatus takes System V arguments (GoroutineProbes::sysv).
  const bool sysv = plan.goroutines.sysv;
  if (plan.goroutines.status) {
    gotap_probe p = sysv ? site(GOTAP_FUNC_GSTATUS, {GOTAP_RDI, GOTAP_RSI, GOTAP_RDX})
                         : site(GOTAP_FUNC_GSTATUS);
    // Word 3: the return address, which tells who made the change.
    Builder{p, 0, nullptr}.add_word({GOTAP_SRC_STACK, 0, 0, plan.goroutines.status_sp_delta});
    deref(p, 0, goid);
    // g.waitreason, a uint8: why the goroutine is about to wait.
    if (plan.offsets.g_waitreason)
      cfg.gstatus_reason_cap = deref(p, 0, plan.offsets.g_waitreason, 1);
    // Where the goroutine came from, for those created before the trace (a 24 to 32 byte
    // copy per change: cheaper than keeping a map of the goroutines seen in the kernel).
    if (OriginSpan o = origin_span(plan.offsets); o.size)
      cfg.gstatus_origin_cap = deref(p, 0, o.offset, static_cast<int>(o.size));
    cfg.add_site(plan.goroutines.status, p);
  }
  if (plan.goroutines.create && sysv) {
    // __go_go(fn, arg): word 0 the start function's code, word 3 the return address (the go
    // statement); the parent is the event's own goroutine.
    gotap_probe p = site(GOTAP_FUNC_GCREATE, {GOTAP_RDI, GOTAP_RDI, GOTAP_RDI});
    Builder{p, 0, nullptr}.add_word({GOTAP_SRC_STACK, 0, 0, 0});
    cfg.add_site(plan.goroutines.create, p);
  } else if (plan.goroutines.create) {
    // Go 1.17's newproc1(fn, argp, narg, callergp, callerpc) has them in RDI and RSI. An
    // unknown signature reads RAX into both, and the backend ignores them (no parent).
    const GoroutineProbes& g = plan.goroutines;
    const bool known = g.create_gp_arg <= GOTAP_RSI && g.create_pc_arg <= GOTAP_RSI;
    gotap_probe p =
        site(GOTAP_FUNC_GCREATE, {GOTAP_RAX, known ? g.create_gp_arg : uint8_t(GOTAP_RAX),
                                  known ? g.create_pc_arg : uint8_t(GOTAP_RAX)});
    deref(p, 0, 0);                // funcval.fn: the goroutine's start function
    if (known) deref(p, 1, goid);  // the parent's goid
    cfg.add_site(g.create, p);
  }
  for (auto [pc, id] : {std::pair{plan.goroutines.sys_enter, GOTAP_FUNC_GSYSENTER},
                        std::pair{plan.goroutines.sys_exit, GOTAP_FUNC_GSYSEXIT}}) {
    if (!pc) continue;
    gotap_probe p = site(id, {GOTAP_R14, GOTAP_R14, GOTAP_R14});
    p.nwords = 1;  // R14: the g entering or leaving the system call
    deref(p, 0, goid);
    cfg.add_site(pc, p);
  }
  for (uint64_t ret : plan.goroutines.created) {
    gotap_probe p = site(GOTAP_FUNC_GCREATED);
    p.nwords = 1;  // RAX: the new g
    deref(p, 0, goid);
    cfg.add_site(ret, p);
  }
  // libgo.so's: their addresses are that file's.
  if (plan.goroutines.image)
    for (SiteConfig& s : cfg.sites)
      if (s.func_id >= GOTAP_FUNC_GSTATUS) s.lib = true;
}

}  // namespace gotap::ebpf
