#include <sys/ptrace.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "backends/ptrace/register.h"
#include "backends/ptrace/tracer.h"
#include "core/backend.h"
#include "core/binary/elf_file.h"

namespace gotap::ptrace {

namespace {

// The file a /proc/PID/map_files link names, which a user can give to --binary.
std::string file_name(const std::string& path) {
  if (!path.starts_with("/proc/")) return path;
  std::error_code ec;
  auto target = std::filesystem::read_symlink(path, ec);
  return ec ? path : target.string();
}

class PtraceBackend : public Backend {
 public:
  std::string name() const override { return "ptrace"; }
  Result<void> run(const ProbePlan& plan, const TraceOptions& opts, EventSink& sink) override {
    // Its int3s, scratch pages, fork and ownership checks are one file's: the planned one,
    // the executable or (-p PID --binary LIB) a library's copy.
    if (plan.goroutines.image)
      return make_error(
          "the ptrace backend places no probe in {0} beside the program's own yet: goroutine "
          "states of this program need --backend ebpf, or -p PID --binary {0}",
          file_name(plan.goroutines.image->path()));
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
