// Run's request check, wait and report (run.h).
#include "backends/trampoline/run.h"

#include <poll.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <fmt/format.h>
#include <csignal>

#include "core/events/typed_events.h"
#include "core/sys/proc_status.h"
#include "core/sys/spawn.h"
#include "core/sys/timing.h"
#include "core/sys/urgent_thread.h"

namespace gotap::trampoline {

using ptrace::Process;

uint64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

Result<void> Run::run() {
  GOTAP_TRY(check_request());
  traced_ = opts_.mode == Mode::Trace;
  timed_ = opts_.mode == Mode::Latency || traced_;
  set_ = plan_patches(plan_, timed_);
  const char* verb = this->verb();
  const std::string refused = refused_summary(set_, plan_, done());
  if (set_.patches.empty())
    return make_error("--backend=trampoline: nothing to {}: {}; --backend=ebpf {}s them", verb,
                      refused, verb);
  if (!refused.empty())
    fmt::print(stderr, "gotap: warning: {}; --backend=ebpf {}s them\n", refused, verb);
  if (traced_) {
    auto t = trace_sites(plan_, set_, opts_.max_str);
    if (!t) return t.error();
    trace_sites_ = std::make_unique<TraceSites>(std::move(*t));
  } else if (timed_) {
    std::vector<int> funcs;
    for (const Patch& p : set_.patches) funcs.push_back(p.func);
    timer_ = std::make_unique<CallTimer>(std::move(funcs), plan_.funcs.size());
  }
  size_t inlined = 0;
  for (const Patch& p : set_.patches)
    if (plan_.funcs[p.func].inline_probed) inlined += plan_.funcs[p.func].inline_sites.size();
  if (inlined)
    fmt::print(stderr,
               "gotap: warning: the trampoline backend {}s calls of the functions' own "
               "code, not their {} inlined cop{} (--backend=ebpf {}s those too)\n",
               verb, inlined, inlined == 1 ? "y" : "ies", verb);
  GOTAP_TRY(place());
  if (trace_sites_)
    reader_ =
        std::make_unique<TraceReader>(plan_, *trace_sites_, bias_, pid_, opts_.max_str, sink_);
  const uint64_t t0 = now_ns();
  fmt::print(stderr, "{}\n",
             tracing_banner(timed_ ? funcs_placed_ : set_.patches.size(), placed_, "trampoline",
                            fmt::format("pid {}", pid_)));
  std::fflush(stderr);
  if (opts_.metrics) opts_.metrics->begin(pid_, [this](MetricsSnapshot& s) { read_metrics(s); });
  wait(t0);
  const uint64_t ended = now_ns();
  sys::timing_mark("trampoline: traced");
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
  }
  emit(ended);
  if (!remove_error_.empty())
    return runtime_error("the trampolines stay in pid {}, where they go on counting: {}", pid_,
                         remove_error_);
  return {};
}

