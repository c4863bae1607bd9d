// The calling thread at the highest CPU priority for one scope: for the end of a trace, whose
// work (removing 100,000s of uprobes, in the kernel, on this thread) competes with the traced
// program and whatever loads it, at the default priority for seconds.
#pragma once

#include <sys/types.h>

namespace gotap::sys {

class UrgentThread {
 public:
  // Best effort: raising needs CAP_SYS_NICE (root has it); without it nothing changes.
  UrgentThread();
  // Puts back the thread's priority.
  ~UrgentThread();
  UrgentThread(const UrgentThread&) = delete;
  UrgentThread& operator=(const UrgentThread&) = delete;
  bool raised() const { return raised_; }

 private:
  id_t tid_ = 0;
  int old_ = 0;
  bool raised_ = false;
};

// Puts the process's main thread (where the backends' loops run) at the highest priority,
// for good: for a stop signal's handler (a bare system call, errno kept), as gotap starts
// to end. Behind a busy tracee and its load, at the default priority, noticing the stop
// and the exit itself took up to 0.4 s each (docs/benchmarks.md, "Ending a whole-binary
// trace under load"). Without CAP_SYS_NICE it changes nothing.
void hurry_main_thread();

}  // namespace gotap::sys
