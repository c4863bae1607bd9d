// The process the eBPF backend traces: one attached to by pid, one it launches (stopped
// after exec until the probes are live), or none (--all).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/model/result.h"
#include "core/sys/fd.h"

namespace gotap::ebpf {

class TargetProcess {
 public:
  TargetProcess() = default;
  TargetProcess(const TargetProcess&) = delete;
  TargetProcess& operator=(const TargetProcess&) = delete;
  TargetProcess(TargetProcess&& o) noexcept;
  TargetProcess& operator=(TargetProcess&& o) noexcept;
  ~TargetProcess();

  // Starts argv[0] (resolved through PATH) under PTRACE_TRACEME and waits until the exec
  // has happened: the child is stopped at its first instruction until release().
  static Result<TargetProcess> launch(const std::vector<std::string>& argv);
  // A running process, watched through a pidfd.
  static Result<TargetProcess> attach(int pid);

  int pid() const { return pid_; }
  bool launched() const { return launched_; }
  // Lets a launched child, stopped, run from system call to system call until `done` says
  // so, or max_stops went by (false then; an attached process: done() alone). For what
  // ld.so does before the program's first instruction (libgo's TLS module id): no
  // instruction of the program runs meanwhile.
  Result<bool> run_syscalls_until(const std::function<bool()>& done, int max_stops);
  // Lets a launched child run (ends the ptrace stop); nothing for an attached process.
  Result<void> release();
  // True once the process has exited (reaps a launched child).
  bool exited();
  // Ends a launched child that is still running (sys::end_child: SIGTERM, then SIGKILL after
  // a grace time), or one stopped at its exec that never ran (SIGKILL).
  void terminate();
  int exit_status() const { return exit_status_; }  // wait status of a launched child

 private:
  int pid_ = 0;
  sys::Fd pidfd_;
  bool launched_ = false;
  bool stopped_ = false;
  bool exited_ = false;
  int exit_status_ = 0;
  int pending_signal_ = 0;  // seen at a stop of run_syscalls_until: delivered at release()
};

}  // namespace gotap::ebpf
