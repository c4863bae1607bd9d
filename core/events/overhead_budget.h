// --max-overhead PERCENT, the circuit breaker (docs/cli.md "Overhead budget"): the part of
// the decision both backends share. A backend measures what each function's probes cost the
// traced program (eBPF: BPF run time plus the uprobe trap per hit; ptrace: the time each hit
// holds its thread stopped) and hands the running totals to sample() every ~100 ms; the
// budget compares each function's cost over the last second with the CPU time the process
// used in that same second, and names the functions to detach.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "core/events/events.h"

namespace gotap {

// Parses --max-overhead's value: a number greater than 0 and at most 100; nullopt otherwise.
std::optional<double> parse_max_overhead(const std::string& text);

// The CPU time pid has used (user + system, every thread: /proc/PID/stat's utime + stime),
// in ns, read through the process's CPU clock (clock_getcpuclockid) for ns precision, else
// from /proc/PID/stat in clock ticks. nullopt when the process is gone.
std::optional<uint64_t> process_cpu_ns(int pid);

struct OverheadTrip {
  size_t func = 0;
  double percent = 0;    // the function's cost over the window, in % of the process's CPU
  uint64_t cost_ns = 0;  // over the window
  uint64_t cpu_ns = 0;   // the process's CPU time over the window
  uint64_t window_ns = 0;
};

class OverheadBudget {
 public:
  static constexpr uint64_t kWindowNs = 1'000'000'000;  // a burst shorter than this never trips
  static constexpr uint64_t kSampleNs = 100'000'000;
  // A window in which the process used less CPU than this is not judged: an idle program's
  // probes cost next to nothing, and clock-tick CPU times would make a ratio of noise.
  static constexpr uint64_t kMinCpuNs = 10'000'000;
  // A function hit fewer times than this in the window is not judged: a few hits make no
  // steady cost, and one ptrace stop held long by a loaded machine (the tracer waiting for a
  // CPU) would otherwise trip a function called a handful of times.
  static constexpr uint64_t kMinHits = 100;

  // percent 0: no budget (sample() never trips).
  OverheadBudget(double percent, size_t funcs) : percent_(percent), detached_(funcs, false) {}
  bool enabled() const { return percent_ > 0; }
  double percent() const { return percent_; }
  // Whether a sample is due at now_ns (CLOCK_MONOTONIC).
  bool due(uint64_t now_ns) const { return enabled() && now_ns >= next_ns_; }
  // cost_ns[f], hits[f]: the running totals of function f's probe cost and probe hits;
  // cpu_ns: process_cpu_ns(). The functions over the budget in the last window, each
  // returned once (then marked detached).
  std::vector<OverheadTrip> sample(uint64_t now_ns, uint64_t cpu_ns,
                                   const std::vector<uint64_t>& cost_ns,
                                   const std::vector<uint64_t>& hits);
  bool detached(size_t func) const { return func < detached_.size() && detached_[func]; }
  size_t detached_count() const;

 private:
  struct Sample {
    uint64_t t = 0, cpu = 0;
    std::vector<uint64_t> cost, hits;
  };
  double percent_;
  std::vector<bool> detached_;
  std::deque<Sample> window_;
  uint64_t next_ns_ = 0;
};

// The goroutine probes (runtime.casgstatus, runtime.newproc1 and the others --why and
// --goroutines place) are judged as one more function, after the plan's: their cost counts
// toward the budget, and over it they are detached together. Their name in the `detached`
// event, the summary's `detached` and the stderr line.
inline constexpr const char* kGoroutineProbes = "goroutine probes";

// The stderr line (without "gotap: ") and the `detached` event (docs/json.md) of a trip.
std::string detached_message(const std::string& func, const OverheadTrip& t, double budget);
Event detached_event(uint64_t ts_ns, int pid, const std::string& func, const OverheadTrip& t,
                     double budget, uint64_t open_calls);

}  // namespace gotap
