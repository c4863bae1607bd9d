// Child processes for the front end: running one with its output, exit status and wall time
// under a time limit, so a stuck peer cannot hang `gotap bench`. (Finding a program on PATH:
// core/sys/spawn.h.)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gotap::cli {

struct ChildRun {
  bool started = false;
  bool timed_out = false;
  int exit_code = -1;  // -1 when killed by a signal
  std::string out, err;
  uint64_t wall_ns = 0;
};

// Runs argv (no shell) with stdin from /dev/null; kills it after timeout_s.
ChildRun run_child(const std::vector<std::string>& argv, int timeout_s);

}  // namespace gotap::cli
