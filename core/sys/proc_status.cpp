#include "core/sys/proc_status.h"

#include <fstream>

namespace gotap::sys {

std::optional<std::string> status_value(pid_t pid, pid_t tid, std::string_view field) {
  std::string path = "/proc/" + std::to_string(pid) +
                     (tid ? "/task/" + std::to_string(tid) : std::string()) + "/status";
  std::ifstream f(path);
  for (std::string line; std::getline(f, line);) {
    if (line.size() <= field.size() || line.compare(0, field.size(), field) != 0 ||
        line[field.size()] != ':')
      continue;
    const size_t v = line.find_first_not_of(" \t", field.size() + 1);
    return v == std::string::npos ? std::string() : line.substr(v);
  }
  return std::nullopt;
}

}  // namespace gotap::sys
