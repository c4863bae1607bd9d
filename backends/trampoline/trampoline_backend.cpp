// The trampoline backend (docs/design.md, "Probes without a trap"): `gotap count` with no trap
// per call. Each counted function's stack-check `jbe` becomes a jump to a trampoline that
// takes the same branch to morestack, adds one to the function's counter with `lock inc`,
// and jumps back. gotap holds the program only while it patches and while it unpatches
// (every thread stopped with ptrace); in between the program runs detached, its calls cost
// a few nanoseconds, and gotap reads the counters from memory it shares with the program.
//
// Safety, as with the other backends: the patched bytes hold no pc a thread, a parked
// goroutine or a signal frame can resume at (site_patches.h, jump_site.h), so a patch is one
// write per site with the threads stopped. A gotap killed at any point leaves a program that
// runs as before: the jumps and the trampolines stay, and count on.
#include <unistd.h>

#include <memory>
#include <string>

#include "backends/trampoline/register.h"
#include "backends/trampoline/run.h"
#include "core/backend.h"

namespace gotap::trampoline {

namespace {

class TrampolineBackend : public Backend {
 public:
  std::string name() const override { return "trampoline"; }
  Result<void> run(const ProbePlan& plan, const TraceOptions& opts, EventSink& sink) override {
    Run r(plan, opts, sink);
    return r.run();
  }
};

std::string unavailable_reason() {
  if (::access("/proc/self/map_files", F_OK) != 0) return "/proc/PID/map_files is missing";
  return "";
}

}  // namespace

void register_trampoline_backend() {
  register_backend(
      {"trampoline", unavailable_reason, [] { return std::make_unique<TrampolineBackend>(); }});
}

}  // namespace gotap::trampoline
