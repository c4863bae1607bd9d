// One line of /proc/PID[/task/TID]/status: the ptrace backend reads TracerPid, State and the
// signal masks there, eBPF whether a ptrace tracer is attached, the frontend a thread's Tgid.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>

namespace gotap::sys {

// The value of `field` ("TracerPid", "State", "SigPnd", ...) of thread `tid` of `pid` (tid 0:
// the process's), its blanks skipped; nullopt when the thread is gone or has no such line.
std::optional<std::string> status_value(pid_t pid, pid_t tid, std::string_view field);

}  // namespace gotap::sys
