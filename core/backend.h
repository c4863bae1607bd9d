// The one small abstract Backend (docs/design.md). Backends live in their own libraries and
// register themselves with the factory from the front end; core never names one.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/events/events.h"
#include "core/model/result.h"
#include "core/plan/plan.h"

namespace gotap {

enum class Mode { Trace, Count, Latency, Goroutines };

class LiveMetrics;
namespace cond {
struct Condition;
}

struct Target {
  int pid = 0;                    // -p PID
  std::vector<std::string> argv;  // -- CMD ARGS
  bool all = false;               // --all: every process running the binary
  bool library = false;           // with pid: the binary is a library that process maps
};

struct TraceOptions {
  Mode mode = Mode::Trace;
  Target target;
  double duration_s = 0;  // 0: until Ctrl-C / SIGTERM / the tracee exits
  int max_depth = 3;
  int max_elems = 16;
  int max_str = 64;
  int stack_depth = 0;  // --stack N
  // --rate N (trace): at most N reported calls per second per function, an entry and its
  // return counting as one; 0: no limit. The calls left out are counted (rate_limited).
  uint32_t rate_per_s = 0;
  // --no-failed (count, latency): no FAILED column. Counting failures reads the error result
  // at every RET, so `count` of a function with an error result probes its RETs too, and a
  // RET probe is single-stepped: several times an entry hit (docs/benchmarks.md).
  bool count_failed = true;
  // --jumps-only (trampoline): what no jump takes is left out, named on stderr, instead of
  // going on kernel uprobes, whose traps cost a whole binary's requests most of their time.
  bool jumps_only = false;
  // --prometheus: the backend publishes its per-function counters here while probes are live
  // (LiveMetrics::begin) and stops before it frees them (end). Null when not asked for.
  LiveMetrics* metrics = nullptr;
  // --if / --slower / --errors, compiled per plan function (core/cond); null: every call.
  const cond::Condition* condition = nullptr;
  // --max-overhead PERCENT: a function whose probes cost more than this share of the traced
  // process's CPU time over a second is detached (core/events/overhead_budget.h); 0: never.
  double max_overhead_pct = 0;
};

// Set by the front end's signal handler (SIGINT, SIGTERM, SIGHUP); backends poll it and end
// cleanly: probes removed, attached tracees left running, summary emitted.
std::atomic<bool>& stop_requested();

// The "Tracing N functions (M probes) with BACKEND in WHERE. Ctrl-C to end." line that
// scripts wait for (docs/cli.md), the same for every backend.
// With `goroutines`, it says the goroutine probes are live too.
std::string tracing_banner(size_t nfuncs, size_t nprobes, std::string_view backend,
                           std::string_view where, bool goroutines = false);

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // Runs until the target exits, the duration ends or a stop is requested. Emits events and
  // finally the summary event. Prints the "Tracing ..." line on stderr when probes are live.
  // The plan is all a backend gets of the binary (its binary_view), so a backend cannot come
  // to depend on more of GoBinary than the plan carries.
  virtual Result<void> run(const ProbePlan& plan, const TraceOptions& opts, EventSink& sink) = 0;
};

struct BackendInfo {
  std::string name;
  // "" when usable here; otherwise why not (printed by --backend=auto and on errors).
  std::function<std::string()> unavailable_reason;
  std::function<std::unique_ptr<Backend>()> make;
};

void register_backend(BackendInfo info);
const std::vector<BackendInfo>& registered_backends();

// name: "ptrace", "ebpf" or "auto" (ebpf when usable, else ptrace). `why` receives the
// reason for auto's choice.
Result<std::unique_ptr<Backend>> make_backend(const std::string& name, std::string* why);

}  // namespace gotap
