// --max-overhead on the ptrace backend. A probe hit costs the program the time its thread is
// held stopped: the tracer times it from taking the stop to resuming the thread (the
// kernel's trap and wake-up before that are not seen, so the cost is a lower bound). The
// budget (core/events/overhead_budget.h) compares each function's share with the CPU time
// the process used; a function over it loses its int3s, the original bytes put back.
#include <fmt/format.h>

#include <cstdio>

#include "backends/ptrace/tracer.h"

namespace gotap::ptrace {

void Tracer::charge_hit(const Site& s, uint64_t ns) {
  size_t funcs = 0;
  for (const SiteRole& r : s.roles) funcs += r.func >= 0;
  if (funcs == 0) {
    // The goroutine probes' roles have no function: theirs is the slot after the functions'.
    if (!s.roles.empty() && cost_ns_.size() > plan_.funcs.size()) {
      cost_ns_[plan_.funcs.size()] += ns;
      ++cost_hits_[plan_.funcs.size()];
    }
    return;  // (or a site already dropped)
  }
  for (const SiteRole& r : s.roles)
    if (r.func >= 0 && size_t(r.func) < cost_ns_.size()) {
      cost_ns_[r.func] += ns / funcs;
      ++cost_hits_[r.func];
    }
}

void Tracer::check_overhead() {
  const uint64_t now = now_ns();
  if (!budget_.due(now)) return;
  auto cpu = process_cpu_ns(proc_->pid());
  if (!cpu) return;
  for (const OverheadTrip& t : budget_.sample(now, *cpu, cost_ns_, cost_hits_)) {
    if (t.func == plan_.funcs.size()) {
      // Every goroutine probe's role has func -1: dropping them leaves the functions' own.
      if (!bps_.drop_func(-1, proc_->mem()))
        fmt::print(stderr, "gotap: warning: a goroutine probe could not be removed\n");
      ++detached_total_;
      fmt::print(stderr, "gotap: {}\n", detached_message(kGoroutineProbes, t, budget_.percent()));
      std::fflush(stderr);
      emit(detached_event(now_ns(), proc_->pid(), kGoroutineProbes, t, budget_.percent(), 0));
      continue;
    }
    const int func = static_cast<int>(t.func);
    if (!bps_.drop_func(func, proc_->mem()))
      fmt::print(stderr, "gotap: warning: a breakpoint of {} could not be removed\n",
                 plan_.funcs[func].name);
    // Its calls in flight will show no return: they leave the trace here, counted in the
    // event, rather than end it as `unfinished` (the program did not leave them so).
    uint64_t open = 0;
    for (auto it = pending_.begin(); it != pending_.end();) {
      auto next = std::next(it);
      if (it->second.func == func) {
        if (!it->second.dropped && !it->second.rejected) ++open;
        close_pending(it);
      }
      it = next;
    }
    ++detached_total_;
    const std::string& name = plan_.funcs[func].name;
    fmt::print(stderr, "gotap: {}\n", detached_message(name, t, budget_.percent()));
    std::fflush(stderr);
    emit(detached_event(now_ns(), proc_->pid(), name, t, budget_.percent(), open));
  }
}

}  // namespace gotap::ptrace
