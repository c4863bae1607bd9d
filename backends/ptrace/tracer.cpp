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
#include "core/plan/signals_blocked.h"
#include "core/sys/spawn.h"
#include "core/sys/test_delay.h"
#include "core/sys/timing.h"
#include "core/sys/uprobe_holders.h"

namespace gotap::ptrace {

using nlohmann::json;

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + ts.tv_nsec;
}

namespace {

// Wakes the tracer thread out of waitpid when a stop is requested or the duration ends:
// the front end's signal handler may run on any thread, and a blocked waitpid only returns
// on a signal delivered to its own thread (handler installed without SA_RESTART).
class Waker {
 public:
  // `failed`: set by the output's thread (EventQueue), which the tracer must hear of even
  // while no hit wakes it.
  Waker(uint64_t deadline_ns, const std::atomic<bool>* failed)
      : deadline_(deadline_ns), failed_(failed), tracer_(pthread_self()) {
    struct sigaction sa {};
    sa.sa_handler = [](int) {};
    sigemptyset(&sa.sa_mask);
    sigaction(signo(), &sa, &old_);
    thread_ = std::thread([this] {
      while (!done_.load()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        if (due() && !done_.load()) pthread_kill(tracer_, signo());
      }
    });
  }
  ~Waker() {
    done_.store(true);
    thread_.join();
    sigaction(signo(), &old_, nullptr);
  }
  bool due() const {
    return stop_requested().load() || (deadline_ && now_ns() >= deadline_) ||
           (failed_ && failed_->load());
  }
  static int signo() { return SIGRTMIN + 4; }

 private:
  uint64_t deadline_;
  const std::atomic<bool>* failed_;
  pthread_t tracer_;
  std::atomic<bool> done_{false};
  struct sigaction old_ {};
  std::thread thread_;
};

// An argument or result as the event carries it: the decoder gives the value with its name
// and type.
Param param(ValueDecoder& dec, const ParamLoc& p, const RegState& rs) {
  json j = dec.decode_param(p, rs);
  return {p.name, p.type_name, std::move(j["value"])};
}

}  // namespace

Tracer::Tracer(const ProbePlan& plan, const TraceOptions& opts, EventSink& sink)
    : bin_(plan.binary_view), plan_(plan), opts_(opts), sink_(sink) {}

Tracer::~Tracer() {
  end_metrics();
}

void Tracer::begin_metrics() {
  if (!opts_.metrics) return;
  opts_.metrics->begin(proc_->pid(), [this](MetricsSnapshot& snap) {
    std::lock_guard<std::mutex> lock(fstate_mu_);
    for (size_t i = 0; i < plan_.funcs.size(); ++i) {
      FuncMetrics m;
      m.func = plan_.funcs[i].name;
      m.calls = fstate_[i].count;
      m.timed = opts_.mode != Mode::Count;
      if (m.timed) m.latency = fstate_[i].latency;
      if (fstate_[i].err) m.failed = fstate_[i].failed;
      if (rate_.enabled()) m.rate_limited = rate_.dropped(i);
      snap.funcs.push_back(std::move(m));
    }
    // Every hit is handled while its thread waits: nothing is ever dropped.
    snap.lost = 0;
    if (budget_.enabled()) snap.detached_functions = detached_total_.load();
  });
  metrics_live_ = true;
}

void Tracer::end_metrics() {
  if (metrics_live_) opts_.metrics->end();
  metrics_live_ = false;
}

bool Tracer::stop_due() const {
  return stop_requested().load() || (deadline_ns_ && now_ns() >= deadline_ns_);
}

void Tracer::emit(json ev) {
  if (queue_) {
    ++events_;
    staged_.push_back({std::move(ev)});
    return;
  }
  if (!deferred_.empty() && !in_deferred_) {
    deferred_.push_back([this, ev = std::move(ev)] { emit(ev); });
    return;
  }
  ++events_;
  sink_.emit(ev);
}

// The call events, typed (EventSink::emit_entry), deferred like the others; with the queue
// they are staged like every event, so that the output keeps the order of the hits.
template <class Call>
void Tracer::emit_call(Call ev) {
  if (queue_) {
    if constexpr (std::is_same_v<Call, CallUnfinished>)
      emit(to_event(ev));
    else
      emit(std::move(ev), nullptr, nullptr);
    return;
  }
  if (!deferred_.empty() && !in_deferred_) {
    deferred_.push_back([this, ev = std::move(ev)] { emit_call(ev); });
    return;
  }
  ++events_;
  if constexpr (std::is_same_v<Call, CallEntry>)
    sink_.emit_entry(ev);
  else if constexpr (std::is_same_v<Call, CallReturn>)
    sink_.emit_return(ev);
  else
    sink_.emit_unfinished(ev);
}

// CallEntry's args and CallReturn's results: the same way but for the list they fill.
template <class Call, std::vector<Param> Call::*List>
void Tracer::emit_decoded(Call ev, const std::vector<ParamLoc>* params, const RegState* rs) {
  if (queue_) {
    ++events_;
    staged_.push_back({std::move(ev), params, rs ? *rs : RegState{}});
    return;
  }
  if (params) {
    EventBudget one(*dec_);
    for (const auto& p : *params) (ev.*List).push_back(param(*dec_, p, *rs));
  }
  emit_call(std::move(ev));
}

void Tracer::emit(CallEntry ev, const std::vector<ParamLoc>* params, const RegState* rs) {
  emit_decoded<CallEntry, &CallEntry::args>(std::move(ev), params, rs);
}

