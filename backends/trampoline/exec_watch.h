// Whether a process ran exec, told by the kernel's process events connector (netlink,
// CN_IDX_PROC; root) rather than by looking at the process: a program that execs and exits
// within one of gotap's polls would otherwise read as one that exited. The trampoline
// backend runs detached, so no ptrace event tells it.
#pragma once

#include <sys/types.h>

#include "core/sys/fd.h"

namespace gotap::trampoline {

class ExecWatch {
 public:
  // Listens from now on; false (and then saw_exec only ever false) when the connector is not
  // there or not allowed.
  bool start(pid_t pid);
  // The socket to poll for readiness (-1 when not started).
  int fd() const { return fd_.get(); }
  // Reads what has arrived, without waiting; whether pid ran exec since start.
  bool saw_exec();

 private:
  sys::Fd fd_;
  pid_t pid_ = 0;
  bool exec_ = false;
};

}  // namespace gotap::trampoline
