#include "backends/trampoline/owner.h"

#include <unistd.h>

#include <cstdlib>

#include "core/sys/proc_status.h"

namespace gotap::trampoline {

namespace {

// starttime (field 22 of /proc/PID/stat); 0 when the process is gone, or a zombie: a gotap
// killed by a parent that has not reaped it yet reads and writes nothing any more.
uint64_t start_time(uint64_t pid) {
  const auto stat = sys::stat_fields(static_cast<pid_t>(pid));
  if (stat.size() <= 22 || stat[3] == "Z" || stat[3] == "X") return 0;
  return std::strtoull(stat[22].c_str(), nullptr, 10);
}

}  // namespace

Owner self_owner() {
  Owner o;
  o.pid = static_cast<uint64_t>(getpid());
  o.start = start_time(o.pid);
  return o;
}

bool owner_alive(const Owner& o) {
  return o.pid && o.start && start_time(o.pid) == o.start;
}

}  // namespace gotap::trampoline
