// Removing many uprobes from a busy program with its threads held still.
//
// The kernel removes a uprobe by writing the page back in the program, and each write
// flushes the TLB of every CPU that runs the program's threads at that moment: an
// inter-processor interrupt per uprobe, each a VM exit on a guest. A whole caddy's 116,521
// uprobes took 4.7 s to go under load (3.3 s of it gotap's CPU, most in that flush), against
// 0.4 s with its threads stopped (docs/benchmarks.md, "Ending a whole-binary trace under
// load"). Above kHoldSites uprobes, the threads are held in a ptrace interrupt stop while
// the links close: no signal, nothing the program can see but a pause as long as the
// removal, where it would otherwise run trapping, contending for its own address space's
// lock, for seconds.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <functional>
#include <string>

namespace gotap::ebpf {

// Below it, even at the slowest removal measured (58 us a uprobe under load), the links
// close in under half a second unheld, and a hold would only add its own pause.
inline constexpr size_t kHoldSites = 8192;

struct HeldDetach {
  bool held = false;    // every thread was held while `detach` ran
  std::string why_not;  // when not: why (no ptrace rights, another tracer, a stopped thread)
};

// Runs `detach` once, with every thread of `pid` in a ptrace stop when they can all be
// held (ptrace can seize the process and stop each thread), else as it is. Ptrace is let
// go of before it returns. A gotap killed meanwhile lets the threads go on (no
// PTRACE_O_EXITKILL), and its links close with it.
HeldDetach detach_holding_threads(pid_t pid, const std::function<void()>& detach);

}  // namespace gotap::ebpf
