// The ptrace tracer's start: launching or seizing the program, proving it runs the planned
// file, and placing the int3s under the executable's lock (Tracer::start, setup_probes).
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
#include "core/plan/probe_detour.h"
#include "core/plan/signals_blocked.h"
#include "core/sys/proc_maps.h"
#include "core/sys/spawn.h"
#include "core/sys/test_delay.h"
#include "core/sys/timing.h"
#include "core/sys/uprobe_holders.h"
#include "core/why/why_sink.h"

namespace gotap::ptrace {

using nlohmann::json;

Result<void> Tracer::start() {
  // Test hook (tests/unit/test_runtime_attach.cpp): waits between the plan and the attach
  // (or launch), where a program may exec.
  sys::test_delay("GOTAP_TEST_ATTACH_DELAY_MS", "attaching");
  // Until the probes are live, a stop request ends every wait (the front end's handler may
  // run on another thread, where it interrupts no waitpid of ours).
  auto abort = [] { return stop_requested().load(); };
  pid_t stopped = 0;
  // Held from the first byte read at a site to the last int3 written (or put back), and let
  // go as start returns: another gotap, on either backend, checks its sites only after.
  sys::ImageLock lock;
  if (opts_.target.library) {
    auto img = PlannedImage::of(*bin_.elf);
    if (!img) return img.error();
    lib_ = std::move(*img);
  }
  if (!opts_.target.argv.empty()) {
    auto p = Process::launch(opts_.target.argv, abort);
    if (!p) return p.error();
    proc_ = std::move(*p);
    stopped = proc_->pid();
    // The program stops at its exec, before its first instruction: a file replaced since the
    // plan was made (a rebuild) is refused here, the program killed before it ran.
    if (auto r = check_image(); !r) {
      kill(proc_->pid(), SIGKILL);
      return r;
    }
    auto l = lock_image(proc_->pid(), sys::ImageLock::kPlaceWaitMs, true);
    if (!l) {
      kill(proc_->pid(), SIGKILL);
      return l.error();
    }
    lock = std::move(*l);
  } else if (opts_.target.pid > 0) {
    // Before the attach: a second ptrace gotap then finds the first attached, and fails
    // cleanly, rather than each seizing some of the threads and both failing. An exec in
    // between is refused below (check_image).
    auto l = lock_image(opts_.target.pid, sys::ImageLock::kPlaceWaitMs, true);
    if (!l) return l.error();
    lock = std::move(*l);
    auto p = Process::attach(opts_.target.pid, abort);
    if (!p) return p.error();
    proc_ = std::move(*p);
    stopped = proc_->pid();
    if (!proc_->threads().count(stopped)) stopped = *proc_->threads().begin();
    // Every thread is seized: an exec from now on stops for gotap (PTRACE_O_TRACEEXEC), and
    // the /proc/PID/mem that the writes go through reaches this image only. So this image,
    // checked now, is the only one any write can reach.
    if (auto r = check_image(); !r) {
      proc_->detach_all(trap_unchanged);
      return r;
    }
    clear_leftovers();
    auto r = proc_->interrupt_and_wait(stopped, [this](pid_t, user_regs_struct& r) {
      return rewind_leftover(leftover_sites_, proc_->mem(), r);
    });
    if (!r) {
      // The thread in an exec stop, if that is what ended it, is released by detach_all.
      proc_->detach_all(trap_unchanged);
      return proc_->exec_seen() ? exec_refusal() : r;
    }
  } else {
    return make_error("ptrace backend: no target (use -p PID or -- CMD ARGS)");
  }
  auto r = setup_probes(stopped);
  if (!r) {
    bps_.restore_all(proc_->mem(), file_text());
    release_file_text();
    if (proc_->launched()) {
      kill(proc_->pid(), SIGKILL);
    } else {
      // `stopped` is still in its interrupt stop: it will report nothing more.
      proc_->detach_all(trap_unchanged, stopped);
    }
    // An exec during the attach: the new program got none of it (Process::exec_seen).
    if (proc_->exec_seen() || runs_another_file()) return exec_refusal();
    return r;
  }
  proc_->set_abort(nullptr);
  return {};
}

bool Tracer::runs_another_file() const {
  // A library's copy: the executable was never compared (check_image says what is missing).
  if (lib_) return false;
  struct stat st {};
  const std::string exe = "/proc/" + std::to_string(proc_->pid()) + "/exe";
  const ElfFile& elf = *bin_.elf;
  return (elf.dev() || elf.ino()) && ::stat(exe.c_str(), &st) == 0 &&
         (uint64_t(st.st_dev) != elf.dev() || uint64_t(st.st_ino) != elf.ino());
}

Error Tracer::exec_refusal() const {
  return runtime_error(
      "pid {} changed its program (exec) between planning and attach; nothing was written",
      proc_->pid());
}

std::optional<uint64_t> Tracer::image_bias() const {
  return lib_ ? proven_bias(*bin_.elf, *lib_, proc_->pid()) : bin_.load_bias(proc_->pid());
}

std::string Tracer::image_path(pid_t pid) const {
  return lib_ ? lib_->attach_path : "/proc/" + std::to_string(pid) + "/exe";
}

Result<void> Tracer::check_image() {
  // The library's copy, executable at one bias; whichever program maps it, the writes reach
  // that file's pages only.
  if (lib_) {
    if (image_bias()) return {};
    return runtime_error(
        "pid {} does not map {} (or maps another copy of it): nothing was traced and no probe "
        "is left",
        proc_->pid(), bin_.elf->path());
  }
  // Without a bias only the executable is compared; setup_probes then says what is missing.
  const std::string what =
      image_mismatch(proc_->pid(), *bin_.elf, bin_.load_bias(proc_->pid()), proc_->mem());
  if (what.empty()) return {};
  if (proc_->launched())
    return runtime_error("{} is not the file that was planned ({}); nothing was written",
                         opts_.target.argv[0], what);
  // A process that ran exec, or a pid that another program took since: either way, what it
  // runs is not what was planned.
  return exec_refusal();
}

// A gotap killed earlier left its int3s here: the original bytes go back before anything
// else, or every site would look taken. Before the first thread is stopped, too: a thread
// that ran one of those int3s after the attach reports its SIGTRAP as a stop, and passed on
// to the program, the SIGTRAP could reach a handler that no longer knows the site (ours,
// armed meanwhile) and Go would die of it. Once the bytes are back, every such stop is
// rewound instead (rewind_leftover): at the interrupt, during the injected system calls, in
// the loop and at detach.
void Tracer::clear_leftovers() {
  auto bias = image_bias();
  if (!bias) return;  // setup_probes says so
  // Never where a uprobe is: that int3 is another tracer's, now or since the dead gotap.
  Leftovers left = remove_leftovers(
      proc_->pid(), proc_->mem(), [&](uint64_t addr) { return holder_of(addr, *bias) != nullptr; });
  if (left.restored)
    fmt::print(stderr, "gotap: removed {} probe{} left in pid {} by a gotap that was killed\n",
               left.restored, left.restored == 1 ? "" : "s", proc_->pid());
  net_.set_leftovers(std::move(left.handlers));
  leftover_sites_ = std::move(left.sites);
}

Result<sys::ImageLock> Tracer::lock_image(pid_t pid, int wait_ms, bool abortable) const {
  return sys::ImageLock::take(image_path(pid), bin_.elf->path(), wait_ms,
                              abortable ? &stop_requested() : nullptr);
}

std::pair<size_t, std::string> Tracer::share_uprobe_sites() {
  const auto holders = sys::uprobe_holders(image_path(proc_->pid()), proc_->pid(),
                                           /*certain=*/true);
  if (holders.empty()) return {0, {}};
  std::vector<uint64_t> held;
  std::string first;
  for (const Site& s : bps_.sites()) {
    auto off = s.addr >= bias_ ? bin_.elf->vaddr_to_offset(s.addr - bias_) : std::nullopt;
    auto it = off ? holders.find(*off) : holders.end();
    if (it == holders.end()) continue;
    if (held.empty())
      first = fmt::format("{} holds {}", it->second, bin_.func_name(s.addr - bias_));
    held.push_back(s.addr);
  }
  for (uint64_t a : held) bps_.share(a);
  return {held.size(), first};
}

const std::string* Tracer::holder_of(uint64_t addr, uint64_t bias) {
  if (!holders_) holders_ = sys::uprobe_holders(image_path(proc_->pid()), proc_->pid());
  auto off = addr >= bias ? bin_.elf->vaddr_to_offset(addr - bias) : std::nullopt;
  auto it = off ? holders_->find(*off) : holders_->end();
  return it == holders_->end() ? nullptr : &it->second;
}

// Go code that runs with signals blocked: the runtime's (its signal handlers block every
// signal, and what they call is the runtime's) and syscall's fork, which blocks them around
// the clone. Hits elsewhere cannot be forced SIGTRAPs (TrapNet::rearm).
static bool may_block_signals(std::string_view name) {
  for (std::string_view p : {"runtime.", "runtime/internal/", "internal/", "syscall."})
    if (name.substr(0, p.size()) == p) return true;
  return false;
}

Result<void> Tracer::setup_probes(pid_t stopped) {
  auto bias = image_bias();
  if (!bias)
    return runtime_error("cannot find where pid {} loaded {}", proc_->pid(), bin_.elf->path());
  bias_ = *bias;
  // What planning freed (a cold plan's work: about 50 MB for a whole binary) goes back to the
  // system before the tables below are built, rather than stay for the length of the trace.
  malloc_trim(0);
  prepare_decoding();
  // A large plan reads the executable's code a chunk at a time, not one system call per
  // site, and holds a few chunks, not the whole text (17 MB for caddy) next to the plan.
  auto snapshot = std::make_unique<SnapshotReader>(proc_->mem());
  if (plan_.funcs.size() > 256)
    for (const auto& seg : bin_.elf->segments())
      if (seg.type == 1 /* PT_LOAD */ && (seg.flags & 1 /* PF_X */))
        snapshot->add(seg.vaddr + bias_, seg.vaddr + seg.memsz + bias_);
  SiteTally tally;
  GOTAP_TRY(collect_sites(*snapshot, tally));
  GOTAP_TRY(report_sites(tally));
  // Test only: the window between the look at the sites and the int3s, which the lock and
  // the second look in insert_all close (test_runtime_two_tracers.cpp).
  sys::test_delay("GOTAP_TEST_PLACE_DELAY_MS", "placing the probes");
  const uint64_t code_loads = snapshot->loads();
  snapshot.reset();
  bps_.finish();
  sys::timing_mark(
      fmt::format("ptrace: read and decode the sites ({} chunks of code read)", code_loads));
  return arm(stopped);
}

// The readers and decoders every hit uses, and each function's state.
void Tracer::prepare_decoding() {
  // Decoding environment: type descriptors as mapped in the process.
  DecodeEnv env;
  env.types = bin_.types;
  // From the file: at a launch's exec stop the dynamic loader has not yet relocated the
  // moduledata of a PIE, so its words in memory are still link-time addresses.
  env.rt = bin_.rt;
  if (env.rt.types) {
    env.rt.types += bias_;
    env.rt.etypes += bias_;
  }
  env.func_name = [this](uint64_t pc) { return bin_.func_name(pc - bias_); };
  DecodeLimits lim{opts_.max_depth, opts_.max_elems, opts_.max_str};
  // Count and latency read no argument or result, unless a condition does.
  hit_ = std::make_unique<HitReader>(
      proc_->mem(), plan_, uint32_t(std::max(0, opts_.max_str)),
      (opts_.mode != Mode::Count && opts_.mode != Mode::Latency) || opts_.condition);
  {
    // Live decodes hold the traced thread: Ctrl-C ends one at its next read. The queue's
    // decodes read a copy, quickly, and are the events a stop still writes.
    DecodeEnv live_env = env;
    live_env.stop = &stop_requested();
    dec_ = std::make_unique<ValueDecoder>(hit_->mem(), live_env, lim);
  }
  gr_ = std::make_unique<GoroutineReader>(hit_->mem(), plan_, proc_->pid());
  // Count times nothing, unless a condition asks for `duration`.
  if (opts_.mode != Mode::Count || opts_.condition)
    stop_clock_ = std::make_unique<StopClock>(proc_->pid(), plan_.goroutines.walk);
  // --why: the stop clock's sched_switch program also adds up the time each thread was
  // preempted, which becomes preempted_ns, and its system-call programs keep each thread's
  // calls until its next stop, which names them.
  if (plan_.goroutines.walk && stop_clock_ && stop_clock_->switch_dated()) {
    why_kernel_ = true;
    why_syscalls_ = stop_clock_->watch_syscalls();
    if (!why_syscalls_)
      fmt::print(stderr,
                 "gotap: warning: cannot attach the system-call tracepoints: --why leaves "
                 "syscalls null\n");
    emit(why::kernel_start_event(why_syscalls_));
  }
  if (use_queue_)
    queue_ = std::make_unique<EventQueue>(sink_, proc_->mem(), env, lim, 4096, flush_ns_);

  fstate_.resize(plan_.funcs.size());
  for (size_t i = 0; i < plan_.funcs.size(); ++i)
    fstate_[i].signals_blocked = may_block_signals(plan_.funcs[i].name);
  // Per-function state only for what is asked for (a whole binary has 10,000s of functions).
  rate_ = RateLimit(opts_.rate_per_s, opts_.rate_per_s ? plan_.funcs.size() : 0);
  if (opts_.count_failed)
    for (size_t i = 0; i < plan_.funcs.size(); ++i) fstate_[i].err = error_word(plan_.funcs[i]);
}

// Sites that cannot be probed are counted, and reported once with the first reason. A site
// two functions share (a wrapper's RET that is its target's) is one int3 with two roles, so
// failures are counted as they happen, not as wanted minus placed.
Result<void> Tracer::collect_sites(SnapshotReader& code, SiteTally& t) {
  const ElfFile& elf = *bin_.elf;
  TraceeMemory& mem = proc_->mem();
  // Room for every site up front: a whole binary's table would otherwise grow by doubling.
  size_t most = plan_.goroutines.created.size() + 2;
  for (const FuncPlan& f : plan_.funcs)
    most += (f.entry_probe ? 1 + f.tail_jumps.size() : 0) + f.ret_sites.size() +
            (f.inline_probed ? f.inline_sites.size() : 0);
  bps_.reserve(most);
  uint8_t first_byte = 0;
  using Ranges = std::vector<std::pair<uint64_t, uint64_t>>;
  // A gccgo program has no pclntab: its child's functions are known by name (below), and
  // libgo's signal masks are its own (docs/cli.md, gccgo).
  const Ranges child_code = bin_.pclntab ? fork_child_ranges(elf, *bin_.pclntab) : Ranges{};
  const Ranges blocked_code = bin_.pclntab ? signals_blocked_ranges(*bin_.pclntab) : Ranges{};
  auto in = [](const Ranges& code, uint64_t pc) {
    auto it =
        std::upper_bound(code.begin(), code.end(), std::pair<uint64_t, uint64_t>{pc, UINT64_MAX});
    return it != code.begin() && pc < std::prev(it)->second;
  };
  for (size_t i = 0; i < plan_.funcs.size(); ++i) {
    const FuncPlan& f = plan_.funcs[i];
    FuncState& fs = fstate_[i];
    fs.abi_internal = f.abi != "abi0";
    for (const auto* list : {&f.args, &f.results})
      for (const auto& p : *list)
        for (const auto& pc : p.loc.pieces)
          if (pc.kind == LocPiece::FloatReg) fs.needs_xmm = true;
    auto add = [&](uint64_t pc, SiteRole role, int32_t sp_delta) {
      if (in(child_code, pc) || (!bin_.pclntab && gccgo_fork_child(f.name))) {
        // f's, or f inlined there
        if (!t.child_left++) t.first_child = bin_.pclntab ? bin_.func_name(pc) : f.name;
        return false;
      }
      if (in(blocked_code, pc)) {
        if (!t.blocked_left++) t.first_blocked = bin_.func_name(pc);
        return false;
      }
      ++t.wanted;
      auto r = bps_.add(pc + bias_, role, sp_delta, code);
      if (r) return true;
      ++t.failed;
      if (r.error().what().find("already holds an int3") != std::string::npos) {
        ++t.taken;
        // Never where a uprobe is: that int3 is another tracer's.
        if (const std::string* who = holder_of(pc + bias_, bias_); who && t.first_holder.empty())
          t.first_holder = fmt::format("{} holds {}", *who, f.name);
      }
      if (t.first_problem.empty())
        t.first_problem = fmt::format("{}: {}", f.name, r.error().what());
      return false;
    };
    // Count needs a function's returns only for what its entry cannot tell (as on eBPF): a
    // re-entry after morestack that no Uncount site takes back (tracks_refires), a condition
    // decided at the return, a failure. Elsewhere a RET's int3 would be a second stop per
    // call that on_return throws away. A condition may reject the first entry and accept the
    // refire: no blind uncount then.
    const bool at_ret = opts_.condition && opts_.condition->at_ret(int(i));
    auto needs_rets = [&] {
      return opts_.mode != Mode::Count || tracks_refires(f, fs) || fs.err.has_value() || at_ret;
    };
    fs.uncount =
        opts_.mode == Mode::Count && f.entry_refires && f.morestack_call && !opts_.condition;
    const size_t nrets =
        needs_rets() ? f.ret_sites.size() + (f.entry_probe ? f.tail_jumps.size() : 0) : 0;
    // A trampoline gotap's jump at or before the probe (core/plan/probe_detour.h).
    if (const size_t n = detour_span(f)) {
      uint8_t live[64];
      const Bytes file = elf.read(f.entry, n);
      if (n <= sizeof live && mem.read(f.entry + bias_, live, n) &&
          entry_probe_detoured(f, file, Bytes(live, n))) {
        t.wanted += 1 + nrets;
        t.failed += 1 + nrets;
        if (!t.detoured++) t.first_detoured = f.name;
        continue;
      }
    }
    const bool entry_placed =
        f.entry_probe && add(f.entry_probe, {SiteRole::Entry, int(i), -1}, f.frame_size);
    // Another tracer on the entry: the function is not traced at all, or each of its returns
    // would show as a call of no length (docs/cli.md, "Sites another tracer holds").
    if (f.entry_probe && !entry_placed && mem.read(f.entry_probe + bias_, &first_byte, 1) &&
        first_byte == 0xCC) {
      t.wanted += nrets;
      t.failed += nrets;
      continue;
    }
    // Without its entry or its own site, the refire is tracked through the returns instead.
    if (fs.uncount)
      fs.uncount = entry_placed && add(f.morestack_call, {SiteRole::Uncount, int(i), -1}, 0);
    const bool rets = needs_rets();
    // A RET's frame is torn down: the return address is at RSP.
    if (rets)
      for (uint64_t rs : f.ret_sites) add(rs, {SiteRole::Return, int(i), -1}, 0);
    // A tail jump ends the call too (the eBPF backend probes them the same way).
    if (rets && f.entry_probe)
      for (uint64_t tj : f.tail_jumps) add(tj, {SiteRole::TailJump, int(i), -1}, 0);
    if (f.inline_probed)
      for (size_t k = 0; k < f.inline_sites.size(); ++k)
        add(f.inline_sites[k].pc, {SiteRole::Inline, int(i), int(k)}, f.inline_sites[k].sp_delta);
  }
  const GoroutineProbes& gp = plan_.goroutines;
  struct GSite {
    uint64_t pc;
    SiteRole::Kind kind;
    int32_t sp_delta;
  };
  std::vector<GSite> gsites = {{gp.status, SiteRole::GStatus, gp.status_sp_delta},
                               {gp.create, SiteRole::GCreate, gp.create_sp_delta}};
  for (uint64_t pc : gp.created) gsites.push_back({pc, SiteRole::GCreated, 0});
  gsites.push_back({gp.sys_enter, SiteRole::GSysEnter, 0});
  gsites.push_back({gp.sys_exit, SiteRole::GSysExit, 0});
  for (auto [pc, kind, sp_delta] : gsites) {
    if (!pc) continue;
    auto r = bps_.add(pc + bias_, {kind, -1, -1}, sp_delta, code);
    if (!r) return runtime_error("cannot probe the goroutine scheduler: {}", r.error().what());
  }
  if (gp.status) {
    // A library's creators are mostly the executable's code: named from that file.
    if (lib_) mapped_names_ = std::make_unique<MappedNames>(proc_->pid());
    goroutines_ = std::make_unique<GoroutineEvents>(
        stage_sink_, proc_->pid(),
        [this](uint64_t pc) {
          std::string name = pc >= bias_ ? bin_.func_name(pc - bias_) : std::string();
          if (name.empty() && mapped_names_) name = mapped_names_->name(pc);
          return name;
        },
        plan_.wait_reasons, wait_reason_only_from_park(plan_.go));
  }
  return {};
}

// What could not be placed, or was left out on purpose: a warning, or the refusal when
// nothing could be.
Result<void> Tracer::report_sites(const SiteTally& t) {
  std::string why = t.taken ? fmt::format(
                                  "{} of them already hold an int3: another tracer (a uprobe or a "
                                  "debugger) is on them{}",
                                  t.taken, t.first_holder.empty() ? "" : "; " + t.first_holder)
                    : t.first_problem.empty() ? ""
                                              : "first: " + t.first_problem;
  if (t.detoured)
    why += fmt::format(
        "{}another tracer's jump (a trampoline gotap's) holds the entry probe of {} "
        "function{}, e.g. {}",
        why.empty() ? "" : "; ", t.detoured, t.detoured == 1 ? "" : "s", t.first_detoured);
  // Left out on purpose, not a failure: said apart from the sites that could not be placed.
  auto left_out = [](size_t n, const std::string& first, const char* where) {
    return fmt::format("{} probe site{} left out: {} runs {} (--backend=ebpf probes it)", n,
                       n == 1 ? "" : "s", first, where);
  };
  const std::string child_why =
      left_out(t.child_left, t.first_child, "in the child os/exec forks, where an int3 kills it");
  const std::string blocked_why =
      left_out(t.blocked_left, t.first_blocked,
               "with signals blocked, where an int3 that a killed gotap leaves kills the program");
  if ((t.child_left || t.blocked_left) && t.wanted == 0)
    return runtime_error("no probe could be placed: {}", t.child_left ? child_why : blocked_why);
  if (t.child_left) fmt::print(stderr, "gotap: warning: {}\n", child_why);
  if (t.blocked_left) fmt::print(stderr, "gotap: warning: {}\n", blocked_why);
  if (t.wanted && t.failed == t.wanted)
    return runtime_error("no probe could be placed ({} sites; {})", t.wanted, why);
  if (t.failed)
    fmt::print(stderr, "gotap: warning: {} of {} probe sites not placed ({})\n", t.failed, t.wanted,
               why);
  if (bps_.size() == 0) return runtime_error("no probe could be placed");
  return {};
}

// The scratch pages, the safety net and the int3s, then the banner.
Result<void> Tracer::arm(pid_t stopped) {
  const ElfFile& elf = *bin_.elf;
  uint64_t lo = UINT64_MAX, hi = 0;
  for (const auto& seg : elf.segments()) {
    if (seg.type != 1 /* PT_LOAD */) continue;
    // The whole image: a copied instruction may address data as well as code.
    lo = std::min(lo, seg.vaddr + bias_);
    hi = std::max(hi, seg.vaddr + seg.memsz + bias_);
  }
  // A library's entry is none (0 for libgo.so): the executable's, as the kernel gave it.
  if (lib_) {
    auto entry = sys::entry_point(proc_->pid());
    if (!entry) return runtime_error("cannot read pid {}'s entry point", proc_->pid());
    syscall_at_ = *entry;
  } else {
    syscall_at_ = elf.entry() + bias_;
  }
  proc_->set_inject_phase("attach", [this](pid_t, user_regs_struct& r) {
    return rewind_leftover(leftover_sites_, proc_->mem(), r);
  });
  GOTAP_TRY(bps_.place_scratch(*proc_, stopped, syscall_at_, lo, hi));
  sys::timing_mark("ptrace: map and write the scratch pages");
  // The safety net goes up before the first int3 (attached), or once the Go runtime has
  // installed its own SIGTRAP handler (launched: at a later hit, handle_trap).
  {
    std::vector<uint64_t> sets =
        bin_.pclntab ? block_all_sets(elf, *bin_.pclntab) : std::vector<uint64_t>{};
    for (uint64_t& a : sets) a += bias_;
    net_.set_block_all_sets(std::move(sets));
  }
  if (!arm_net(stopped)) net_wanted_ = true;
  // A forked child gets no int3 from the program: whatever its signal state, an int3 it ran
  // would kill it, traced by nobody (forked_child.h). Its table is emptied too, so that a
  // gotap that traces it later does not take the page for a dead gotap's. Also when the
  // program's int3s are gone: a child forked before they went reports after.
  proc_->set_child_clean([this](TraceeMemory& child) {
    bps_.restore_in(child, file_text());
    release_file_text();
    retire_table(child, bps_.scratch());
  });
  // The thread that ran the injections is still held: a thread killed meanwhile (by an exec
  // in another thread, which then waits for gotap to reap the others, the old program's
  // memory still in place) makes the injections fail, and the arm only warns of that.
  if (user_regs_struct held{}; ::ptrace(PTRACE_GETREGS, stopped, nullptr, &held) != 0)
    return runtime_error("thread {} of pid {} was killed while gotap attached", stopped,
                         proc_->pid());
  auto inserted = bps_.insert_all(proc_->mem(), file_text());
  release_file_text();
  if (!inserted && bps_.changed_at())
    return runtime_error("{} ({}); nothing was traced", inserted.error().what(),
                         bin_.func_name(bps_.changed_at() - bias_));
  GOTAP_TRY(inserted);
  // A uprobe registered between the look at a site and the int3 written there found the int3
  // in place and wrote none (the kernel's verify_opcode): it takes every hit of that site now.
  // Other gotaps wait for the lock; a tracer that takes none (bpftrace) is seen here when the
  // kernel lists its link. Its int3 stays; the trace is refused.
  if (auto [n, who] = share_uprobe_sites(); n)
    return runtime_error(
        "another tracer put a uprobe on {} of the {} probe sites while gotap placed its own "
        "({}); nothing was traced, and its probes are left to it",
        n, bps_.size(), who);
  sys::timing_mark("ptrace: armed");

  // The thread that ran the injected syscalls is resumed before the banner: scripts act on
  // the banner, and a gotap killed while that thread still sat in its ptrace-stop would leave
  // it to take the single-step's SIGTRAP, which is no int3 of ours, so Go's handler dies of it.
  Process::cont(stopped, proc_->take_held_signal(stopped));
  fmt::print(stderr, "{}\n",
             tracing_banner(plan_.funcs.size(), bps_.size(), "ptrace",
                            fmt::format("pid {}", proc_->pid()), goroutines_ != nullptr));
  std::fflush(stderr);
  begin_metrics();
  return {};
}

}  // namespace gotap::ptrace
