#include "frontends/target_pid.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/sys/proc_status.h"

namespace gotap::cli {

Result<int> target_process(int pid, std::string* note) {
  // /proc/TID exists for a thread too (unlisted); its Tgid is the process.
  const auto tgid_text = sys::status_value(pid, 0, "Tgid");
  const int tgid = tgid_text ? std::atoi(tgid_text->c_str()) : 0;
  if (tgid <= 0) return make_error("no process with pid {}", pid);
  if (tgid != pid) {
    *note = "pid " + std::to_string(pid) + " is a thread of process " + std::to_string(tgid) +
            ": tracing process " + std::to_string(tgid);
  }
  const std::string exe = "/proc/" + std::to_string(tgid) + "/exe";
  const int fd = open(exe.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 && (errno == EACCES || errno == EPERM))
    return make_error(
        "cannot read {}: {}; tracing a process needs root, or CAP_SYS_PTRACE (and for eBPF "
        "CAP_BPF with CAP_PERFMON)",
        exe, std::strerror(errno));
  if (fd < 0 && errno == ENOENT) return make_error("no process with pid {}", tgid);
  if (fd >= 0) close(fd);
  return tgid;
}

}  // namespace gotap::cli
