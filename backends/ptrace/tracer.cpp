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
#include "core/why/syscall_names.h"
#include "core/why/why_sink.h"

namespace gotap::ptrace {

using nlohmann::json;

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

}  // namespace

Param param(ValueDecoder& dec, const ParamLoc& p, const RegState& rs) {
  json j = dec.decode_param(p, rs);
  return {p.name, p.type_name, std::move(j["value"])};
}

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
// The hits (tracer_hits.cpp) emit all three kinds.
template void Tracer::emit_call<CallEntry>(CallEntry);
template void Tracer::emit_call<CallReturn>(CallReturn);
template void Tracer::emit_call<CallUnfinished>(CallUnfinished);

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
  if (why_kernel_) credit_kernel(tid, stop);
  if (stop.resumed_late && stop.resumed_goid)
    if (auto h = held_.find(*stop.resumed_goid);
        h != held_.end() && stop.resumed_at >= h->second.opened_at)
      h->second.ns += stop.resumed_late;
  return stop;
}

void Tracer::credit_kernel(pid_t tid, const StopClock::Stop& stop) {
  const std::optional<uint64_t>& total = stop.preempted_total;
  uint64_t delta = 0;
  if (total) {
    uint64_t& seen = preempted_seen_[tid];
    delta = *total > seen ? *total - seen : 0;
    seen = *total;
  }
  auto g = runs_on_.find(tid);
  // Between two stops of a thread under --why it runs one goroutine: every change of which
  // one is a stop (casgstatus). The interval ends at this stop, before its own events.
  if (delta != 0 && g != runs_on_.end()) {
    const uint64_t to = stop.at, from = to - std::min(to, delta);
    emit(why::kernel_event(false, from, to, int(tid), g->second, 0));
  }
  if (!why_syscalls_) return;
  // Taken whether or not it is known which goroutine ran: they are that stretch's alone.
  const auto calls = stop_clock_->take_syscalls(tid);
  if (g == runs_on_.end()) return;
  for (const StopTimes::Syscall& c : calls)
    emit(why::kernel_event(true, c.from, c.to, int(tid), g->second,
                           c.other ? why::kOtherSyscalls : c.nr, c.count, c.ns));
}

void Tracer::note_runs(pid_t tid, int64_t goid, uint32_t from, uint32_t to) {
  if (!why_kernel_) return;
  if (to == kGRunning) {
    runs_on_[tid] = goid;
  } else if ((from == kGRunning || from == kGSyscall) && to != kGSyscall) {
    if (auto g = runs_on_.find(tid); g != runs_on_.end() && g->second == goid) runs_on_.erase(g);
  }
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
  auto h = held_.find(held_key(it->first.goid, it->second.tid));
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
      preempted_seen_.erase(tid);
      runs_on_.erase(tid);
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
  // A gccgo plan (reads_g false) has no pclntab.
  if (!bin_.elf || (!bin_.pclntab && plan_.reads_g))
    return make_error("the plan names no binary (GoBinary::plan)");
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
  // One more slot, after the functions': the goroutine probes' (kGoroutineProbes).
  budget_ = OverheadBudget(opts_.max_overhead_pct, plan_.funcs.size() + 1);
  if (budget_.enabled()) {
    cost_ns_.assign(plan_.funcs.size() + 1, 0);
    cost_hits_.assign(plan_.funcs.size() + 1, 0);
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
      "from the scheduler's account{}, {} ns of CPU a trap, {} ns back to the program)",
      hits_, hit_ ? hit_->mem().syscalls() : 0, hit_ ? hit_->mem().misses() : 0,
      cpu_follow_.moves(), hits_ ? held_total_ns_ / hits_ : 0,
      stop_clock_ ? stop_clock_->exact_stops() : 0, stop_clock_ ? stop_clock_->stops() : 0,
      stop_clock_ && stop_clock_->switch_dated() ? " (its switches)" : " (schedstat)",
      stop_clock_ ? stop_clock_->trap_cost() : 0, stop_clock_ ? stop_clock_->ret_cost() : 0));
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
  if (why_syscalls_) sum.extra["why_syscalls_lost"] = stop_clock_->syscalls_lost();
  if (budget_.enabled()) {
    json names = json::array();
    for (size_t f = 0; f < plan_.funcs.size(); ++f)
      if (budget_.detached(f)) names.push_back(plan_.funcs[f].name);
    if (budget_.detached(plan_.funcs.size())) names.push_back(kGoroutineProbes);
    sum.extra["detached"] = std::move(names);
  }
  sum.ts_ns = now_ns();
  sum.events = events_;
  emit(to_event(sum));
  sink_.flush();
  return {};
}

}  // namespace gotap::ptrace
