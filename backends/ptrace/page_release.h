// Whether gotap's scratch page can leave the tracee at a normal detach. Each ptrace attach
// maps one (a whole binary's is 7 MiB, written, so resident); kept, they added up in a
// long-lived program attached to again and again, towards vm.max_map_count and out of the
// 2 GiB around the image that the copies must sit in. With the int3s gone and the program's
// SIGTRAP handler back, no thread can enter the page again; one can only be in it, or come
// back to it from a signal handler that interrupted a copy (the kernel's signal frame, on
// the stack above the handler's, holds the pc to return to). Both are looked for while
// every thread is stopped; when in doubt the page stays, as before.
#pragma once

#include <sys/types.h>
#include <sys/user.h>

#include <cstdint>
#include <span>

#include "backends/ptrace/memory.h"

namespace gotap::ptrace {

// How much of a thread's stack above its stack pointer is searched for a pc in the page. A
// signal frame lies at most a handler's depth above it: Go runs its handler on a 32 KiB
// signal stack; a C thread without one runs it on its own stack.
inline constexpr uint64_t kReturnScan = 128 * 1024;

// Whether an aligned 8-byte word of `bytes` lies in [lo, hi).
bool has_word_in(std::span<const uint8_t> bytes, uint64_t lo, uint64_t hi);

// Whether a thread's registers are those a clone gives its child, which has run no
// instruction yet: rax 0 right after a `syscall` whose number (orig_rax) is clone or clone3.
// A sigreturn since would have set orig_rax to -1. Nothing above its stack pointer is its
// own: Go's clone starts it at the top of a new g0 stack, heap memory where freed stacks
// left signal frames (a thread resumed from its first stop, not yet given a CPU under load,
// kept gotap's page 1 attach in 30 that way).
bool at_clone_child_start(const user_regs_struct& r, TraceeMemory& mem);

// Whether stopped thread `tid` of mem's process may still run code in [lo, hi): its pc is
// there, or it blocks a signal (it may be in a handler) and a word of the kReturnScan bytes
// from its stack pointer up is there (what cannot be read is not searched: the end of the
// stack's mapping). A false positive only keeps the page. A handler installed with
// SA_NODEFER and an empty mask is not seen. `stack_hi`, when known (the top of the Go stack
// that holds the thread's stack pointer: its g's, or its signal stack's in a handler), ends
// the search there: above it lies other memory, where other threads' stale signal frames
// kept the page after 1 attach in 10 to a program whose threads come and go (a thread in
// mexit blocks every signal).
bool may_return_into(pid_t tid, TraceeMemory& mem, uint64_t lo, uint64_t hi, uint64_t stack_hi = 0);

}  // namespace gotap::ptrace
