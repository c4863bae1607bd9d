#include "core/sys/timing.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace gotap::sys {

namespace {

using Clock = std::chrono::steady_clock;
// Static initialisation: as close to the start of the process as a library gets.
const Clock::time_point g_start = Clock::now();
const bool g_on = [] {
  const char* e = std::getenv("GOTAP_TIMING");
  return e && *e && std::string_view(e) != "0";
}();

}  // namespace

void timing_mark(std::string_view phase) {
  if (!g_on) return;
  static std::mutex mu;
  static Clock::time_point last = g_start;
  std::lock_guard lock(mu);
  const auto now = Clock::now();
  auto ms = [](Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); };
  std::fprintf(stderr, "gotap: timing: %.*s +%.1f ms (%.1f ms)\n", static_cast<int>(phase.size()),
               phase.data(), ms(now - last), ms(now - g_start));
  last = now;
}

}  // namespace gotap::sys
