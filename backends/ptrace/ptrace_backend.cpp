#include <sys/ptrace.h>
#include <unistd.h>

#include <fstream>

#include "backends/ptrace/register.h"
#include "backends/ptrace/tracer.h"
#include "core/backend.h"
#include "core/binary/elf_file.h"

namespace gotap::ptrace {

namespace {

class PtraceBackend : public Backend {
 public:
  std::string name() const override { return "ptrace"; }
  Result<void> run(const ProbePlan& plan, const TraceOptions& opts, EventSink& sink) override {
    // Its int3s, their fork and ownership checks, are the planned file's alone.
    if (plan.goroutines.image)
      return make_error(
          "the ptrace backend places no probe in {} yet: goroutine states of this program need "
          "--backend ebpf",
          plan.goroutines.image->path());
    Tracer t(plan, opts, sink);
    return t.run();
  }
};

std::string unavailable_reason() {
  std::ifstream f("/proc/sys/kernel/yama/ptrace_scope");
  int scope = 0;
  if (f >> scope && scope >= 3) return "ptrace is disabled (kernel.yama.ptrace_scope=3)";
  return "";
}

}  // namespace

void register_ptrace_backend() {
  register_backend(
      {"ptrace", unavailable_reason, [] { return std::make_unique<PtraceBackend>(); }});
}

}  // namespace gotap::ptrace
