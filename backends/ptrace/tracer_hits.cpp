// What the ptrace tracer does at each hit: entries, returns, inlined sites and goroutine
// state changes, decoded into events.
#include "backends/ptrace/tracer.h"

#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <thread>
#include <type_traits>

#include <fmt/format.h>

#include "backends/ptrace/cfi_stack.h"
#include "backends/ptrace/page_release.h"
#include "backends/ptrace/unwind.h"
#include "core/binary/elf_file.h"
#include "core/cond/condition.h"
#include "core/cond/eval.h"
#include "core/events/latency.h"
#include "core/events/live_metrics.h"
#include "core/events/typed_events.h"
#include "core/model/wait_reasons.h"
#include "core/plan/error_result.h"
#include "core/plan/fork_child.h"
#include "core/plan/image_identity.h"
#include "core/plan/signals_blocked.h"
#include "core/sys/spawn.h"
#include "core/sys/test_delay.h"
#include "core/sys/timing.h"
#include "core/sys/uprobe_holders.h"

namespace gotap::ptrace {

using nlohmann::json;

RegState Tracer::reg_state(const user_regs_struct& r, pid_t tid, bool xmm, uint64_t sp) {
  RegState rs;
  const unsigned long long* gp[kNumValueRegs] = {&r.rax, &r.rbx, &r.rcx, &r.rdi, &r.rsi,
                                                 &r.r8,  &r.r9,  &r.r10, &r.r11, &r.rdx};
  for (int i = 0; i < kNumValueRegs; ++i) rs.gp[i] = *gp[i];
  rs.sp = sp;
  if (xmm) {
    user_fpregs_struct fp{};
    if (::ptrace(PTRACE_GETFPREGS, tid, nullptr, &fp) == 0)
      for (int i = 0; i < kNumFloatRegs; ++i) std::memcpy(&rs.xmm[i], &fp.xmm_space[i * 4], 8);
  }
  return rs;
}

json Tracer::stack_of(const user_regs_struct& regs, uint64_t pc, uint64_t ret_slot, pid_t tid) {
  user_regs_struct r = regs;
  r.rip = pc;  // the probed instruction, not the address after the int3
  // A gccgo program (no pclntab, no frame pointers): its call frame information.
  if (!bin_.pclntab) {
    if (!cfi_) cfi_ = std::make_unique<CfiStack>(proc_->pid(), proc_->mem());
    return cfi_->frames(tid, r, opts_.stack_depth);
  }
  auto pcs = walk_frames(proc_->mem(), r, ret_slot, opts_.stack_depth);
  return symbolize(bin_, bias_, pcs, opts_.stack_depth);
}

void Tracer::on_entry(const Site& s, const SiteRole& role, const user_regs_struct& r, pid_t tid,
                      uint64_t ts) {
  const FuncPlan& f = plan_.funcs[role.func];
  FuncState& fs = fstate_[role.func];
  uint64_t entry_sp = r.rsp + s.sp_delta;
  auto gi = gr_->current(r, fs.abi_internal);
  const int64_t goid = site_goid(gi);
  CallKey key{goid, gi ? gi->stack_hi - entry_sp : entry_sp};
  auto it = pending_.find(key);
  if (it != pending_.end()) {
    // The same frame entered again without a return: a re-entry after morestack, or the
    // previous call never returned (panic).
    if (f.entry_refires && it->second.func == role.func) return;
    if (opts_.mode == Mode::Trace && !it->second.dropped && !it->second.rejected &&
        !(opts_.condition && opts_.condition->at_ret(it->second.func))) {
      emit_call(CallUnfinished{
          CallSite{ts, proc_->pid(), it->second.tid, goid, plan_.funcs[it->second.func].name},
          it->second.ts});
    }
    close_pending(it);
  }
  // --if: decided here unless the condition needs the return (then its entry parts are kept).
  const cond::Condition* cond = opts_.condition;
  const bool at_ret = cond && cond->at_ret(role.func);
  bool rejected = false;
  uint64_t bits = 0;
  std::array<uint64_t, GOTAP_COND_VALS> vals{};
  if (cond) {
    RegState crs = reg_state(r, tid, fs.needs_xmm, entry_sp);
    // Without a goid (gccgo) the condition's goid is 0, as the eBPF backend's is.
    cond::EvalEnv env{&crs, &proc_->mem(), goid == kNoGoid ? 0 : goid, 0, bias_, 0, dec_.get()};
    rejected = !cond::run(cond->funcs[role.func].prog, false, env);
    bits = env.bits;
    std::copy(std::begin(env.vals), std::end(env.vals), vals.begin());
  }
  if (!rejected && !at_ret) {
    // After the refire check: a re-entry after morestack is not another call.
    std::lock_guard<std::mutex> lock(fstate_mu_);
    ++fs.count;
  }
  // Count keeps the frame only to recognise the refire after morestack (as eBPF tracks it),
  // and, with a condition, so that only a selected call's failure is counted.
  if (opts_.mode == Mode::Count && !tracks_refires(f, fs) && !at_ret && !(cond && fs.err)) return;
  // A goroutine already running when gotap attached shows no casgstatus before its first
  // call: its entry says which one the thread runs (as eBPF's why_call_entry does).
  if (why_kernel_ && goid > 0) runs_on_[tid] = goid;
  trap_goid_ = held_key(goid, tid);
  Held& held = held_[*trap_goid_];
  ++held.open;
  held.opened_at = trap_at_ns_;
  Pending& pend = pending_[key];
  pend = {role.func, ts, trap_at_ns_, tid, held.ns, false, rejected, bits, std::nullopt, vals};
  if (rejected || opts_.mode == Mode::Count || opts_.mode == Mode::Latency) return;
  // A call whose condition is decided at the return takes its --rate token there.
  if (!at_ret && !rate_allows(role.func, ts)) {
    pend.dropped = true;
    return;
  }
  CallEntry ev{CallSite{ts, proc_->pid(), tid, goid, f.name}};
  RegState rs = reg_state(r, tid, fs.needs_xmm, entry_sp);
  if (!at_ret && may_defer(role.func, false)) {
    if (queue_) return emit(std::move(ev), &f.args, &rs);
    deferred_.push_back([this, ev = std::move(ev), rs, &f]() mutable {
      EventBudget one(*dec_);
      for (const auto& p : f.args) ev.args.push_back(param(*dec_, p, rs));
      emit_call(std::move(ev));
    });
    return;
  }
  {
    EventBudget one(*dec_);
    for (const auto& p : f.args) ev.args.push_back(param(*dec_, p, rs));
  }
  if (opts_.stack_depth > 0) ev.stack = stack_of(r, s.addr, entry_sp, tid);
  if (at_ret)
    pend.waiting_entry = to_event(ev);
  else
    emit(std::move(ev));
}

void Tracer::on_return(const Site& s, const SiteRole& role, const user_regs_struct& r, pid_t tid,
                       uint64_t ts) {
  const FuncPlan& f = plan_.funcs[role.func];
  const cond::Condition* cond = opts_.condition;
  const bool at_ret = cond && cond->at_ret(role.func);
  FuncState& fs = fstate_[role.func];
  const bool errcheck = role.kind == SiteRole::Return && fs.err;
  // Without a condition every failure counts; with one, only a selected call's (below).
  if (errcheck && !cond) check_error(s, fs, r);
  if (opts_.mode == Mode::Count && !tracks_refires(f, fs) && !at_ret && !(cond && errcheck)) return;
  uint64_t sp = r.rsp + s.sp_delta;
  auto gi = gr_->current(r, fs.abi_internal);
  const int64_t goid = site_goid(gi);
  CallKey key{goid, gi ? gi->stack_hi - sp : sp};
  std::optional<Pending> entry;
  uint64_t held_ns = 0;
  trap_goid_ = held_key(goid, tid);
  auto it = pending_.find(key);
  if (it != pending_.end() && it->second.func == role.func) {
    entry = it->second;
    if (auto h = held_.find(held_key(goid, entry->tid)); h != held_.end())
      held_ns = h->second.ns - entry->held_at;
    close_pending(it);
  }
  // A call its condition rejected, or one whose entry was not seen (nothing to decide on).
  if (cond && (!entry || entry->rejected)) return;
  // The call's own time: trap to trap, less what gotap held the goroutine for since the
  // entry (from each hit's trap to its thread running again: waiting for gotap, decoding,
  // waiting for a CPU) is not the program's (docs/json.md, wall_ns).
  const uint64_t wall = entry ? ts - entry->ts : 0;
  const uint64_t span = entry && trap_at_ns_ > entry->stop_at ? trap_at_ns_ - entry->stop_at : 0;
  const uint64_t own = span > held_ns ? span - held_ns : 0;
  if (at_ret) {
    RegState crs = reg_state(r, tid, fs.needs_xmm, sp);
    cond::EvalEnv env{
        &crs, &proc_->mem(), goid == kNoGoid ? 0 : goid, own, bias_, entry->cond_bits, dec_.get()};
    std::copy(entry->cond_vals.begin(), entry->cond_vals.end(), env.vals);
    if (!cond::run(cond->funcs[role.func].prog, true, env)) return;
    {
      std::lock_guard<std::mutex> lock(fstate_mu_);
      ++fs.count;
    }
    if (entry->waiting_entry) {
      if (rate_allows(role.func, ts))
        emit(std::move(*entry->waiting_entry));
      else
        entry->dropped = true;
    }
  }
  if (errcheck && cond) check_error(s, fs, r);
  if (opts_.mode == Mode::Count) return;  // the frame is closed: a later entry is a new call
  // Trace keeps the histogram too when --prometheus serves it.
  if (entry && (opts_.mode == Mode::Latency || opts_.metrics)) {
    std::lock_guard<std::mutex> lock(fstate_mu_);
    fs.latency.add(own);
  }
  if (opts_.mode == Mode::Latency) return;
  // A call is reported whole or not at all; a return alone takes a token of its own.
  if (entry ? entry->dropped : !rate_allows(role.func, ts)) return;
  CallReturn ev{CallSite{ts, proc_->pid(), tid, goid, f.name}};
  if (entry) {
    ev.duration_ns = own;
    ev.wall_ns = wall;
  }
  RegState rs = reg_state(r, tid, fs.needs_xmm, sp);
  const bool results = role.kind == SiteRole::Return;
  if (may_defer(role.func, true)) {
    if (queue_) return emit(std::move(ev), results ? &f.results : nullptr, &rs);
    deferred_.push_back([this, ev = std::move(ev), rs, &f, results]() mutable {
      EventBudget one(*dec_);
      if (results)
        for (const auto& p : f.results) ev.results.push_back(param(*dec_, p, rs));
      emit_call(std::move(ev));
    });
    return;
  }
  if (results) {
    EventBudget one(*dec_);
    for (const auto& p : f.results) ev.results.push_back(param(*dec_, p, rs));
  }
  if (opts_.stack_depth > 0) ev.stack = stack_of(r, s.addr, sp, tid);
  emit(std::move(ev));
}

void Tracer::check_error(const Site& s, FuncState& fs, const user_regs_struct& r) {
  const LocPiece& w = *fs.err;
  const unsigned long long* gp[kNumValueRegs] = {&r.rax, &r.rbx, &r.rcx, &r.rdi, &r.rsi,
                                                 &r.r8,  &r.r9,  &r.r10, &r.r11, &r.rdx};
  uint64_t v = 0;
  if (w.kind != LocPiece::Stack && w.reg >= kNumValueRegs) return;
  if (w.kind == LocPiece::IntReg) {
    v = *gp[w.reg];
  } else if (w.kind == LocPiece::RegMem) {
    if (!hit_->mem().read(*gp[w.reg] + w.stack_offset, &v, 8)) return;
  } else if (!hit_->mem().read(r.rsp + s.sp_delta + w.stack_offset, &v, 8)) {
    return;
  }
  if (!v) return;
  std::lock_guard<std::mutex> lock(fstate_mu_);
  ++fs.failed;
}

bool Tracer::rate_allows(int func, uint64_t ts) {
  if (!rate_.enabled()) return true;
  std::lock_guard<std::mutex> lock(fstate_mu_);
  return rate_.allow(static_cast<size_t>(func), ts);
}

void Tracer::on_inline(const Site& s, const SiteRole& role, const user_regs_struct& r, pid_t tid,
                       uint64_t ts) {
  const FuncPlan& f = plan_.funcs[role.func];
  {
    std::lock_guard<std::mutex> lock(fstate_mu_);
    ++fstate_[role.func].count;
  }
  if (opts_.mode != Mode::Trace || !rate_allows(role.func, ts)) return;
  auto gi = gr_->current(r, true);
  CallEntry ev{CallSite{ts, proc_->pid(), tid, site_goid(gi), f.name}};
  ev.inlined = true;
  if (role.inline_idx >= 0 && size_t(role.inline_idx) < f.inline_sites.size())
    ev.inlined_in = f.inline_sites[role.inline_idx].outer;
  if (opts_.stack_depth > 0) {
    nlohmann::json st = stack_of(r, s.addr, r.rsp + s.sp_delta, tid);
    put_inlined_callee_on_top(st, f, opts_.stack_depth);
    ev.stack = std::move(st);
  }
  emit(std::move(ev));
}

// casgstatus(gp, old, new) and newproc1(fn, callergp, callerpc) (Go 1.17: newproc1(fn, argp,
// narg, callergp, callerpc)): ABIInternal, so RAX, RBX, RCX (RDI, RSI); the goids are read
// from the g structures they point to.
void Tracer::on_goroutine(const SiteRole& role, const user_regs_struct& r, pid_t tid, uint64_t ts) {
  if (!goroutines_) return;
  const uint64_t goid_off = plan_.offsets.g_goid;
  uint64_t goid = 0;
  // libgo's casgstatus and __go_go take System V arguments (GoroutineProbes::sysv).
  const bool sysv = plan_.goroutines.sysv;
  if (role.kind == SiteRole::GStatus) {
    const uint64_t gp = sysv ? r.rdi : r.rax;
    const uint32_t from = sysv ? libgo_status(uint32_t(r.rsi)) : uint32_t(r.rbx),
                   to = sysv ? libgo_status(uint32_t(r.rdx)) : uint32_t(r.rcx);
    if (!gp || !proc_->mem().read(gp + goid_off, &goid, 8)) {
      ++goid_read_errors_;
      return;
    }
    // g.waitreason: why it is about to wait (only read on the way to waiting).
    int reason = -1;
    uint8_t wr = 0;
    uint64_t caller = 0;
    if (to == kGWaiting && plan_.offsets.g_waitreason &&
        proc_->mem().read(gp + plan_.offsets.g_waitreason, &wr, 1)) {
      reason = wr;
      proc_->mem().read(r.rsp + plan_.goroutines.status_sp_delta, &caller, 8);
    }
    // Where it came from, the first time it shows up (it was created before the trace).
    std::optional<GoroutineOrigin> origin;
    if (!goroutines_->known(goid)) {
      const OriginSpan span = origin_span(plan_.offsets);
      uint8_t buf[64];
      if (span.size && span.size <= sizeof buf &&
          proc_->mem().read(gp + span.offset, buf, span.size))
        origin = parse_origin(plan_.offsets, buf, span.size);
    }
    std::optional<StatusStacks> stacks;
    if (plan_.goroutines.walk) stacks = status_stacks(r, from, to);
    goroutines_->on_status(ts, tid, goid, from, to, reason, origin ? &*origin : nullptr, caller,
                           stacks ? &*stacks : nullptr);
    note_runs(tid, int64_t(goid), from, to);
    return;
  }
  if (role.kind == SiteRole::GCreate && sysv) {
    // __go_go(fn, arg): fn is the start function's code; the parent is the goroutine running
    // it, and the go statement is at its return address.
    auto gi = gr_->current(r, false);
    uint64_t caller = 0;
    if (!gi || !proc_->mem().read(r.rsp, &caller, 8)) {
      ++goid_read_errors_;
      return;
    }
    goroutines_->on_create(ts, tid, uint64_t(gi->goid), r.rdi, caller);
    return;
  }
  if (role.kind == SiteRole::GSysEnter || role.kind == SiteRole::GSysExit) {
    // The goroutine entering or leaving the system call is the thread's own (R14: both are
    // ABIInternal).
    if (!r.r14 || !proc_->mem().read(r.r14 + goid_off, &goid, 8)) {
      ++goid_read_errors_;
      return;
    }
    const bool enter = role.kind == SiteRole::GSysEnter;
    goroutines_->on_status(ts, tid, goid, enter ? kGRunning : kGSyscall,
                           enter ? kGSyscall : kGRunning);
    return;
  }
  if (role.kind == SiteRole::GCreated) {
    if (!r.rax || !proc_->mem().read(r.rax + goid_off, &goid, 8)) {
      ++goid_read_errors_;
      return;
    }
    goroutines_->on_created(ts, tid, goid);
    return;
  }
  // newproc1's callergp and callerpc: RBX and RCX from Go 1.18, RDI and RSI in Go 1.17.
  const RegState rs = reg_state(r, tid, false, r.rsp);
  auto arg = [&](uint8_t i) -> uint64_t { return i < kNumIntRegs ? rs.gp[i] : 0; };
  const uint64_t callergp = arg(plan_.goroutines.create_gp_arg);
  uint64_t start_pc = 0;
  const bool has_gp = plan_.goroutines.create_gp_arg < kNumIntRegs;
  if (!r.rax || !proc_->mem().read(r.rax, &start_pc, 8) ||
      (has_gp && (!callergp || !proc_->mem().read(callergp + goid_off, &goid, 8)))) {
    ++goid_read_errors_;
    return;
  }
  goroutines_->on_create(ts, tid, goid, start_pc, arg(plan_.goroutines.create_pc_arg));
}

// --why at casgstatus(gp, old, new): on the way to waiting, gp's stack as the park saved it
// (mcall stores its pc and frame pointer in gp.sched); at a wake-up, the goroutine the thread
// runs (m.curg of the current g, in R14: casgstatus is ABIInternal) and its stack, from
// curg.sched when the thread is on its system stack (systemstack saved it there), else from
// the registers. Frame pointers only: every Go function with a frame keeps one.
std::optional<StatusStacks> Tracer::status_stacks(const user_regs_struct& r, uint32_t from,
                                                  uint32_t to) {
  constexpr int kFrames = 16;
  const RuntimeOffsets& o = plan_.offsets;
  auto& mem = proc_->mem();
  StatusStacks s;
  auto walk = [&](uint64_t pc, uint64_t fp) {
    if (pc) s.pcs.push_back(pc);
    while (fp && !(fp & 7) && s.pcs.size() < kFrames) {
      uint64_t rec[2];  // saved frame pointer, return address
      if (!mem.read(fp, rec, sizeof rec) || !rec[1]) break;
      s.pcs.push_back(rec[1]);
      if (rec[0] <= fp) break;  // frames go up the stack
      fp = rec[0];
    }
  };
  auto from_sched = [&](uint64_t g) {
    uint64_t pc = 0, fp = 0;
    if (mem.read(g + o.g_sched + o.gobuf_pc, &pc, 8) &&
        mem.read(g + o.g_sched + o.gobuf_bp, &fp, 8))
      walk(pc + 1, fp);  // a saved pc, not a return address: +1 so that pc - 1 is in it
  };
  if (to == kGWaiting) {
    if (!r.rax) return std::nullopt;
    from_sched(r.rax);
    return s;
  }
  if (from != kGWaiting || to != kGRunnable) return std::nullopt;
  uint64_t m = 0, curg = 0, goid = 0;
  if (!r.r14 || !mem.read(r.r14 + o.g_m, &m, 8) || !m || !mem.read(m + o.m_curg, &curg, 8))
    return std::nullopt;
  s.waker_goid = 0;
  if (!curg) return s;  // the scheduler's own: its network poll or a timer
  if (!mem.read(curg + o.g_goid, &goid, 8)) return std::nullopt;
  s.waker_goid = goid;
  if (curg == r.r14) {
    uint64_t ret = 0;
    mem.read(r.rsp + plan_.goroutines.status_sp_delta, &ret, 8);
    walk(ret, r.rbp);
  } else {
    from_sched(curg);
  }
  return s;
}

}  // namespace gotap::ptrace
