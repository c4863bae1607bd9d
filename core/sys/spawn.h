// Starting a program for a tracer: fork, stop before the program's first instruction, exec.
// Both backends launch `-- CMD ARGS` this way; the front end resolves CMD as the child will,
// so that the file planned from is the file run.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "core/model/result.h"
#include "core/sys/fd.h"

namespace gotap::sys {

// NAME's path the way execvp finds it: NAME itself when it has a slash, else the first
// executable regular file NAME in a PATH directory. "" when there is none.
std::string find_on_path(const std::string& name);

// How the child waits for its tracer.
enum class TraceStop {
  // PTRACE_TRACEME, then exec: the exec stops it with a SIGTRAP, its parent as tracer.
  AtExec,
  // SIGSTOP to itself before exec, so that a tracer can PTRACE_SEIZE it and see the exec
  // as PTRACE_EVENT_EXEC; it execs once it gets SIGCONT.
  BeforeExec,
};

// A child on its way to exec. The child inherits the caller's signal mask, dispositions and
// descriptors without CLOEXEC, as with a plain fork + exec: what a launched program inherits
// is the front end's business (civetweb's SIGPIPE, frontends/prometheus_exporter.cpp).
struct ExecChild {
  pid_t pid = 0;
  // The write end is closed by a successful exec; a failed one writes errno to it.
  Fd exec_errors;

  // 0 once the child has exec'd, else the errno its exec failed with (it then exits with 127).
  // Blocks until one or the other has happened: with BeforeExec, only after SIGCONT.
  int exec_error();
};

// Keeps the environment as it is now, for every program fork_exec launches from then on: main
// calls it first, before gotap sets anything in its own (DEBUGINFOD_TIMEOUT for
// libdebuginfod), so that the traced program gets the user's environment, not gotap's.
void keep_launch_environment();

// Forks a child that runs argv[0] (resolved with find_on_path) with argv once traced as `how`
// says, in the environment keep_launch_environment kept (else the current one). Errors: no
// command, no such program (ENOENT), fork failures.
Result<ExecChild> fork_exec(const std::vector<std::string>& argv, TraceStop how);

// How long a launched program has to end after SIGTERM when its trace ends (end_child).
constexpr int kEndGraceMs = 1000;

// How a launched program ended when its trace did.
struct EndedChild {
  int status = 0;          // its wait status
  bool signalled = false;  // false: it had exited on its own before
};

// Ends a program gotap launched (its child), as `perf record -- CMD` and `strace -- CMD` do
// when the trace ends before it: SIGTERM (and SIGCONT, for a program stopped by job control),
// SIGKILL if it is still there `grace_ms` later; then reaps it. Both backends call it once
// their probes are removed (docs/cli.md, "Targets"). nullopt when pid is no child of ours,
// or was reaped already.
std::optional<EndedChild> end_child(pid_t pid, int grace_ms = kEndGraceMs);

}  // namespace gotap::sys
