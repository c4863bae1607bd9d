#include "backends/ebpf/gccgo_goids.h"

#include <iostream>

#include "core/binary/elf_file.h"

namespace gotap::ebpf {

namespace {

// ld.so's system calls before it has relocated libgo: a few dozen. The bound only stops a
// program that never loads it.
constexpr int kMaxStops = 20000;

}  // namespace

std::optional<GccgoGAt> gccgo_goids(const ProbePlan& plan, TargetProcess& target, bool quiet) {
  const GccgoG& g = plan.gccgo_g;
  if (plan.reads_g || g.tls == GccgoG::Tls::None) {
    if (!plan.reads_g && !quiet && !g.why_not.empty())
      std::cerr << "gotap: warning: goroutine ids are not read: " << g.why_not << "\n";
    return std::nullopt;
  }
  // Linked in: a fixed place, the file's alone.
  if (g.tls == GccgoG::Tls::Exec) return locate_gccgo_g(g, 0).value();
  std::string why;
  if (target.pid() <= 0) {
    // Every probe in libgo itself (--all --binary libgo.so): each hit finds the GOT pair of
    // the libgo it ran in. Probes in a program that uses libgo.so have no such way.
    if (const ElfFile* elf = plan.binary_view.elf)
      if (auto slot = tls_module_slot(*elf, "runtime.g")) {
        GccgoGAt at;
        at.dtv = at.self = true;
        at.modid = *slot;
        at.g_goid = g.g_goid;
        return at;
      }
    why = "libgo.so's g is found per process, not in every process that runs a program (--all)";
  } else {
    std::optional<GccgoGAt> at;
    std::optional<uint64_t> slot;  // libgo's file is read once, when it is mapped
    auto found = target.run_syscalls_until(
        [&] {
          if (!slot) {
            auto s = libgo_tls_slot_in(g, target.pid());
            if (!s) {
              why = s.error().message;
              return true;  // never to be found: no use running further
            }
            why = g.libgo + " was never loaded";
            if (!*s) return false;
            slot = **s;
          }
          auto r = read_gccgo_g(g, target.pid(), *slot);
          if (r)
            at = *r;
          else
            why = r.error().message;
          return bool(r);
        },
        kMaxStops);
    if (!found) why = found.error().message;
    if (at) return at;
  }
  if (!quiet) std::cerr << "gotap: warning: goroutine ids are not read: " << why << "\n";
  return std::nullopt;
}

}  // namespace gotap::ebpf
