// Who else has a uprobe on a file: the kernel lists every BPF link, and uprobe_multi links
// (Linux >= 6.8) and perf-event uprobe links (>= 6.6) name their file and offsets
// (BPF_OBJ_GET_INFO_BY_FD). An int3 at one of those offsets is theirs, never a dead gotap's:
// gotap must neither put the original byte back there nor probe the site (docs/design.md,
// "Probes gotap does not own").
//
// Not seen: uprobes made without BPF (perf probe, tracefs uprobe_events); their int3s show
// as taken sites all the same, they are only not named.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>

namespace gotap::sys {

// File offset -> who holds it ("BPF program NAME, link ID"), for the uprobes on the file
// that `exe` (a path, e.g. /proc/PID/exe) names, compared by device and inode, that can
// have an int3 in process `pid`: a uprobe_multi link made for another pid writes none there
// (the kernel installs it only in that process), so it is left out, and so is one that reports
// pid 0 but is not in every process (its process is gone: the kernel says 0 for both). 0: every
// link. `certain`: only links that surely have their int3 in `pid`: uprobe_multi for that pid or
// for every process, and perf-event links made for every process (such a link does not say
// which process it was made for; gotap tells by mapping the file itself, where the kernel puts
// only every-process uprobes).
std::map<uint64_t, std::string> uprobe_holders(const std::string& exe, pid_t pid = 0,
                                               bool certain = false);

}  // namespace gotap::sys
