// The eBPF session for what the trampolines cannot take (fallback.h).
#include "backends/trampoline/fallback.h"

#include <condition_variable>
#include <cstdint>
#include <iostream>
#include <unordered_map>

#include "backends/ebpf/ebpf_backend.h"
#include "core/events/typed_events.h"

namespace gotap::trampoline {

// Passes the session's call events on; keeps its rows and its summary, which the run merges
// into its own.
class Fallback::Sink : public EventSink {
 public:
  Sink(Fallback& f, EventSink& out) : f_(f), out_(out) {}
  void emit(const Event& ev) override {
    const std::string kind = ev.value("event", "");
    if (kind == "count" || kind == "latency") {
      f_.rows_.push_back(ev);
    } else if (kind == "summary") {
      f_.summary_ = ev;
    } else {
      out_.emit(ev);
    }
  }
  void emit_entry(const CallEntry& e) override { out_.emit_entry(e); }
  void emit_return(const CallReturn& r) override { out_.emit_return(r); }
  void emit_unfinished(const CallUnfinished& u) override { out_.emit_unfinished(u); }
  void flush() override { out_.flush(); }

 private:
  Fallback& f_;
  EventSink& out_;
};

Result<std::unique_ptr<Fallback>> Fallback::start(const ProbePlan& plan,
                                                  const std::vector<int>& funcs,
                                                  const std::vector<int>& inlined_only,
                                                  const TraceOptions& opts, pid_t pid,
                                                  bool image_locked, EventSink& out,
                                                  std::function<void(uint64_t)> on_read) {
  std::unique_ptr<Fallback> f(new Fallback());
  f->plan_ = plan;
  f->plan_.funcs.clear();
  for (int i : funcs) f->plan_.funcs.push_back(plan.funcs[i]);
  f->whole_ = funcs.size();
  // A function with no code of its own to probe, as one that exists only inlined is.
  for (int i : inlined_only) {
    FuncPlan c = plan.funcs[i];
    c.entry = c.end = c.entry_probe = c.morestack_call = 0;
    c.ret_sites.clear();
    c.tail_jumps.clear();
    f->copies_ += c.inline_sites.size();
    f->plan_.funcs.push_back(std::move(c));
  }
  // The run's own end ends it: no duration, no target of its own but the process.
  f->opts_ = opts;
  f->opts_.target = Target{};
  f->opts_.target.pid = pid;
  f->opts_.duration_s = 0;
  // Its counters reach --prometheus and -i through the run's (read_metrics); its rows stand
  // in the jumps' table, which has failures only where the jumps count them (the caller's
  // opts.count_failed says: Run::uprobe_options).
  // A condition's programs are by plan index: the session's functions are numbered anew.
  if (opts.condition) {
    f->cond_ = std::make_unique<cond::Condition>();
    f->cond_->spec = opts.condition->spec;
    f->cond_->ebpf_problem = opts.condition->ebpf_problem;
    if (!opts.condition->funcs.empty()) {
      for (int i : funcs) f->cond_->funcs.push_back(opts.condition->funcs.at(size_t(i)));
      for (int i : inlined_only) f->cond_->funcs.push_back(opts.condition->funcs.at(size_t(i)));
    }
    f->opts_.condition = f->cond_.get();
  }
  if (opts.metrics) f->metrics_ = std::make_unique<LiveMetrics>();
  f->opts_.metrics = f->metrics_.get();
  f->opts_.max_overhead_pct = 0;
  f->sink_ = std::make_unique<Sink>(*f, out);
  Fallback* self = f.get();
  f->thread_ = std::thread([self, image_locked, on_read = std::move(on_read)] {
    ebpf::EbpfOptions eo;
    eo.on_read = on_read;
    eo.banner = false;
    eo.stop = &self->stop_;
    eo.image_locked = image_locked;
    // --why: the jumps take the traced calls, which this session does not see.
    eo.why_every_goroutine = self->plan_.goroutines.walk;
    eo.on_live = [self](size_t probes, int) {
      std::lock_guard<std::mutex> lock(self->mu_);
      self->live_ = true;
      self->probes_ = probes;
      self->live_cv_.notify_all();
    };
    // An exception here would end gotap without its probes removed: it is the session's
    // failure instead, which ends the run as one (Run::wait).
    std::string error;
    try {
      auto r = ebpf::run_session(self->plan_, self->opts_, *self->sink_, eo);
      if (!r) error = r.error().what();
      // Whatever it delivered is out: the other source's events need not wait for it.
      if (on_read) on_read(UINT64_MAX);
    } catch (const std::exception& e) {
      error = e.what();
    }
    std::lock_guard<std::mutex> lock(self->mu_);
    self->error_ = error;
    self->ended_ = true;
    self->live_cv_.notify_all();
  });
  std::unique_lock<std::mutex> lock(f->mu_);
  f->live_cv_.wait(lock, [&] { return f->live_ || f->ended_; });
  if (!f->live_) {
    const std::string why = f->error_;
    lock.unlock();
    f->thread_.join();
    return runtime_error("{}", why.empty() ? "the session ended before its probes were live" : why);
  }
  return f;
}

void Fallback::read_metrics(MetricsSnapshot& s) const {
  if (!metrics_) return;
  const MetricsSnapshot own = metrics_->read();
  // By name, once per read: a whole binary has thousands of rows on each side.
  std::unordered_map<std::string, size_t> row;
  row.reserve(s.funcs.size());
  for (size_t i = 0; i < s.funcs.size(); ++i) row.emplace(s.funcs[i].func, i);
  for (const FuncMetrics& m : own.funcs) {
    if (auto it = row.find(m.func); it != row.end())
      s.funcs[it->second].calls += m.calls;  // an inlined copy's calls (count, trace)
    else
      s.funcs.push_back(m);
  }
  s.lost += own.lost;
}

void Fallback::finish() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

Fallback::~Fallback() {
  finish();
}

namespace {

// The eBPF session's events as the trampoline backend's run: its summary names the backend
// that was asked for, and says that every function went on uprobes.
class AllOnUprobes : public EventSink {
 public:
  AllOnUprobes(EventSink& out, const char* reason) : out_(out), reason_(reason) {}
  void emit(const Event& ev) override {
    if (ev.value("event", "") != "summary") return out_.emit(ev);
    Event s = ev;
    s["backend"] = "trampoline";
    Event u = {{"backend", "ebpf"},
               {"functions", ev.value("functions", uint64_t(0))},
               {"inlined_copies", 0},
               {"probes", ev.value("probes", uint64_t(0))}};
    for (const char* k : {"attach", "skipped_sites", "unmatched_returns"})
      if (s.contains(k)) {
        u[k] = s[k];
        s.erase(k);
      }
    if (reason_) u["reason"] = std::string("the trampoline backend ") + reason_;
    s["uprobes"] = std::move(u);
    s["not_patched"] = ev.value("functions", uint64_t(0));
    s["pages_kept"] = false;
    out_.emit(s);
  }
  void emit_entry(const CallEntry& e) override { out_.emit_entry(e); }
  void emit_return(const CallReturn& r) override { out_.emit_return(r); }
  void emit_unfinished(const CallUnfinished& u) override { out_.emit_unfinished(u); }
  void flush() override { out_.flush(); }

 private:
  EventSink& out_;
  const char* reason_;
};

}  // namespace

Result<void> run_all_on_uprobes(const ProbePlan& plan, const TraceOptions& opts, EventSink& sink,
                                const char* reason) {
  AllOnUprobes out(sink, reason);
  ebpf::EbpfOptions eo;
  eo.banner = false;
  eo.on_live = [&plan](size_t probes, int pid) {
    std::cerr << tracing_banner(plan.funcs.size(), probes, "trampoline",
                                pid > 0 ? "pid " + std::to_string(pid) : "every process",
                                plan.goroutines.status != 0)
              << std::endl;
  };
  return ebpf::run_session(plan, opts, out, eo);
}

}  // namespace gotap::trampoline
