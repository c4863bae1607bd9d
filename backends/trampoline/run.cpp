// Run's request check, wait and report (run.h).
#include "backends/trampoline/run.h"

#include <poll.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <fmt/format.h>
#include <csignal>

#include "core/events/typed_events.h"
#include "core/plan/error_result.h"
#include "core/sys/proc_status.h"
#include "core/sys/spawn.h"
#include "core/sys/timing.h"
#include "core/sys/urgent_thread.h"

namespace gotap::trampoline {

using ptrace::Process;

// How late a record may be read after its time: one whose writer was preempted mid-record.
constexpr uint64_t kMergeSlackNs = 1'000'000;

uint64_t now_ns() {
  return sys::monotonic_ns();
}

Result<void> Run::run() {
  GOTAP_TRY(check_request());
  // --jumps-only; the variable is its older spelling, kept for scripts that use it.
  const char* no_fallback = getenv("GOTAP_TRAMPOLINE_NO_FALLBACK");
  falls_back_ = !opts_.jumps_only && !(no_fallback && std::string(no_fallback) == "1");
  // What the jumps do not do yet, the request takes whole on uprobes: the same events as
  // --backend=ebpf's, at its cost, said on stderr and in the summary.
  if (const char* no = jumpless_request()) {
    if (!falls_back_) return make_error("--backend=trampoline {}", no);
    fmt::print(stderr,
               "gotap: the trampoline backend {}: every probe goes on kernel uprobes "
               "(eBPF) instead\n",
               no);
    return run_all_on_uprobes(plan_, opts_, sink_, no);
  }
  goroutine_probes_ = plan_.goroutines.status || plan_.goroutines.walk;
  if (goroutine_probes_ && !falls_back_)
    return make_error(
        "--backend=trampoline takes the goroutine probes of --why and --goroutines on kernel "
        "uprobes, which --jumps-only leaves out");
  traced_ = opts_.mode == Mode::Trace;
  tallied_ = tallied();
  // A plain count of functions with an `error` result: their RETs count the failures (on
  // the register ABI's Go only, as every RET jump; before it the count has no FAILED).
  has_error_.assign(plan_.funcs.size(), false);
  if (opts_.mode == Mode::Count && !tallied_ && opts_.count_failed && plan_.regabi)
    for (size_t f = 0; f < plan_.funcs.size(); ++f) {
      // The register ABI's error words are in a register or a stack slot (ret_fail_body).
      has_error_[f] = failures_countable(plan_.funcs[f]);
      fails_counted_ = fails_counted_ || has_error_[f];
    }
  timed_ = opts_.mode == Mode::Latency || traced_ || tallied_ || fails_counted_;
  // A count decided at the entry, with no failure to see, needs no RET.
  std::vector<bool> entry_only;
  if (fails_counted_) {
    entry_only.resize(plan_.funcs.size());
    for (size_t f = 0; f < plan_.funcs.size(); ++f) entry_only[f] = !has_error_[f];
  }
  if (tallied_ && opts_.mode == Mode::Count) {
    entry_only.resize(plan_.funcs.size());
    for (size_t f = 0; f < plan_.funcs.size(); ++f)
      entry_only[f] = !opts_.condition->at_ret(f) &&
                      !(opts_.count_failed && error_word(plan_.funcs[f]).has_value());
  }
  set_ = plan_patches(plan_, timed_, &entry_only);
  // Count and trace take the inlined copies on uprobes, which must not land on a jump.
  if (falls_back_ && (opts_.mode == Mode::Count || traced_)) drop_inline_collisions(set_, plan_);
  if (fails_counted_)
    for (const Patch& p : set_.patches) {
      CaptureWord w;
      if (p.ret) {
        const LocPiece e = *error_word(plan_.funcs[p.func]);
        if (e.kind == LocPiece::Stack) {
          w.src = CaptureWord::Stack;
          w.off = static_cast<int32_t>(e.stack_offset);
        } else {
          w.reg = e.reg;
        }
      }
      fail_words_.push_back(w);
    }
  // First: a function whose condition reads what a record cannot hold leaves set_ here.
  if (traced_ || tallied_) {
    auto t = tallied_ ? trace_sites(plan_, set_, 0, opts_.condition, true, opts_.count_failed)
                      : trace_sites(plan_, set_, opts_.max_str, if_condition(), false, false,
                                    opts_.stack_depth);
    if (!t) return t.error();
    trace_sites_ = std::make_unique<TraceSites>(std::move(*t));
  }
  const char* verb = this->verb();
  const std::string refused = refused_summary(set_, plan_, done());
  if (set_.patches.empty()) {
    if (!falls_back_)
      return make_error("--backend=trampoline: nothing to {}: {}; --backend=ebpf {}s them", verb,
                        refused, verb);
    // No jump at all: the whole run is on uprobes (fallback.h).
    fmt::print(stderr, "gotap: {}\n",
               refused_summary(set_, plan_, done(), "kernel uprobes (eBPF) instead"));
    return run_all_on_uprobes(plan_, uprobe_options(), sink_);
  }
  // What no jump takes goes on kernel uprobes in the same run (fallback.h), a trace's events
  // merged with the ring's in time order. --jumps-only (read above) leaves
  // them out (tests, bench/trampoline.sh's rows of jumps alone).
  // With a condition, held entries go out at their return, behind later events (as on
  // eBPF), which the merge lets pass at once; everything else stays in time order, so that
  // the goroutine probes' changes and the kernel's intervals inside a call reach --why
  // before the call's return does.
  if (traced_ && falls_back_) merge_ = std::make_unique<TimeMerge>(sink_, 2);
  if (!refused.empty() && !falls_back_)
    fmt::print(stderr, "gotap: warning: {}; --backend=ebpf {}s them\n", refused, verb);
  if (timed_ && !traced_ && !tallied_ && !fails_counted_) {
    std::vector<int> funcs;
    for (const Patch& p : set_.patches) funcs.push_back(p.func);
    timer_ = std::make_unique<CallTimer>(std::move(funcs), plan_.funcs.size(), filter().slower_ns);
  }
  // Inlined copies have no return: `latency` times none on any backend. With the fallback,
  // count and trace take them on uprobes (start_fallback says so).
  size_t inlined = 0;
  for (const Patch& p : set_.patches)
    if (!p.ret && plan_.funcs[p.func].inline_probed)
      inlined += plan_.funcs[p.func].inline_sites.size();
  if (inlined && !falls_back_ && (opts_.mode == Mode::Count || traced_))
    fmt::print(stderr,
               "gotap: warning: the trampoline backend {}s calls of the functions' own "
               "code, not their {} inlined cop{} (--backend=ebpf {}s those too)\n",
               verb, inlined, inlined == 1 ? "y" : "ies", verb);
  GOTAP_TRY(place());
  if (all_on_uprobes_) {
    merge_.reset();
    return run_all_on_uprobes(plan_, uprobe_options(), sink_);
  }
  if (goroutine_probes_ && !fallback_) {
    // Without them --why's splits and the goroutine events would be wrong, not just absent.
    remove();
    return end_unpatched(
        runtime_error("the goroutine probes could not be placed (the trampolines are removed): {}",
                      fallback_error_.empty() ? "the trace ended first" : fallback_error_));
  }
  if (merge_ && !fallback_) merge_.reset();
  if (traced_)
    reader_ = std::make_unique<TraceReader>(plan_, *trace_sites_, bias_, pid_, opts_.max_str,
                                            merge_ ? merge_->source(0) : sink_, opts_.rate_per_s,
                                            filter(), if_condition());
  if (tallied_)
    tally_ = std::make_unique<CallTally>(*trace_sites_, plan_.funcs.size(), compiled_condition(),
                                         bias_, opts_.mode == Mode::Latency);
  const uint64_t t0 = now_ns();
  const size_t fell_back = fallback_ ? fallback_->functions() : 0;
  fmt::print(
      stderr, "{}\n",
      tracing_banner(funcs_placed_ + fell_back, placed_ + (fallback_ ? fallback_->probes() : 0),
                     "trampoline", fmt::format("pid {}", pid_), plan_.goroutines.status != 0));
  std::fflush(stderr);
  if (opts_.metrics) opts_.metrics->begin(pid_, [this](MetricsSnapshot& s) { read_metrics(s); });
  wait(t0);
  const uint64_t ended = now_ns();
  sys::timing_mark("trampoline: traced");
  // Its uprobes go first; its rows wait for emit().
  if (fallback_) {
    fallback_->finish();
    if (!fallback_->error().empty())
      fallback_error_ = "the kernel uprobes' part failed: " + fallback_->error();
  }
  if (ended_by_ == "stop") {
    remove();
    sys::timing_mark("trampoline: detached");
  }
  if (opts_.metrics) opts_.metrics->end();
  if (launched_) end_launched();
  // What the program wrote up to its last moment: gotap's view of the ring stays.
  if (ring_) {
    std::lock_guard<std::mutex> lock(timer_mu_);
    if (timer_) timer_->finish(ring_);
    if (reader_) reader_->finish(ring_);
    if (tally_) tally_->finish(ring_);
  }
  // Both sources are done: what the merge holds goes out before the calls left open.
  if (merge_) merge_->close();
  emit(ended);
  if (fallback_ && !fallback_error_.empty())
    return runtime_error("the trace failed after the probes were placed (they are removed): {}",
                         fallback_error_);
  if (!remove_error_.empty())
    return runtime_error("the trampolines stay in pid {}, where they go on counting: {}", pid_,
                         remove_error_);
  return {};
}

Result<void> Run::check_request() const {
  if (opts_.target.pid <= 0 && opts_.target.argv.empty() && !opts_.target.all &&
      !opts_.target.library)
    return make_error("--backend=trampoline needs a target: -p PID or -- CMD ARGS");
  if (!plan_.binary_view.elf) return make_error("the plan names no binary (GoBinary::plan)");
  return {};
}

bool Run::tallied() const {
  const cond::Condition* c = compiled_condition();
  if (opts_.mode == Mode::Count) return c != nullptr;
  if (opts_.mode != Mode::Latency) return false;
  if (c && (c->spec.errors || !c->spec.expr.empty())) return true;
  if (!opts_.count_failed) return false;
  for (const FuncPlan& f : plan_.funcs)
    if (error_word(f)) return true;
  return false;
}

ReturnFilter Run::filter() const {
  // With --if the condition's program decides --slower and --errors too (TraceReader).
  if (!opts_.condition || if_condition()) return {};
  return {opts_.condition->spec.slower_ns, opts_.condition->spec.errors};
}

const char* Run::jumpless_request() const {
  if (opts_.mode == Mode::Goroutines)
    return "has no jumps for goroutine events (the runtime's status changes are in nosplit "
           "functions, which have no stack check to jump from)";
  // gccgo first: its plans have no register ABI either, which is not what keeps them off.
  if (!plan_.reads_g || !plan_.binary_view.pclntab)
    return "has jumps for programs built by gc only (gccgo's functions have no stack check it "
           "can use)";
  // Conditions of trace the reader decides (TraceReader: --if on each record, --slower and
  // --errors at each return), --slower of latency the timer (CallTimer), and those of count
  // and latency's --if and --errors the tally (CallTally): all on records.
  if ((opts_.mode != Mode::Count || opts_.condition) && !plan_.regabi)
    return "times and traces calls of Go 1.17 and later only, and counts under a condition "
           "there only (its records read g from R14, the register ABI's)";
  if (opts_.target.all || opts_.target.library)
    return "jumps in one process only (-p PID or -- CMD)";
  // A trace's records walk the stack; count's and latency's have no event to carry one.
  if (opts_.stack_depth > 0 && opts_.mode != Mode::Trace)
    return "has jumps for --stack in trace and graph only";
  // latency --why reaches a backend other than eBPF as trace (cmd_trace.cpp).
  if ((plan_.goroutines.status || plan_.goroutines.walk) && opts_.mode != Mode::Trace)
    return "has jumps for --why and --goroutines in trace, graph and latency only";
  return nullptr;
}

Result<sys::ImageLock> Run::lock_image(int wait_ms, bool abortable) const {
  return sys::ImageLock::take(fmt::format("/proc/{}/exe", pid_), plan_.binary_view.elf->path(),
                              wait_ms, abortable ? &stop_requested() : nullptr);
}

Error Run::end_unpatched(Error e) {
  if (launched_) (void)sys::end_child(pid_);
  return e;
}

bool Run::stop_due(uint64_t t0) const {
  return stop_requested().load() ||
         (opts_.duration_s > 0 && now_ns() - t0 >= uint64_t(opts_.duration_s * 1e9));
}

bool Run::exiting() const {
  const auto state = sys::status_value(pid_, 0, "State");
  return !state || state->starts_with('Z') || state->starts_with('X');
}

void Run::wait(uint64_t t0) {
  // A timed run's reader competes with the program it reads for a CPU: behind a program
  // that keeps every CPU busy, at the default priority, it ran too late and the ring
  // dropped records (about 1 in 10,000 on the latency fixture's hostile mode).
  std::optional<sys::UrgentThread> urgent;
  if (reads_ring()) urgent.emplace();
  uint64_t looked = 0, every = 100'000'000;
  for (;;) {
    if (stop_due(t0)) return;
    // A fallback that failed (not one that saw the program end) ends the run.
    if (fallback_ && fallback_->ended() && !fallback_->error().empty()) return;
    if (now_ns() - looked >= every) {
      // The look's cost is its CPU time without the drains between its batches: wall time
      // on a busy machine made one look of 4 us seem 3 ms, and the next came 300 ms later,
      // after another tracer's uprobe had come and gone unseen.
      const uint64_t cpu0 = sys::thread_cpu_ns();
      uint64_t draining = 0;
      const auto timed_drain = [this, &draining] {
        const uint64_t d0 = sys::thread_cpu_ns();
        drain();
        draining += sys::thread_cpu_ns() - d0;
      };
      for (auto& m : mapped_) {
        note_uprobes(pid_, m->sites, timed_drain);
        timed_drain();
      }
      const uint64_t spent = sys::thread_cpu_ns() - cpu0;
      const uint64_t cost = spent - std::min(draining, spent);
      looked = now_ns();
      every = std::max<uint64_t>(100'000'000, 100 * cost);
    }
    // A timed run reads its ring every 2 ms at most, sooner as records come faster: at the
    // last read's rate, when the ring would be an eighth full (65,536 records: at 30 M
    // events a second, every 270 us).
    uint64_t wait_ns = reads_ring() ? 2'000'000 : 50'000'000;
    if (reads_ring() && drained_) {
      const uint64_t since = std::max<uint64_t>(now_ns() - drained_at_, 1);
      wait_ns = std::min<uint64_t>(wait_ns, ring_shape().capacity() / 8 * since / drained_);
    }
    const timespec ts{0, static_cast<long>(wait_ns)};
    pollfd p[2] = {{pidfd_.get(), POLLIN, 0}, {exec_.fd(), POLLIN, 0}};
    const int r = pidfd_ ? ::ppoll(p, 2, &ts, nullptr) : (nanosleep(&ts, nullptr), 0);
    drain();
    if (exec_.saw_exec()) {
      ended_by_ = "exec";
      return;
    }
    if ((r > 0 && (p[0].revents & POLLIN)) || (!pidfd_ && ::kill(pid_, 0) != 0 && errno == ESRCH)) {
      ended_by_ = exec_.saw_exec() ? "exec" : "exit";
      return;
    }
    // Without the connector, an exec is seen as the trampolines' pages gone from a process
    // that is not exiting (an exiting one loses its memory before the pidfd says so).
    if (exec_.fd() < 0 && !still_patched() && !exiting()) {
      ended_by_ = "exec";
      return;
    }
  }
}

void Run::end_launched() {
  // A program that replaced itself is still the trace's: waited for until the trace ends.
  if (ended_by_ == "exec")
    while (!stop_requested().load() && ::kill(pid_, 0) == 0) {
      siginfo_t si{};
      if (waitid(P_PID, id_t(pid_), &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid) break;
      usleep(20'000);
    }
  auto e = sys::end_child(pid_);
  if (!e || e->signalled || ended_by_ != "exit") return;
  if (WIFEXITED(e->status)) {
    exit_code_ = WEXITSTATUS(e->status);
  } else if (WIFSIGNALED(e->status)) {
    exit_signal_ = WTERMSIG(e->status);
    exit_code_ = 128 + *exit_signal_;
  }
}

size_t Run::site_count() const {
  size_t n = 0;
  for (const auto& m : mapped_) n += m->sites.size();
  return n;
}

std::vector<std::pair<int, uint64_t>> Run::counts() const {
  std::vector<std::pair<int, uint64_t>> out;
  for (const auto& m : mapped_) {
    // A counting run counts in its first region's counters alone, its RETs the failures.
    if (fails_counted_ && !m->region.ring) continue;
    for (size_t k = 0; k < m->region.patches.size(); ++k) {
      const Patch& p = set_.patches[m->region.patches[k]];
      if (p.ret) continue;
      if (uint64_t n = m->pages.count(k, kCounterStride)) out.emplace_back(p.func, n);
    }
  }
  return out;
}

std::vector<uint64_t> Run::failures() const {
  std::vector<uint64_t> out(plan_.funcs.size());
  for (const auto& m : mapped_) {
    if (!fails_counted_ || !m->region.ring) continue;
    for (size_t k = 0; k < m->region.patches.size(); ++k)
      if (const Patch& p = set_.patches[m->region.patches[k]]; p.ret)
        out[size_t(p.func)] += m->pages.count(k, kCounterStride);
  }
  return out;
}

void Run::drain() {
  if ((!timer_ && !reader_ && !tally_) || !ring_) return;
  std::lock_guard<std::mutex> lock(timer_mu_);
  const uint64_t at = now_ns();
  drained_ = timer_ ? timer_->drain(ring_) : tally_ ? tally_->drain(ring_) : reader_->drain(ring_);
  drained_at_ = at;  // the read took what came in until then
  // A live trace is live: what was read reaches the output now. Merged with the fallback's,
  // a record is read by then unless its body was still writing it: the ring's mark leaves
  // 1 ms for that, and does not move while a record before the head is unread (its writer
  // preempted mid-record holds back those after it).
  if (merge_) {
    if (!reader_->behind(ring_)) merge_->mark(0, at - std::min<uint64_t>(at, kMergeSlackNs));
    merge_->source(0).flush();
  } else if (reader_ && drained_) {
    sink_.flush();
  }
  if (const uint64_t now = now_ns(); now - clock_at_ >= 100'000'000) {
    (timer_ ? timer_->clock() : tally_ ? tally_->clock() : reader_->clock()).update();
    clock_at_ = now;
  }
}

std::optional<uint64_t> Run::failed_of(size_t func, uint64_t failed) const {
  if (fails_counted_)
    return func < has_error_.size() && has_error_[func] ? std::optional(failed) : std::nullopt;
  // A tally's plan (trace_sites) has the error words --no-failed leaves out.
  if (!trace_sites_ || func >= trace_sites_->cfg.funcs.size() ||
      !trace_sites_->cfg.funcs[func].has_error)
    return std::nullopt;
  return failed;
}

void Run::read_metrics(MetricsSnapshot& s) const {
  s.pid = pid_;
  s.funcs.clear();
  s.lost = 0;
  if (timer_) {
    std::lock_guard<std::mutex> lock(timer_mu_);
    const auto& lat = timer_->latencies();
    for (size_t f = 0; f < lat.size(); ++f) {
      if (!lat[f].count) continue;
      FuncMetrics m;
      m.func = plan_.funcs[f].name;
      m.calls = lat[f].count;
      m.timed = true;
      m.latency = lat[f];
      s.funcs.push_back(std::move(m));
    }
    s.lost = ring_ ? timer_->dropped(ring_) : 0;
  } else if (tally_) {
    std::lock_guard<std::mutex> lock(timer_mu_);
    const auto& all = tally_->funcs();
    for (size_t f = 0; f < all.size(); ++f) {
      if (!all[f].calls) continue;
      FuncMetrics m;
      m.func = plan_.funcs[f].name;
      m.calls = all[f].calls;
      m.timed = opts_.mode == Mode::Latency;
      if (m.timed) m.latency = all[f].latency;
      m.failed = failed_of(f, all[f].failed);
      s.funcs.push_back(std::move(m));
    }
    s.lost = ring_ ? tally_->dropped(ring_) : 0;
  } else if (reader_) {
    std::lock_guard<std::mutex> lock(timer_mu_);
    const auto& calls = reader_->calls();
    for (size_t f = 0; f < calls.size(); ++f) {
      if (!calls[f]) continue;
      FuncMetrics m;
      m.func = plan_.funcs[f].name;
      m.calls = calls[f];
      if (opts_.rate_per_s) m.rate_limited = reader_->rate_limited(f);
      s.funcs.push_back(std::move(m));
    }
    s.lost = ring_ ? reader_->dropped(ring_) : 0;
  } else {
    const std::vector<uint64_t> failed = failures();
    for (auto [f, n] : counts()) {
      FuncMetrics m;
      m.func = plan_.funcs[f].name;
      m.calls = n;
      m.failed = failed_of(size_t(f), failed[size_t(f)]);
      s.funcs.push_back(std::move(m));
    }
  }
  // The functions on uprobes, and the inlined copies' calls added to their function's.
  if (fallback_) fallback_->read_metrics(s);
}

void Run::emit(uint64_t ended) {
  // The rows of whichever consumer the run has: the tally's, the timer's, or the counters'.
  std::vector<Event> rows;
  uint64_t dropped = 0;
  if (tally_) {
    std::vector<FuncCount> counted;
    std::vector<FuncLatency> lat;
    const auto& all = tally_->funcs();
    for (size_t f = 0; f < all.size(); ++f) {
      if (!all[f].calls) continue;
      const std::optional<uint64_t> failed = failed_of(f, all[f].failed);
      if (opts_.mode == Mode::Latency)
        lat.push_back({plan_.funcs[f].name, all[f].latency, failed});
      else
        counted.push_back({plan_.funcs[f].name, all[f].calls, failed});
    }
    rows = opts_.mode == Mode::Latency ? latency_events(std::move(lat))
                                       : count_events(std::move(counted));
    dropped = ring_ ? tally_->dropped(ring_) : 0;
  } else if (timer_) {
    std::vector<FuncLatency> lat;
    const auto& all = timer_->latencies();
    for (size_t f = 0; f < all.size(); ++f)
      if (all[f].count) lat.push_back({plan_.funcs[f].name, all[f], std::nullopt});
    rows = latency_events(std::move(lat));
    dropped = ring_ ? timer_->dropped(ring_) : 0;
  } else {
    std::vector<FuncCount> counts;
    const std::vector<uint64_t> failed = failures();
    for (auto [f, n] : this->counts())
      counts.push_back({plan_.funcs[f].name, n, failed_of(size_t(f), failed[size_t(f)])});
    rows = count_events(std::move(counts));
  }
  // The fallback's rows in the same table, in the same order (by name).
  const Event none;
  const Event& fell = fallback_ ? fallback_->summary() : none;
  if (fallback_) {
    rows.insert(rows.end(), fallback_->rows().begin(), fallback_->rows().end());
    std::stable_sort(rows.begin(), rows.end(), [](const Event& a, const Event& b) {
      return a.value("func", "") < b.value("func", "");
    });
    // A function's own calls (a jump's) and its inlined copies' (uprobes'): one row.
    std::vector<Event> merged;
    for (Event& ev : rows)
      if (!merged.empty() && ev.value("event", "") == "count" &&
          merged.back().value("func", "") == ev.value("func", "")) {
        Event& m = merged.back();
        m["count"] = m["count"].get<uint64_t>() + ev["count"].get<uint64_t>();
        // Inlined copies fail nowhere a RET can see: their row's `failed` (if any) is 0.
        if (ev.contains("failed") && !m.contains("failed")) m["failed"] = ev["failed"];
      } else {
        merged.push_back(std::move(ev));
      }
    rows = std::move(merged);
  }
  uint64_t events = 0;
  for (const Event& ev : rows) {
    sink_.emit(ev);
    ++events;
  }
  if (reader_) {
    dropped = ring_ ? reader_->dropped(ring_) : 0;
    // gotap pairs the records: a call whose return record the full ring dropped is open too,
    // and is not known to have never returned.
    std::vector<CallUnfinished> open = reader_->open_calls(ended);
    for (CallUnfinished& c : open) c.reason = TraceReader::lost_return(dropped);
    for (const Event& ev : unfinished_events(std::move(open))) {
      sink_.emit(ev);
      ++events;
    }
    events += reader_->events();
  }
  RunSummary sum;
  sum.backend = "trampoline";
  sum.ts_ns = ended;
  sum.functions = plan_.funcs.size();
  sum.probes = placed_;
  sum.events = events;
  // A count's every pass adds to its counter; a timed run's events find the ring full.
  sum.lost = dropped;
  if (fell.is_object()) {
    sum.probes += fell.value("probes", uint64_t(0));
    sum.lost += fell.value("lost", uint64_t(0));
    // Its rows are counted above already.
    sum.events += fell.value("events", uint64_t(0)) - fallback_->rows().size();
  }
  sum.pid = pid_;
  sum.ended_by = ended_by_;
  sum.exit_code = exit_code_;
  sum.exit_signal = exit_signal_;
  sum.extra = {{"not_patched", plan_.funcs.size() - funcs_placed_}, {"pages_kept", pages_kept_}};
  if (taken_) sum.extra["taken_by_uprobes"] = taken_;
  if (timer_) {
    sum.extra["open_calls"] = timer_->open_calls();
    sum.extra["returns_before_entries"] = timer_->unmatched_returns();
  }
  if (tally_) {
    sum.extra["open_calls"] = tally_->open_calls();
    sum.extra["returns_before_entries"] = tally_->unmatched_returns();
  }
  if (reader_) sum.extra["returns_before_entries"] = reader_->unmatched_returns();
  // The jumps' calls --rate left out, and the uprobes' (each limits its own functions).
  if (reader_ && opts_.rate_per_s)
    sum.extra["rate_limited"] =
        reader_->rate_limited() +
        (fell.is_object() ? fell.value("rate_limited", uint64_t(0)) : uint64_t(0));
  // With a condition, the held entries are late by design: not counted.
  if (merge_ && !opts_.condition) sum.extra["out_of_order"] = merge_->out_of_order();
  // What went on kernel uprobes: how many functions and probes, and how they were attached.
  if (fallback_) {
    Event f = {{"backend", "ebpf"},
               {"functions", fallback_->functions()},
               {"inlined_copies", fallback_->inlined_copies()},
               {"probes", fell.is_object() ? fell.value("probes", uint64_t(0)) : 0}};
    if (goroutine_probes_) f["goroutine_probes"] = true;
    if (fell.is_object()) {
      for (const char* k : {"attach", "skipped_sites", "unmatched_returns"})
        if (fell.contains(k)) f[k] = fell[k];
      // --why's own counts (why_threads_full, why_unmeasured, ...) are the session's.
      for (const auto& [k, v] : fell.items())
        if (k.rfind("why_", 0) == 0) sum.extra[k] = v;
    }
    sum.extra["uprobes"] = std::move(f);
  } else if (!fallback_error_.empty()) {
    sum.extra["uprobes_error"] = fallback_error_;
  }
  sink_.emit(to_event(sum));
  sink_.flush();
}

}  // namespace gotap::trampoline
