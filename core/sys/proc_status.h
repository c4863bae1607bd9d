// One line of /proc/PID[/task/TID]/status: the ptrace backend reads TracerPid, State and the
// signal masks there, eBPF whether a ptrace tracer is attached, the frontend a thread's Tgid.
// And the fields of /proc/PID/stat, whose command name may hold spaces and parentheses.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gotap::sys {

// The value of `field` ("TracerPid", "State", "SigPnd", ...) of thread `tid` of `pid` (tid 0:
// the process's), its blanks skipped; nullopt when the thread is gone or has no such line.
std::optional<std::string> status_value(pid_t pid, pid_t tid, std::string_view field);

// The fields of /proc/PID/stat, each at its number in proc(5) (3: the state, 14: utime, 22:
// starttime, 47: start_brk); those before the state (the pid, the command) are left empty:
// the command may hold spaces and parentheses, so fields are counted after its last `)`.
// Empty when the process is gone.
std::vector<std::string> stat_fields(pid_t pid);

}  // namespace gotap::sys
