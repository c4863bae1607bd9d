#include "core/sys/timing.h"

#include <time.h>

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

// CPU time of the whole process (every thread), in ms: on a loaded machine the wall clock
// says more about the other programs than about gotap.
double cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

}  // namespace

void timing_mark(std::string_view phase) {
  if (!g_on) return;
  static std::mutex mu;
  static Clock::time_point last = g_start;
  static double last_cpu = 0;
  std::lock_guard lock(mu);
  const auto now = Clock::now();
  const double cpu = cpu_ms();
  auto ms = [](Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); };
  std::fprintf(stderr, "gotap: timing: %.*s +%.1f ms, cpu +%.1f ms (%.1f ms, cpu %.1f ms)\n",
               static_cast<int>(phase.size()), phase.data(), ms(now - last), cpu - last_cpu,
               ms(now - g_start), cpu);
  last = now;
  last_cpu = cpu;
}

}  // namespace gotap::sys
