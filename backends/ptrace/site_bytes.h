// Writing one byte at each of a whole binary's probe sites (caddy: 145,517) into the tracee's
// text. Text is read-only, so each write goes through /proc/PID/mem: about 1.8 us a system
// call on a paravirtualized host, half a second to arm a whole binary and again to detach.
// A page's sites are written in one system call instead: the span from its first site to
// its last, read as it is now, with the sites' bytes changed.
//
// Writing back bytes that are not ours is safe only while nobody else changes them. Another
// tracer's int3 (a uprobe, a debugger's breakpoint) that a span covers could be removed
// between the read and the write, and the write would put it back where no tracer expects
// it: the program would die of its SIGTRAP. So a page is written whole only when every byte
// of the span other than the sites equals the executable's file; a page that holds anything
// else gets one write per site, as before. What is left: an int3 placed in those few
// microseconds on that page would be written over, and its tracer would miss the hits in
// this process; nothing the program runs changes (docs/design.md, "Placing the int3s").
//
// An int3 goes only where the site still holds the byte read when it was planned: a tracer
// that takes no lock (bpftrace, perf) may have put its uprobe there since, and the kernel
// would take every hit of a site both hold. Writing stops at the first such site.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>

#include "backends/ptrace/breakpoints.h"

namespace gotap::ptrace {

using WriteBytes = std::function<bool(uint64_t addr, const uint8_t* bytes, size_t n)>;

struct SiteWriteStats {
  size_t spans = 0;      // pages written whole
  size_t alone = 0;      // sites written one by one
  bool changed = false;  // writing int3s stopped at a site that no longer held its byte
};

// Writes, at each site (sorted by address, distinct), 0xCC when int3, else the site's
// original byte. `now` reads the tracee's memory; `file` may be empty (every site alone).
// Returns how many sites were written before the first failure: sites.size() when none. An
// int3 is written only over the site's original byte (Site::orig); a site that holds another
// is a failure, and `stats->changed` says so.
size_t write_site_bytes(std::span<const Site> sites, bool int3, MemoryReader& now,
                        const WriteBytes& write, const FileText& file,
                        SiteWriteStats* stats = nullptr);

}  // namespace gotap::ptrace
