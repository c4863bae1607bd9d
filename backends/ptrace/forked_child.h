// The processes a traced program forks (fork, libc's fork(), clone without CLONE_VM): each
// starts as a copy of the program's memory, int3s included, and nothing traces it to take
// their SIGTRAPs. gotap has the kernel stop each one before it runs (PTRACE_O_TRACEFORK),
// puts the original bytes back in its copy of the text and lets it go (docs/design.md,
// "The children of a traced program").
#pragma once

#include <sys/types.h>

#include <optional>

namespace gotap::ptrace {

// Whether task `tid` is a thread of process `pid`, and not a process of its own.
bool is_thread_of(pid_t pid, pid_t tid);

// Whether processes a and b share one memory (a clone with CLONE_VM), from kcmp(2);
// nullopt when the kernel cannot say.
std::optional<bool> same_memory(pid_t a, pid_t b);

}  // namespace gotap::ptrace
