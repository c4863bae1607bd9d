// Where Go blocks every signal with sigprocmask(2), outside its signal handlers: the parent
// around clone and around a fork, a thread that exits (mexit, and all it calls: handoffp,
// startm, newm, the allocator), a cgo thread's needm and dropm, and a new thread from its
// clone until minit. A probe hit there while gotap lives is handled (the tracer takes the
// stop, TrapNet::rearm), but the kernel forces an int3's SIGTRAP on a thread that blocks it,
// with the default action: a gotap killed with its int3s there leaves the program to die of
// the next one. Measured: a program whose threads come and go died of SIGTRAP at once after
// a SIGKILL of a gotap tracing runtime.newm. Two remedies (inside the handlers SIGTRAP is
// let through while gotap traces: trap_net.h):
// - Go's masks "every signal" are two variables, runtime.sigset_all and
//   runtime.sigsetAllExiting: while ptrace traces, gotap clears SIGTRAP in them (TrapNet), so
//   those windows no longer block it.
// - A cgo program's new thread starts with the mask C gave it (every signal) until minit, and
//   every handler returns through runtime.sigreturn__sigaction with its own signal blocked
//   (the net's SIGTRAP too): the ptrace backend places no int3 in that code. Uprobes are the
//   kernel's, and the eBPF backend probes it.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace gotap {

class ElfFile;
class Pclntab;

// The [entry, end) of the functions a new thread runs before minit, and of the signal
// return trampoline (signals_blocked.cpp names them), sorted (link-time addresses). Names
// absent from a release are skipped.
std::vector<std::pair<uint64_t, uint64_t>> signals_blocked_ranges(const Pclntab& pcln);

// The link-time addresses of runtime.sigsetAllExiting and runtime.sigset_all, read from
// runtime.sigblock (the RIP-relative LEAs of its two branches): a stripped binary has no
// symbols for them. Empty when that code is not as expected.
std::vector<uint64_t> block_all_sets(const ElfFile& elf, const Pclntab& pcln);

}  // namespace gotap
