// x86-64 system call names by number, for --why's `syscalls` (generated at build time from
// the system's <asm/unistd_64.h>, cmake/gen_syscall_names.cmake).
#pragma once

#include <cstdint>
#include <string>

namespace gotap::why {

// "nanosleep" for 35; "syscall_N" for a number the header did not name.
std::string syscall_name(uint64_t nr);

}  // namespace gotap::why
