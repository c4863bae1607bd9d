// The code Go's os/exec runs in the child of its vfork (syscall.forkAndExecInChild1 after
// rawVforkSyscall, and what it calls until the exec): the child shares the program's memory,
// so it runs any int3 gotap's ptrace backend put there, but it is not traced (gotap follows
// no fork) and it blocks every signal, so the kernel gives that SIGTRAP its default action
// and the child dies before its exec: every exec.Command fails with "signal:
// trace/breakpoint trap". The ptrace backend places no int3 in these functions. Uprobes are
// the kernel's own and work in the child: the eBPF backend probes them.
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

namespace gotap {

class ElfFile;
class Pclntab;

// The [entry, end) of the functions the child runs (fork_child.cpp says which), with those
// reachable from them by direct calls and tail jumps, sorted (link-time addresses). Calls
// into the runtime's panic and throw paths are not followed: the child never returns from
// them, and they reach half the runtime. Empty when the binary has none of those functions.
std::vector<std::pair<uint64_t, uint64_t>> fork_child_ranges(const ElfFile& elf,
                                                             const Pclntab& pcln);

// gccgo (no pclntab, so no walk): whether a function of that Go name is one libgo's child
// runs between its fork and exec. libgo's syscall package is gc's with the raw system calls
// as Go wrappers of C (syscall.raw_dup2, raw_execve, ...): the same names, matched by name.
bool gccgo_fork_child(std::string_view name);

}  // namespace gotap
