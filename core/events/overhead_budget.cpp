#include "core/events/overhead_budget.h"

#include <fmt/format.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "core/model/go_quote.h"
#include "core/sys/proc_status.h"

namespace gotap {

std::optional<double> parse_max_overhead(const std::string& text) {
  // Digits and one dot only: strtod alone would take " 5", "0x5" and "1e1".
  if (text.empty() || text.find_first_not_of("0123456789.") != std::string::npos)
    return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || errno != 0 || !std::isfinite(v) ||
      v <= 0 || v > 100)
    return std::nullopt;
  return v;
}

std::optional<uint64_t> process_cpu_ns(int pid) {
  clockid_t cid;
  timespec ts{};
  if (clock_getcpuclockid(pid, &cid) == 0 && clock_gettime(cid, &ts) == 0)
    return uint64_t(ts.tv_sec) * 1'000'000'000ull + uint64_t(ts.tv_nsec);
  const auto stat = sys::stat_fields(pid);
  if (stat.size() < 3) return std::nullopt;
  // utime is field 14, stime 15 (0 when the line is cut short).
  const auto field = [&](size_t n) {
    return stat.size() > n ? std::strtoull(stat[n].c_str(), nullptr, 10) : 0;
  };
  const uint64_t utime = field(14), stime = field(15);
  const long hz = sysconf(_SC_CLK_TCK);
  return (utime + stime) * (1'000'000'000ull / uint64_t(hz > 0 ? hz : 100));
}

std::vector<OverheadTrip> OverheadBudget::sample(uint64_t now_ns, uint64_t cpu_ns,
                                                 const std::vector<uint64_t>& cost_ns,
                                                 const std::vector<uint64_t>& hits) {
  std::vector<OverheadTrip> trips;
  if (!enabled()) return trips;
  next_ns_ = now_ns + kSampleNs;
  window_.push_back({now_ns, cpu_ns, cost_ns, hits});
  // The newest sample at least a window old is the window's start; older ones go.
  while (window_.size() > 2 && now_ns - window_[1].t >= kWindowNs) window_.pop_front();
  const Sample& first = window_.front();
  if (now_ns - first.t < kWindowNs || cpu_ns < first.cpu) return trips;
  const uint64_t cpu = cpu_ns - first.cpu;
  if (cpu < kMinCpuNs) return trips;
  for (size_t f = 0; f < cost_ns.size() && f < detached_.size() && f < first.cost.size(); ++f) {
    if (detached_[f] || cost_ns[f] < first.cost[f]) continue;
    if (f >= hits.size() || f >= first.hits.size() || hits[f] < first.hits[f] + kMinHits) continue;
    const uint64_t cost = cost_ns[f] - first.cost[f];
    const double pct = 100.0 * double(cost) / double(cpu);
    if (pct <= percent_) continue;
    detached_[f] = true;
    trips.push_back({f, pct, cost, cpu, now_ns - first.t});
  }
  return trips;
}

size_t OverheadBudget::detached_count() const {
  size_t n = 0;
  for (bool d : detached_) n += d;
  return n;
}

std::string detached_message(const std::string& func, const OverheadTrip& t, double budget) {
  // Both backends print it on stderr: the name is the binary's, shown as text shows names.
  if (func == kGoroutineProbes)
    return fmt::format(
        "detached the goroutine probes (--why, --goroutines): they cost {:.1f}% of the "
        "program's CPU (budget {:g}%)",
        t.percent, budget);
  return fmt::format("detached {}: its probes cost {:.1f}% of the program's CPU (budget {:g}%)",
                     printable(func), t.percent, budget);
}

Event detached_event(uint64_t ts_ns, int pid, const std::string& func, const OverheadTrip& t,
                     double budget, uint64_t open_calls) {
  return {{"event", "detached"},
          {"ts_ns", ts_ns},
          {"pid", pid},
          {"func", func},
          {"overhead_pct", std::round(t.percent * 10) / 10},
          {"budget_pct", budget},
          {"cost_ns", t.cost_ns},
          {"cpu_ns", t.cpu_ns},
          {"window_ns", t.window_ns},
          {"open_calls", open_calls}};
}

}  // namespace gotap
