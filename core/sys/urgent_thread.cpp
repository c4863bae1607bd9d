#include "core/sys/urgent_thread.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

namespace gotap::sys {

// Linux applies PRIO_PROCESS with a thread id to that thread alone: the others keep theirs.
UrgentThread::UrgentThread() : tid_(static_cast<id_t>(syscall(SYS_gettid))) {
  errno = 0;
  old_ = getpriority(PRIO_PROCESS, tid_);
  if (errno != 0 || old_ <= -20) return;
  raised_ = setpriority(PRIO_PROCESS, tid_, -20) == 0;
}

UrgentThread::~UrgentThread() {
  if (raised_) setpriority(PRIO_PROCESS, tid_, old_);
}

void hurry_main_thread() {
  const int saved = errno;
  syscall(SYS_setpriority, PRIO_PROCESS, getpid(), -20);
  errno = saved;
}

}  // namespace gotap::sys
