// Self-restoring syscall injection (docs/design.md, "When gotap dies"). gotap runs a system
// call in a thread of the program by pointing the thread at a stub: `syscall`, then an
// immediate load of every register the injection borrows (the syscall's number and
// arguments, and rcx and r11, which `syscall` clobbers) with the value the thread had, then
// an absolute jump back to where it was. The tracer stops the thread at the syscall's entry
// and exit (PTRACE_SYSCALL with PTRACE_O_TRACESYSGOOD: such stops raise no signal), reads the
// result and puts the registers back itself. A tracer that dies at any step leaves the thread
// to finish the stub, and it carries on as if nothing happened. Nothing is written to the
// stack (cgo code may have a red zone below rsp; a goroutine's stack may end just below it),
// and no single-step is involved (a tracer that dies mid-step leaves TF set, and the next
// instruction raises a SIGTRAP that Go's handler dies of).
//
// The stub lives in the unused end of the vDSO's last page, past its ELF image: memory that
// exists before gotap has mapped anything, that no program code runs, and that is not the
// program's file (so its code stays equal to its file's whatever happens). gotap zeroes it
// again after each injection.
#pragma once

#include <sys/types.h>
#include <sys/user.h>

#include <array>
#include <cstdint>

#include "core/binary/rtype.h"

namespace gotap::ptrace {

constexpr size_t kStubSize = 128;
// Where the stub's `syscall` ends: the pc of its syscall's entry and exit stops.
constexpr uint64_t kStubSyscallEnd = 2;

// Where a thread stopped with `regs` resumes, made explicit: a system call interrupted by the
// stop, that the kernel would restart on resume (rax -ERESTART*, orig_rax its number), is
// rewound to its `syscall` instruction with its number in rax, as the kernel does. orig_rax
// is -1: nothing is left for the kernel to restart.
user_regs_struct resume_point(const user_regs_struct& regs);

// The stub that runs a syscall and then resumes at `back` (a resume_point).
std::array<uint8_t, kStubSize> syscall_stub(const user_regs_struct& back);

// The address of kStubSize unused bytes at the end of the process's vDSO, 0 when there is no
// vDSO or no room in it.
uint64_t find_stub_area(pid_t pid, MemoryReader& mem);

}  // namespace gotap::ptrace
