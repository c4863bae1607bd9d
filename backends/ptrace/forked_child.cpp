#include "backends/ptrace/forked_child.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <string>

namespace gotap::ptrace {

bool is_thread_of(pid_t pid, pid_t tid) {
  if (tid == pid) return true;
  const std::string task = "/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid);
  return access(task.c_str(), F_OK) == 0;
}

std::optional<bool> same_memory(pid_t a, pid_t b) {
  constexpr int kKcmpVm = 1;  // KCMP_VM (linux/kcmp.h)
  const long r = syscall(SYS_kcmp, a, b, kKcmpVm, 0, 0);
  if (r < 0) return std::nullopt;
  return r == 0;
}

}  // namespace gotap::ptrace
