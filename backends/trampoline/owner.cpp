#include "backends/trampoline/owner.h"

#include <unistd.h>

#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

namespace gotap::trampoline {

namespace {

// The 22nd field of /proc/PID/stat, counted after the command's closing parenthesis (the
// command may hold spaces and parentheses); 0 when the process is gone.
uint64_t start_time(uint64_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos) return 0;
  std::istringstream fields(stat.substr(paren + 1));
  std::string f;
  // Field 3 (state) is the first after the parenthesis; starttime is field 22.
  for (int i = 3; i <= 22; ++i)
    if (!(fields >> f)) return 0;
  return std::stoull(f);
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