void Tracer::emit(CallReturn ev, const std::vector<ParamLoc>* params, const RegState* rs) {
  emit_decoded<CallReturn, &CallReturn::results>(std::move(ev), params, rs);
}

void Tracer::StageSink::emit(const Event& ev) {
  if (t.queue_)
    t.staged_.push_back({ev});
  else
    t.sink_.emit(ev);
}

void Tracer::StageSink::flush() {
  if (!t.queue_) t.sink_.flush();
}

void Tracer::hand_over() {
  if (staged_.empty()) return;
  // The copy goes with the events that decode from it: moved to the last, copied to others.
  QueuedEvent* last = nullptr;
  for (auto& q : staged_)
    if (q.params) {
      if (last) last->copy = hit_->mem().regions();
      last = &q;
    }
  if (last) last->copy = hit_->mem().take();
  queue_->push(staged_);
}

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
      proc_->detach_all([](pid_t, user_regs_struct&) { return false; });
      return r;
    }
    clear_leftovers();
    auto r = proc_->interrupt_and_wait(stopped, [this](pid_t, user_regs_struct& r) {
      return rewind_leftover(leftover_sites_, proc_->mem(), r);
    });
    if (!r) {
      // The thread in an exec stop, if that is what ended it, is released by detach_all.
      proc_->detach_all([](pid_t, user_regs_struct&) { return false; });
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
      proc_->detach_all([](pid_t, user_regs_struct&) { return false; }, stopped);
    }
    // An exec during the attach: the new program got none of it (Process::exec_seen).
    if (proc_->exec_seen() || runs_another_file()) return exec_refusal();
    return r;
  }
  proc_->set_abort(nullptr);
  return {};
}

