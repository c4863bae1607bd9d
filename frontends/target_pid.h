// What `-p PID` names: a process, to be read and attached to. A thread id (as `top -H` shows
// it) names its thread's process, for both backends; a process the user may not read gets
// what it takes to trace it, not only the kernel's "Permission denied".
#pragma once

#include <string>

#include "core/model/result.h"

namespace gotap::cli {

// The process of `pid` (its Tgid), after a check that its executable can be read. When `pid`
// is a thread of another process, `note` gets one line saying which process is traced.
// BadInput: no such process, or not allowed to read it (the message names the privileges).
Result<int> target_process(int pid, std::string* note);

}  // namespace gotap::cli
