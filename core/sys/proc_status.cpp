#include "core/sys/proc_status.h"

#include <fstream>
#include <sstream>

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

std::vector<std::string> stat_fields(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(f, line)) return {};
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return {};
  std::vector<std::string> out(3);
  std::istringstream rest(line.substr(close + 1));
  for (std::string field; rest >> field;) out.push_back(std::move(field));
  return out;
}

}  // namespace gotap::sys
