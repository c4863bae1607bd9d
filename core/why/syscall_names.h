// x86-64 system call names by number, for --why's `syscalls` (generated at build time from
// the system's <asm/unistd_64.h>, cmake/gen_syscall_names.cmake).
#pragma once

#include <cstdint>
#include <string>

namespace gotap::why {

// The calls a backend could not tell apart (ptrace keeps up to 16 numbers per thread between
// two of its stops; the rest are one part): named "other".
constexpr uint64_t kOtherSyscalls = ~uint64_t{0};

// "nanosleep" for 35; "syscall_N" for a number the header did not name; "other" for
// kOtherSyscalls.
std::string syscall_name(uint64_t nr);

}  // namespace gotap::why