bool Tracer::runs_another_file() const {
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

Result<void> Tracer::check_image() {
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
  auto bias = bin_.load_bias(proc_->pid());
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
  return sys::ImageLock::take("/proc/" + std::to_string(pid) + "/exe", bin_.elf->path(), wait_ms,
                              abortable ? &stop_requested() : nullptr);
}

std::pair<size_t, std::string> Tracer::share_uprobe_sites() {
  const auto holders = sys::uprobe_holders("/proc/" + std::to_string(proc_->pid()) + "/exe",
                                           proc_->pid(), /*certain=*/true);
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
  if (!holders_)
    holders_ = sys::uprobe_holders("/proc/" + std::to_string(proc_->pid()) + "/exe", proc_->pid());
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
  const ElfFile& elf = *bin_.elf;
  auto bias = bin_.load_bias(proc_->pid());
  if (!bias) return runtime_error("cannot find where pid {} loaded {}", proc_->pid(), elf.path());
  bias_ = *bias;
  TraceeMemory& mem = proc_->mem();
  // What planning freed (a cold plan's work: about 50 MB for a whole binary) goes back to the
  // system before the tables below are built, rather than stay for the length of the trace.
  malloc_trim(0);

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
      mem, plan_, uint32_t(std::max(0, opts_.max_str)),
      (opts_.mode != Mode::Count && opts_.mode != Mode::Latency) || opts_.condition);
  {
    // Live decodes hold the traced thread: Ctrl-C ends one at its next read. The queue's
    // decodes read a copy, quickly, and are the events a stop still writes.
    DecodeEnv live_env = env;
    live_env.stop = &stop_requested();
    dec_ = std::make_unique<ValueDecoder>(hit_->mem(), live_env, lim);
  }
  gr_ = std::make_unique<GoroutineReader>(hit_->mem(), plan_);
  // Count times nothing, unless a condition asks for `duration`.
  if (opts_.mode != Mode::Count || opts_.condition)
    stop_clock_ = std::make_unique<StopClock>(proc_->pid());
  if (use_queue_) queue_ = std::make_unique<EventQueue>(sink_, mem, env, lim, 4096, flush_ns_);

  fstate_.resize(plan_.funcs.size());
  for (size_t i = 0; i < plan_.funcs.size(); ++i)
    fstate_[i].signals_blocked = may_block_signals(plan_.funcs[i].name);
  // Per-function state only for what is asked for (a whole binary has 10,000s of functions).
  rate_ = RateLimit(opts_.rate_per_s, opts_.rate_per_s ? plan_.funcs.size() : 0);
  if (opts_.count_failed)
    for (size_t i = 0; i < plan_.funcs.size(); ++i) fstate_[i].err = error_word(plan_.funcs[i]);
  // Sites that cannot be probed are counted, and reported once with the first reason. A site
  // two functions share (a wrapper's RET that is its target's) is one int3 with two roles, so
  // failures are counted as they happen, not as wanted minus placed.
  // A large plan reads the executable's code a chunk at a time, not one system call per
  // site, and holds a few chunks, not the whole text (17 MB for caddy) next to the plan.
  auto snapshot = std::make_unique<SnapshotReader>(mem);
  SnapshotReader& code = *snapshot;
  if (plan_.funcs.size() > 256)
    for (const auto& seg : elf.segments())
      if (seg.type == 1 /* PT_LOAD */ && (seg.flags & 1 /* PF_X */))
        code.add(seg.vaddr + bias_, seg.vaddr + seg.memsz + bias_);
  // Room for every site up front: a whole binary's table would otherwise grow by doubling.
  size_t most = plan_.goroutines.created.size() + 2;
  for (const FuncPlan& f : plan_.funcs)
    most += (f.entry_probe ? 1 + f.tail_jumps.size() : 0) + f.ret_sites.size() +
            (f.inline_probed ? f.inline_sites.size() : 0);
  bps_.reserve(most);
  size_t wanted = 0, taken = 0, failed = 0, child_left = 0, blocked_left = 0;
  std::string first_problem, first_holder, first_child, first_blocked;
  uint8_t first_byte = 0;
  using Ranges = std::vector<std::pair<uint64_t, uint64_t>>;
  const Ranges child_code = fork_child_ranges(elf, *bin_.pclntab);
  const Ranges blocked_code = signals_blocked_ranges(*bin_.pclntab);
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
      if (in(child_code, pc)) {
        if (!child_left++) first_child = bin_.func_name(pc);  // f's, or f inlined there
        return false;
      }
      if (in(blocked_code, pc)) {
        if (!blocked_left++) first_blocked = bin_.func_name(pc);
        return false;
      }
      ++wanted;
      auto r = bps_.add(pc + bias_, role, sp_delta, code);
      if (r) return true;
      ++failed;
      if (r.error().what().find("already holds an int3") != std::string::npos) {
        ++taken;
        // Never where a uprobe is: that int3 is another tracer's.
        if (const std::string* who = holder_of(pc + bias_, bias_); who && first_holder.empty())
          first_holder = fmt::format("{} holds {}", *who, f.name);
      }
      if (first_problem.empty()) first_problem = fmt::format("{}: {}", f.name, r.error().what());
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
    const bool entry_placed =
        f.entry_probe && add(f.entry_probe, {SiteRole::Entry, int(i), -1}, f.frame_size);
    // Another tracer on the entry: the function is not traced at all, or each of its returns
    // would show as a call of no length (docs/cli.md, "Sites another tracer holds").
    if (f.entry_probe && !entry_placed && mem.read(f.entry_probe + bias_, &first_byte, 1) &&
        first_byte == 0xCC) {
      wanted += nrets;
      failed += nrets;
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
    goroutines_ = std::make_unique<GoroutineEvents>(
        stage_sink_, proc_->pid(),
        [this](uint64_t pc) { return pc >= bias_ ? bin_.func_name(pc - bias_) : std::string(); },
        plan_.wait_reasons, wait_reason_only_from_park(plan_.go));
  }
  const std::string why =
      taken ? fmt::format(
                  "{} of them already hold an int3: another tracer (a uprobe or a "
                  "debugger) is on them{}",
                  taken, first_holder.empty() ? "" : "; " + first_holder)
            : "first: " + first_problem;
  // Left out on purpose, not a failure: said apart from the sites that could not be placed.
  auto left_out = [](size_t n, const std::string& first, const char* where) {
    return fmt::format("{} probe site{} left out: {} runs {} (--backend=ebpf probes it)", n,
                       n == 1 ? "" : "s", first, where);
  };
  const std::string child_why =
      left_out(child_left, first_child, "in the child os/exec forks, where an int3 kills it");
  const std::string blocked_why =
      left_out(blocked_left, first_blocked,
               "with signals blocked, where an int3 that a killed gotap leaves kills the program");
  if ((child_left || blocked_left) && wanted == 0)
    return runtime_error("no probe could be placed: {}", child_left ? child_why : blocked_why);
  if (child_left) fmt::print(stderr, "gotap: warning: {}\n", child_why);
  if (blocked_left) fmt::print(stderr, "gotap: warning: {}\n", blocked_why);
  if (wanted && failed == wanted)
    return runtime_error("no probe could be placed ({} sites; {})", wanted, why);
  if (failed)
    fmt::print(stderr, "gotap: warning: {} of {} probe sites not placed ({})\n", failed, wanted,
               why);
  if (bps_.size() == 0) return runtime_error("no probe could be placed");
  // Test only: the window between the look at the sites and the int3s, which the lock and
  // the second look in insert_all close (test_runtime_two_tracers.cpp).
  sys::test_delay("GOTAP_TEST_PLACE_DELAY_MS", "placing the probes");
  const uint64_t code_loads = snapshot->loads();
  snapshot.reset();
  bps_.finish();
  sys::timing_mark(
      fmt::format("ptrace: read and decode the sites ({} chunks of code read)", code_loads));

  uint64_t lo = UINT64_MAX, hi = 0;
  for (const auto& seg : elf.segments()) {
    if (seg.type != 1 /* PT_LOAD */) continue;
    // The whole image: a copied instruction may address data as well as code.
    lo = std::min(lo, seg.vaddr + bias_);
    hi = std::max(hi, seg.vaddr + seg.memsz + bias_);
  }
  syscall_at_ = elf.entry() + bias_;
  proc_->set_inject_phase("attach", [this](pid_t, user_regs_struct& r) {
    return rewind_leftover(leftover_sites_, proc_->mem(), r);
  });
  GOTAP_TRY(bps_.place_scratch(*proc_, stopped, syscall_at_, lo, hi));
  sys::timing_mark("ptrace: map and write the scratch pages");
  // The safety net goes up before the first int3 (attached), or once the Go runtime has
  // installed its own SIGTRAP handler (launched: at a later hit, handle_trap).
  {
    std::vector<uint64_t> sets = block_all_sets(elf, *bin_.pclntab);
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
  auto inserted = bps_.insert_all(mem, file_text());
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

RegState Tracer::reg_state(const user_regs_struct& r, pid_t tid, bool xmm, uint64_t sp) {
  RegState rs;
  const unsigned long long* gp[kNumIntRegs] = {&r.rax, &r.rbx, &r.rcx, &r.rdi, &r.rsi,
                                               &r.r8,  &r.r9,  &r.r10, &r.r11};
  for (int i = 0; i < kNumIntRegs; ++i) rs.gp[i] = *gp[i];
  rs.sp = sp;
  if (xmm) {
    user_fpregs_struct fp{};
    if (::ptrace(PTRACE_GETFPREGS, tid, nullptr, &fp) == 0)
      for (int i = 0; i < kNumFloatRegs; ++i) std::memcpy(&rs.xmm[i], &fp.xmm_space[i * 4], 8);
  }
  return rs;
}

json Tracer::stack_of(const user_regs_struct& regs, uint64_t pc, uint64_t ret_slot) {
  user_regs_struct r = regs;
  r.rip = pc;  // the probed instruction, not the address after the int3
  auto pcs = walk_frames(proc_->mem(), r, ret_slot, opts_.stack_depth);
  return symbolize(bin_, bias_, pcs, opts_.stack_depth);
}

void Tracer::on_entry(const Site& s, const SiteRole& role, const user_regs_struct& r, pid_t tid,
                      uint64_t ts) {
  const FuncPlan& f = plan_.funcs[role.func];
  FuncState& fs = fstate_[role.func];
  uint64_t entry_sp = r.rsp + s.sp_delta;
  auto gi = gr_->current(r, fs.abi_internal);
  int64_t goid = gi ? gi->goid : 0;
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
    cond::EvalEnv env{&crs, &proc_->mem(), goid, 0, bias_, 0, dec_.get()};
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
  trap_goid_ = goid;
  Held& held = held_[goid];
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
  if (opts_.stack_depth > 0) ev.stack = stack_of(r, s.addr, entry_sp);
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
  int64_t goid = gi ? gi->goid : 0;
  CallKey key{goid, gi ? gi->stack_hi - sp : sp};
  std::optional<Pending> entry;
  uint64_t held_ns = 0;
  trap_goid_ = goid;
  auto it = pending_.find(key);
  if (it != pending_.end() && it->second.func == role.func) {
    entry = it->second;
    if (auto h = held_.find(goid); h != held_.end()) held_ns = h->second.ns - entry->held_at;
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
    cond::EvalEnv env{&crs, &proc_->mem(), goid, own, bias_, entry->cond_bits, dec_.get()};
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
  if (opts_.stack_depth > 0) ev.stack = stack_of(r, s.addr, sp);
  emit(std::move(ev));
}

void Tracer::check_error(const Site& s, FuncState& fs, const user_regs_struct& r) {
  const LocPiece& w = *fs.err;
  uint64_t v = 0;
  if (w.kind == LocPiece::IntReg) {
    const unsigned long long* gp[kNumIntRegs] = {&r.rax, &r.rbx, &r.rcx, &r.rdi, &r.rsi,
                                                 &r.r8,  &r.r9,  &r.r10, &r.r11};
    if (w.reg >= kNumIntRegs) return;
    v = *gp[w.reg];
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
  CallEntry ev{CallSite{ts, proc_->pid(), tid, gi ? gi->goid : 0, f.name}};
  ev.inlined = true;
  if (role.inline_idx >= 0 && size_t(role.inline_idx) < f.inline_sites.size())
    ev.inlined_in = f.inline_sites[role.inline_idx].outer;
  if (opts_.stack_depth > 0) {
    nlohmann::json st = stack_of(r, s.addr, r.rsp + s.sp_delta);
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
  if (role.kind == SiteRole::GStatus) {
    if (!r.rax || !proc_->mem().read(r.rax + goid_off, &goid, 8)) {
      ++goid_read_errors_;
      return;
    }
    // g.waitreason: why it is about to wait (only read on the way to waiting).
    int reason = -1;
    uint8_t wr = 0;
    uint64_t caller = 0;
    if (uint32_t(r.rcx) == kGWaiting && plan_.offsets.g_waitreason &&
        proc_->mem().read(r.rax + plan_.offsets.g_waitreason, &wr, 1)) {
      reason = wr;
      proc_->mem().read(r.rsp + plan_.goroutines.status_sp_delta, &caller, 8);
    }
    // Where it came from, the first time it shows up (it was created before the trace).
    std::optional<GoroutineOrigin> origin;
    if (!goroutines_->known(goid)) {
      const OriginSpan span = origin_span(plan_.offsets);
      uint8_t buf[64];
      if (span.size && span.size <= sizeof buf &&
          proc_->mem().read(r.rax + span.offset, buf, span.size))
        origin = parse_origin(plan_.offsets, buf, span.size);
    }
    std::optional<StatusStacks> stacks;
    if (plan_.goroutines.walk) stacks = status_stacks(r, uint32_t(r.rbx), uint32_t(r.rcx));
    goroutines_->on_status(ts, tid, goid, uint32_t(r.rbx), uint32_t(r.rcx), reason,
                           origin ? &*origin : nullptr, caller, stacks ? &*stacks : nullptr);
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

bool Tracer::arm_net(pid_t tid) {
  auto r = net_.arm(*proc_, tid, syscall_at_, bps_.scratch());
  if (!r) {
    fmt::print(stderr,
               "gotap: warning: no safety net in pid {} ({}): if gotap is killed, the "
               "program may die of SIGTRAP\n",
               proc_->pid(), r.error().what());
    net_wanted_ = false;
    return true;
  }
  if (*r) net_wanted_ = false;
  return *r;
}

void Tracer::keep_net(pid_t tid) {
  uint64_t mask = 0;
  if (::ptrace(PTRACE_GETSIGMASK, tid, sizeof mask, &mask) != 0 || mask == 0) return;
  auto r = net_.rearm(*proc_, tid, syscall_at_);
  if (r && *r) ++net_rearms_;
}

bool Tracer::handle_trap(pid_t tid) {
  if (net_wanted_ && TrapNet::catches_sigtrap(proc_->pid())) arm_net(tid);
  const user_regs_struct& r = trap_regs_;
  const Site* s = trap_site_;
  if (!s) {  // a dead gotap's int3, rewound (loop's to_copy)
    Process::cont(tid, proc_->take_held_signal(tid));
    return true;
  }
  ++hits_;
  if (floor_) {  // GOTAP_PTRACE_FLOOR=1: the stop alone, nothing read or written
    const uint64_t t = now_ns();
    held_total_ns_ += t - std::min(t, stop_taken_ns_);
    Process::cont(tid, proc_->take_held_signal(tid));
    return true;
  }
  if (net_.armed()) {
    const int f = s->roles.empty() ? -1 : s->roles[0].func;
    if (f < 0 || fstate_[f].signals_blocked) keep_net(tid);
  }
  const StopClock::Stop stop = take_stop(tid, std::min(stop_taken_ns_, now_ns()));
  trap_at_ns_ = stop.at;
  uint64_t ts = now_ns();
  trap_goid_.reset();
  if (batch_) hit_->gather(*s, r);
  try {
    handle_roles(*s, r, tid, ts);
  } catch (const std::exception& e) {
    failed_ = e.what();
  } catch (...) {
    failed_ = "unknown exception";
  }
  if (test_hold_ns_) std::this_thread::sleep_for(std::chrono::nanoseconds(test_hold_ns_));
  // A hit that read no goroutine (--goroutines' probes, nested in a traced call) holds the
  // thread's current one all the same.
  if (!trap_goid_ && !held_.empty())
    if (auto gi = gr_->current(r, true)) trap_goid_ = gi->goid;
  // The goroutine was held from its trap until now: its open calls leave that out.
  const uint64_t resumed = now_ns();
  if (trap_goid_)
    if (auto h = held_.find(*trap_goid_); h != held_.end())
      h->second.ns += resumed - std::min(resumed, stop.at);
  const uint64_t held = resumed - std::min(ts, stop_taken_ns_);
  held_total_ns_ += held;
  if (budget_.enabled()) charge_hit(*s, held);
  if (stop_clock_) stop_clock_->on_resume(tid, resumed, trap_goid_);
  // The registers already point at the site's copy (next_event).
  Process::cont(tid, proc_->take_held_signal(tid));
  if (queue_)
    hand_over();
  else
    run_deferred();
  hit_->mem().clear();
  return true;
}

StopClock::Stop Tracer::take_stop(pid_t tid, uint64_t taken) {
  // The resume before this stop let a goroutine run late: held, if it has calls open that
  // all began before that resume (the goroutine may have moved to another thread since).
  if (!stop_clock_) {
    StopClock::Stop s;
    s.at = taken;
    return s;
  }
  const StopClock::Stop stop = stop_clock_->on_stop(tid, taken);
  if (stop.resumed_late && stop.resumed_goid)
    if (auto h = held_.find(*stop.resumed_goid);
        h != held_.end() && stop.resumed_at >= h->second.opened_at)
      h->second.ns += stop.resumed_late;
  return stop;
}

void Tracer::hold_signal_stop(pid_t tid) {
  const StopClock::Stop stop = take_stop(tid, now_ns());
  std::optional<int64_t> goid;
  user_regs_struct r{};
  if (!held_.empty() && ::ptrace(PTRACE_GETREGS, tid, nullptr, &r) == 0)
    if (auto gi = gr_->current(r, true)) goid = gi->goid;
  const uint64_t resumed = now_ns();
  if (goid)
    if (auto h = held_.find(*goid); h != held_.end())
      h->second.ns += resumed - std::min(resumed, stop.at);
  if (stop_clock_) stop_clock_->on_resume(tid, resumed, goid);
}

bool Tracer::may_defer(int func, bool results) const {
  // Stack walks and conditions read live memory; so do values the copy does not cover.
  return defer_ && batch_ && opts_.stack_depth <= 0 && !opts_.condition && hit_->mem().complete() &&
         hit_->copyable(func, results);
}

void Tracer::run_deferred() {
  if (deferred_.empty()) return;
  // From the copy alone: the thread runs again, a live read could see a value half-changed.
  hit_->mem().set_live(false);
  in_deferred_ = true;
  try {
    for (auto& d : deferred_) d();
  } catch (const std::exception& e) {
    failed_ = e.what();
  } catch (...) {
    failed_ = "unknown exception";
  }
  in_deferred_ = false;
  deferred_.clear();
  hit_->mem().set_live(true);
}

void Tracer::handle_roles(const Site& site, const user_regs_struct& r, pid_t tid, uint64_t ts) {
  const Site* s = &site;
  for (const auto& role : s->roles) {
    switch (role.kind) {
      case SiteRole::Entry:
        on_entry(*s, role, r, tid, ts);
        break;
      case SiteRole::Return:
      case SiteRole::TailJump:
        on_return(*s, role, r, tid, ts);
        break;
      case SiteRole::Inline:
        on_inline(*s, role, r, tid, ts);
        break;
      case SiteRole::GStatus:
      case SiteRole::GCreate:
      case SiteRole::GCreated:
      case SiteRole::GSysEnter:
      case SiteRole::GSysExit:
        on_goroutine(role, r, tid, ts);
        break;
      case SiteRole::Uncount: {
        // The entry fires again once morestack has grown the stack: the same call.
        std::lock_guard<std::mutex> lock(fstate_mu_);
        FuncState& fs = fstate_[role.func];
        if (fs.count) --fs.count;  // 0: its entry came before the attach
        break;
      }
    }
  }
}

void Tracer::close_pending(PendingMap::iterator it) {
  auto h = held_.find(it->first.goid);
  if (h != held_.end() && --h->second.open == 0) held_.erase(h);
  pending_.erase(it);
}

void Tracer::flush_output(bool idle) {
  if (queue_) return;  // its thread flushes, on its timer
  // Batches: a flush when the tracer is about to wait (no hit queued), or every 50 ms while
  // hits keep coming, so that each event reaches the reader within 100 ms at any rate.
  constexpr uint64_t kFlushNs = 50'000'000;
  const uint64_t emitted = events_ + (goroutines_ ? goroutines_->events() : 0);
  if (emitted == flushed_events_) return;
  const uint64_t now = now_ns();
  if (!idle && now - last_flush_ns_ < kFlushNs) return;
  sink_.flush();
  flushed_events_ = emitted;
  last_flush_ns_ = now;
}

void Tracer::loop() {
  // A hit is sent to its site's copy before its stop is consumed (Process::next_event); the
  // registers it had at the int3 are kept for decoding.
  const TrapFix to_copy = [this](pid_t, user_regs_struct& r) {
    // --max-overhead and GOTAP_TIMING: the hit's stop begins (the tracer has just taken it).
    stop_taken_ns_ = now_ns();
    const Site* s = bps_.find(r.rip - 1);
    if (!s || !bps_.step_over(*s, r)) {
      trap_site_ = nullptr;  // not a hit: handle_trap only resumes the thread
      return rewind_leftover(leftover_sites_, proc_->mem(), r);
    }
    trap_site_ = s;
    trap_regs_ = r;
    trap_regs_.rip = s->addr + 1;
    return true;
  };
  for (;;) {
    // An exec that an injection (TrapNet::rearm) took: the trace ends as at the loop's own.
    if (proc_->exec_seen()) {
      exec_ended_ = true;
      return;
    }
    if (queue_) {
      queue_->push(staged_);  // events of no hit: --max-overhead's
      if (auto f = queue_->failure()) failed_ = std::move(f);
    }
    if (stop_due() || failed_) return;
    if (budget_.enabled()) check_overhead();
    flush_output(false);
    bool fixed = false;
    WaitStatus ws{};
    // Polling briefly before blocking keeps the tracer on its CPU between hits that come in
    // quick succession, saving a wake-up of the tracer per hit.
    if (spin_ns_) {
      uint64_t until = now_ns() + spin_ns_;
      do {
        ws = proc_->next_event(-1, false, to_copy, &fixed);
      } while (ws.tid == 0 && now_ns() < until);
    }
    if (ws.tid == 0) {
      flush_output(true);
      ws = proc_->next_event(-1, true, to_copy, &fixed);
    }
    if (ws.tid == 0) {  // an exit that cannot be taken yet (Process::next_event)
      usleep(100);
      continue;
    }
    if (ws.tid < 0) {
      if (errno == EINTR) continue;
      return;  // ECHILD: nothing left to trace
    }
    pid_t tid = ws.tid;
    if (ws.exited()) {
      cpu_follow_.forget(tid);
      if (stop_clock_) stop_clock_->forget(tid);
      proc_->note_exit(ws);
      if (proc_->gone()) return;
      continue;
    }
    if (!ws.stopped()) continue;
    if (fixed) cpu_follow_.follow(proc_->pid(), tid);
    if (fixed && handle_trap(tid)) continue;
    if (ws.event() == PTRACE_EVENT_EXEC) {
      // The program replaced itself: our breakpoints went with the old image, and so did
      // every other thread. Let the new program run untraced.
      exec_ended_ = true;
      ::ptrace(PTRACE_DETACH, tid, nullptr, nullptr);
      proc_->threads().clear();
      return;
    }
    // A signal on its way to the thread (Go's preemption's SIGURG, say) stops it as a hit
    // does: held the same way, so that the call it falls in leaves it out and the thread's
    // next hit is still dated from its account.
    if (ws.event() == 0 && !ws.group_stop()) hold_signal_stop(tid);
    proc_->handle_other_stop(ws);
  }
}

void Tracer::finish_pending() {
  if (opts_.mode != Mode::Trace) return;
  uint64_t ts = now_ns();
  std::vector<CallUnfinished> open;
  for (const auto& [k, p] : pending_)
    // Calls --rate left out, that a condition rejected, or whose condition waits for the
    // return, are not shown.
    if (!p.dropped && !p.rejected && !(opts_.condition && opts_.condition->at_ret(p.func)))
      open.emplace_back(CallSite{ts, proc_->pid(), p.tid, k.goid, plan_.funcs[p.func].name}, p.ts);
  for (auto& ev : unfinished_events(std::move(open))) emit(std::move(ev));
  pending_.clear();
  held_.clear();
}

FileText Tracer::file_text() const {
  // The writes go in address order: what they passed is given back a MiB at a time, so that
  // a whole binary's text (17 MB) is never resident at once.
  auto from = std::make_shared<uint64_t>(UINT64_MAX);
  return [this, from](uint64_t addr, size_t n) -> std::span<const uint8_t> {
    if (addr < bias_) return {};
    const uint64_t v = addr - bias_;
    constexpr uint64_t kStep = 1 << 20;
    if (*from == UINT64_MAX || v < *from) *from = v & ~(kStep - 1);
    if (v - *from >= 2 * kStep) {
      const uint64_t to = (v & ~(kStep - 1)) - kStep;
      bin_.elf->release(*from, to - *from);
      *from = to;
    }
    return bin_.elf->read(v, n);
  };
}

void Tracer::release_file_text() const {
  for (const auto& seg : bin_.elf->segments())
    if (seg.type == 1 /* PT_LOAD */ && (seg.flags & 1 /* PF_X */))
      bin_.elf->release(seg.vaddr, seg.filesz);
}

void Tracer::detach() {
  if (proc_->gone()) return;
  if (exec_ended_) {
    proc_->detach_all([](pid_t, user_regs_struct&) { return false; });
    return;
  }
  {
    // No other gotap looks at a site while the bytes go back; one that waited longer than this
    // is stuck, and the int3s go all the same.
    auto lock = lock_image(proc_->pid(), sys::ImageLock::kRemoveWaitMs, false);
    if (!lock)
      fmt::print(stderr, "gotap: warning: removing the probes unlocked: {}\n", lock.error().what());
    // A uprobe placed on a site since gotap's int3 took that site's hits; its int3 stays.
    if (auto [n, who] = share_uprobe_sites(); n)
      fmt::print(stderr,
                 "gotap: warning: another tracer put a uprobe on {} of the probe sites during the "
                 "trace ({}): it took their hits from then on; its int3s are left to it\n",
                 n, who);
    bps_.restore_all(proc_->mem(), file_text());
  }
  release_file_text();
  // A hit taken before the restore: run the original instruction, now back in place.
  auto rewind = [this](pid_t, user_regs_struct& r) {
    if (!bps_.find(r.rip - 1)) return rewind_leftover(leftover_sites_, proc_->mem(), r);
    r.rip -= 1;
    return true;
  };
  // The program's own SIGTRAP handler goes back, through one stopped thread that the detach
  // then releases with the rest.
  pid_t held = 0;
  // A process stopped by job control (SIGSTOP, Ctrl-Z) cannot run the injected syscall: it
  // keeps the net, which chains to Go's handler and changes nothing else.
  if (net_.armed() && !proc_->threads().empty()) {
    pid_t t = proc_->threads().count(proc_->pid()) ? proc_->pid() : *proc_->threads().begin();
    if (proc_->interrupt_and_wait(t, rewind)) {
      held = t;
      proc_->set_inject_phase("detach", rewind);
      if (auto r = net_.disarm(*proc_, t, syscall_at_); !r)
        fmt::print(stderr, "gotap: warning: the program's SIGTRAP handler was not restored: {}\n",
                   r.error().what());
    }
  }
  // A normal end leaves nothing a later gotap could take for a dead one's probes. While the
  // net is still the handler (a job-control stop), its table must stay.
  if (!net_.armed()) retire_table(proc_->mem(), bps_.scratch());
  // Without a held thread nothing can be injected: detach_all then holds no thread.
  proc_->detach_all(rewind, held,
                    [&](const std::vector<pid_t>& stopped) { release_pages(stopped, held); });
}

void Tracer::end_launched(bool gone) {
  if (!proc_->launched() || gone) return;
  // A program that replaced itself runs untraced, but it is still the trace's: as the eBPF
  // backend does, gotap waits for it until the trace ends.
  if (exec_ended_) {
    for (;;) {
      siginfo_t si{};
      if (stop_due() || waitid(P_PID, id_t(proc_->pid()), &si, WEXITED | WNOHANG | WNOWAIT) != 0 ||
          si.si_pid != 0)
        break;
      usleep(20'000);
    }
  }
  (void)sys::end_child(proc_->pid());
}

void Tracer::release_pages(const std::vector<pid_t>& stopped, pid_t via) {
  net_.release_data(*proc_, via, syscall_at_);
  const uint64_t lo = bps_.scratch(), hi = lo + bps_.scratch_size();
  if (!lo || net_.handler_out()) return;
  // The Go stack each thread is on bounds the search for a signal frame (page_release.h).
  GoroutineReader g(proc_->mem(), plan_);
  for (pid_t t : stopped) {
    user_regs_struct r{};
    std::optional<GInfo> gi;
    if (::ptrace(PTRACE_GETREGS, t, nullptr, &r) == 0) gi = g.current(r, true);
    if (may_return_into(t, proc_->mem(), lo, hi, gi ? gi->stack_hi : 0)) return;
  }
  auto r = proc_->inject_syscall(via, syscall_at_, SYS_munmap, {lo, hi - lo});
  if (r && *r == 0) bps_.forget_scratch();
}

void Tracer::emit_aggregates() {
  std::vector<FuncCount> counts;
  std::vector<FuncLatency> latencies;
  // Only functions that were called have a line: the others' names are not copied (a whole
  // binary has 10,000s of them).
  for (size_t i = 0; i < plan_.funcs.size(); ++i) {
    std::optional<uint64_t> failed;
    if (fstate_[i].err) failed = fstate_[i].failed;
    if (opts_.mode == Mode::Count && fstate_[i].count)
      counts.push_back({plan_.funcs[i].name, fstate_[i].count, failed});
    if (opts_.mode == Mode::Latency && fstate_[i].latency.count)
      latencies.push_back({plan_.funcs[i].name, fstate_[i].latency, failed});
  }
  for (auto& ev : count_events(std::move(counts))) emit(std::move(ev));
  for (auto& ev : latency_events(std::move(latencies))) emit(std::move(ev));
}

Result<void> Tracer::run() {
  if (!bin_.elf || !bin_.pclntab) return make_error("the plan names no binary (GoBinary::plan)");
  // Polling for 20 us after each stop before sleeping in waitpid saves the tracer's wake-up
  // when hits come in bursts: about a quarter of the per-call cost here (docs/benchmarks.md),
  // for at most 20 us of tracer CPU per hit. GOTAP_PTRACE_SPIN_US tunes it (0: off).
  spin_ns_ = 20'000;
  // A/B switches for the levers of issue 22 (docs/benchmarks.md).
  if (const char* e = getenv("GOTAP_PTRACE_BATCH")) batch_ = strcmp(e, "0") != 0;
  if (const char* e = getenv("GOTAP_PTRACE_DEFER")) defer_ = strcmp(e, "0") != 0;
  // The floor of a hit: int3, wait, registers to the copy, resume; no event (benchmarks).
  if (const char* e = getenv("GOTAP_PTRACE_FLOOR")) floor_ = strcmp(e, "1") == 0;
  // The second thread that decodes and writes (0: on the tracer thread), and its flush timer.
  if (const char* e = getenv("GOTAP_PTRACE_QUEUE")) use_queue_ = strcmp(e, "0") != 0;
  if (const char* e = getenv("GOTAP_PTRACE_FLUSH_MS"))
    flush_ns_ = strtoull(e, nullptr, 10) * 1000000;
  if (const char* e = getenv("GOTAP_PTRACE_SPIN_US")) spin_ns_ = strtoull(e, nullptr, 10) * 1000;
  // Tests: each hit holds its thread this much longer, as a slow decode would.
  if (const char* e = getenv("GOTAP_TEST_HOLD_US")) test_hold_ns_ = strtoull(e, nullptr, 10) * 1000;
  if (opts_.duration_s > 0) deadline_ns_ = now_ns() + uint64_t(opts_.duration_s * 1e9);
  budget_ = OverheadBudget(opts_.max_overhead_pct, plan_.funcs.size());
  if (budget_.enabled()) {
    cost_ns_.assign(plan_.funcs.size(), 0);
    cost_hits_.assign(plan_.funcs.size(), 0);
  }
  GOTAP_TRY(start());
  {
    Waker waker(deadline_ns_, queue_ ? &queue_->failed() : nullptr);
    loop();
  }
  end_metrics();
  bool gone = proc_->gone();
  sys::timing_mark(fmt::format(
      "ptrace: traced ({} hits, {} copies and reads of memory, {} misses after resuming, {} "
      "CPU moves, {} ns held per hit from the stop's wait to its resume, {} of {} stops dated "
      "from the scheduler's account, {} ns of CPU a trap)",
      hits_, hit_ ? hit_->mem().syscalls() : 0, hit_ ? hit_->mem().misses() : 0,
      cpu_follow_.moves(), hits_ ? held_total_ns_ / hits_ : 0,
      stop_clock_ ? stop_clock_->exact_stops() : 0, stop_clock_ ? stop_clock_->stops() : 0,
      stop_clock_ ? stop_clock_->trap_cost() : 0));
  detach();
  proc_->release_children();
  sys::timing_mark("ptrace: detached");
  end_launched(gone);
  // The program is released: what is queued is written now, then the sink is this thread's.
  uint64_t queue_misses = 0;
  if (queue_) {
    queue_->push(staged_);
    queue_->stop();
    if (auto f = queue_->failure(); f && !failed_) failed_ = std::move(f);
    queue_misses = queue_->misses();
    queue_.reset();
    sys::timing_mark(fmt::format("ptrace: queue drained ({} misses in its copies)", queue_misses));
  }
  if (failed_)
    return runtime_error("the trace failed after the probes were placed (they are removed): {}",
                         *failed_);
  finish_pending();
  emit_aggregates();
  if (goroutines_) events_ += goroutines_->events();
  RunSummary sum;
  sum.backend = "ptrace";
  sum.functions = plan_.funcs.size();
  sum.probes = bps_.size();
  sum.pid = proc_->pid();
  // Every hit is handled while its thread waits: nothing is ever dropped.
  sum.lost = 0;
  if (gone) {
    sum.exit_code = proc_->exit_code();
    if (proc_->exit_signal()) sum.exit_signal = proc_->exit_signal();
  }
  sum.ended_by = exec_ended_ ? "exec" : gone ? "exit" : "stop";
  sum.extra = {{"hits", hits_}, {"goid_read_errors", goid_read_errors_}};
  if (rate_.enabled()) sum.extra["rate_limited"] = rate_.dropped_total();
  if (net_rearms_) sum.extra["net_rearmed"] = net_rearms_;
  if (proc_->children_cleaned()) sum.extra["children_cleaned"] = proc_->children_cleaned();
  if (budget_.enabled()) {
    json names = json::array();
    for (size_t f = 0; f < plan_.funcs.size(); ++f)
      if (budget_.detached(f)) names.push_back(plan_.funcs[f].name);
    sum.extra["detached"] = std::move(names);
  }
  sum.ts_ns = now_ns();
  sum.events = events_;
  emit(to_event(sum));
  sink_.flush();
  return {};
}

}  // namespace gotap::ptrace
