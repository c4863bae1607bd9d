#include "backends/ptrace/cpu_follow.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

namespace gotap::ptrace {

int stat_processor(const char* line, size_t n) {
  // The command name (field 2) may hold spaces and parentheses: fields are counted from the
  // last ')'. Field 3 follows it, so field 39 is 36 spaces further.
  const char* end = line + n;
  const char* p = static_cast<const char*>(memrchr(line, ')', n));
  if (!p) return -1;
  ++p;
  for (int spaces = 0; p < end; ++p) {
    if (*p != ' ') continue;
    if (++spaces == 37) break;
  }
  if (p >= end) return -1;
  ++p;
  int cpu = 0;
  bool any = false;
  for (; p < end && *p >= '0' && *p <= '9'; ++p) {
    cpu = cpu * 10 + (*p - '0');
    any = true;
    if (cpu >= CPU_SETSIZE) return -1;
  }
  return any ? cpu : -1;
}

CpuFollower::CpuFollower() {
  const char* e = getenv("GOTAP_PTRACE_FOLLOW_CPU");
  enabled_ = e && std::strcmp(e, "1") == 0;
  if (enabled_) {
    saved_ = sched_getaffinity(0, sizeof orig_, &orig_) == 0;
    enabled_ = saved_;
  }
}

CpuFollower::~CpuFollower() {
  for (auto& [tid, fd] : fds_) close(fd);
  if (saved_ && cpu_ >= 0) sched_setaffinity(0, sizeof orig_, &orig_);
}

int CpuFollower::stat_fd(pid_t pid, pid_t tid) {
  auto it = fds_.find(tid);
  if (it != fds_.end()) return it->second;
  std::string path = "/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/stat";
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  fds_.emplace(tid, fd);
  return fd;
}

void CpuFollower::forget(pid_t tid) {
  if (tid == last_tid_) last_tid_ = 0;
  auto it = fds_.find(tid);
  if (it == fds_.end()) return;
  close(it->second);
  fds_.erase(it);
}

void CpuFollower::follow(pid_t pid, pid_t tid) {
  if (!enabled_) return;
  if (tid == last_tid_ && ++since_check_ < kRecheck) return;
  last_tid_ = tid;
  since_check_ = 0;
  int fd = stat_fd(pid, tid);
  if (fd < 0) return;
  char buf[1024];
  ssize_t n = pread(fd, buf, sizeof buf, 0);
  if (n <= 0) {
    forget(tid);
    return;
  }
  int cpu = stat_processor(buf, size_t(n));
  // Only to a CPU the tracer was allowed on to begin with (cgroups, taskset).
  if (cpu < 0 || cpu == cpu_ || !CPU_ISSET(cpu, &orig_)) return;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  if (sched_setaffinity(0, sizeof one, &one) == 0) {
    cpu_ = cpu;
    ++moves_;
  }
}

}  // namespace gotap::ptrace