Result<void> Run::check_request() const {
  const char* no = nullptr;
  if (opts_.mode == Mode::Goroutines)
    no = "has no goroutine events yet (gotap goroutines needs ptrace or ebpf)";
  else if (opts_.mode != Mode::Count && !plan_.regabi)
    no = "times and traces calls of Go 1.17 and later only (its records read g from R14, "
         "the register ABI's)";
  else if (opts_.mode == Mode::Trace && opts_.rate_per_s)
    no = "takes no --rate yet";
  else if (opts_.condition)
    no = "takes no --if, --slower or --errors yet";
  else if (plan_.goroutines.status || plan_.goroutines.walk)
    no = "has no goroutine events or --why yet";
  else if (!plan_.reads_g || !plan_.binary_view.pclntab)
    no = "needs a program built by gc (gccgo has no stack check it can use)";
  else if (opts_.target.all || opts_.target.library)
    no = "takes one process: -p PID or -- CMD";
  else if (opts_.target.pid <= 0 && opts_.target.argv.empty())
    no = "needs a target: -p PID or -- CMD ARGS";
  else if (opts_.stack_depth > 0)
    no = "has no --stack";
  if (no) return make_error("--backend=trampoline {}", no);
  if (!plan_.binary_view.elf) return make_error("the plan names no binary (GoBinary::plan)");
  return {};
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
  if (timed_) urgent.emplace();
  uint64_t looked = 0, every = 100'000'000;
  for (;;) {
    if (stop_due(t0)) return;
    if (const uint64_t now = now_ns(); now - looked >= every) {
      for (auto& m : mapped_) {
        note_uprobes(pid_, m->sites, [this] { drain(); });
        drain();
      }
      looked = now_ns();
      every = std::max<uint64_t>(100'000'000, 100 * (looked - now));
    }
    // A timed run reads its ring every 2 ms at most, sooner as records come faster: at the
    // last read's rate, when the ring would be an eighth full (65,536 records: at 30 M
    // events a second, every 270 us).
    uint64_t wait_ns = timed_ ? 2'000'000 : 50'000'000;
    if (timed_ && drained_) {
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
  for (const auto& m : mapped_)
    for (size_t k = 0; k < m->region.patches.size(); ++k)
      if (uint64_t n = m->pages.count(k, kCounterStride))
        out.emplace_back(set_.patches[m->region.patches[k]].func, n);
  return out;
}

void Run::drain() {
  if ((!timer_ && !reader_) || !ring_) return;
  std::lock_guard<std::mutex> lock(timer_mu_);
  const uint64_t at = now_ns();
  drained_ = timer_ ? timer_->drain(ring_) : reader_->drain(ring_);
  drained_at_ = at;  // the read took what came in until then
  // A live trace is live: what was read reaches the output now.
  if (reader_ && drained_) sink_.flush();
  if (const uint64_t now = now_ns(); now - clock_at_ >= 100'000'000) {
    (timer_ ? timer_->clock() : reader_->clock()).update();
    clock_at_ = now;
  }
}

void Run::read_metrics(MetricsSnapshot& s) const {
  s.pid = pid_;
  s.funcs.clear();
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
    return;
  }
  if (reader_) {
    std::lock_guard<std::mutex> lock(timer_mu_);
    const auto& calls = reader_->calls();
    for (size_t f = 0; f < calls.size(); ++f) {
      if (!calls[f]) continue;
      FuncMetrics m;
      m.func = plan_.funcs[f].name;
      m.calls = calls[f];
      s.funcs.push_back(std::move(m));
    }
    s.lost = ring_ ? reader_->dropped(ring_) : 0;
    return;
  }
  for (auto [f, n] : counts()) {
    FuncMetrics m;
    m.func = plan_.funcs[f].name;
    m.calls = n;
    s.funcs.push_back(std::move(m));
  }
  s.lost = 0;
}

void Run::emit(uint64_t ended) {
  std::vector<FuncCount> counts;
  for (auto [f, n] : this->counts()) counts.push_back({plan_.funcs[f].name, n, std::nullopt});
  uint64_t events = 0;
  for (auto& ev : count_events(std::move(counts))) {
    sink_.emit(std::move(ev));
    ++events;
  }
  uint64_t dropped = 0;
  if (timer_) {
    std::vector<FuncLatency> lat;
    const auto& all = timer_->latencies();
    for (size_t f = 0; f < all.size(); ++f)
      if (all[f].count) lat.push_back({plan_.funcs[f].name, all[f], std::nullopt});
    for (auto& ev : latency_events(std::move(lat))) {
      sink_.emit(std::move(ev));
      ++events;
    }
    dropped = ring_ ? timer_->dropped(ring_) : 0;
  }
  if (reader_) {
    for (const auto& ev : unfinished_events(reader_->open_calls(ended))) {
      sink_.emit(ev);
      ++events;
    }
    events += reader_->events();
    dropped = ring_ ? reader_->dropped(ring_) : 0;
  }
  RunSummary sum;
  sum.backend = "trampoline";
  sum.ts_ns = ended;
  sum.functions = plan_.funcs.size();
  sum.probes = placed_;
  sum.events = events;
  // A count's every pass adds to its counter; a timed run's events find the ring full.
  sum.lost = dropped;
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
  if (reader_) sum.extra["returns_before_entries"] = reader_->unmatched_returns();
  sink_.emit(to_event(sum));
  sink_.flush();
}

}  // namespace gotap::trampoline
