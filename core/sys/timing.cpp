#include "core/sys/timing.h"

#include <time.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <utility>

namespace gotap::sys {

namespace {

using Clock = std::chrono::steady_clock;
// Static initialisation: as close to the start of the process as a library gets; in a gotap
// run again (huge_pages.h), the first run's start, so that the figures count from the command.
const Clock::time_point g_start = [] {
  if (const char* e = std::getenv(kRerunStartVar))
    return Clock::time_point(Clock::duration(std::strtoll(e, nullptr, 10)));
  return Clock::now();
}();
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

// Resident and peak resident memory in MB (/proc/self/status VmRSS and VmHWM).
std::pair<long, long> rss_mb() {
  long rss = 0, hwm = 0;
  if (FILE* f = std::fopen("/proc/self/status", "r")) {
    char line[256];
    while (std::fgets(line, sizeof line, f)) {
      std::sscanf(line, "VmRSS: %ld", &rss);
      std::sscanf(line, "VmHWM: %ld", &hwm);
    }
    std::fclose(f);
  }
  return {rss / 1024, hwm / 1024};
}

}  // namespace

uint64_t monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000'000 + uint64_t(ts.tv_nsec);
}

uint64_t thread_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000'000 + uint64_t(ts.tv_nsec);
}

int64_t process_start_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(g_start.time_since_epoch()).count();
}

void timing_mark(std::string_view phase) {
  if (!g_on) return;
  static std::mutex mu;
  static Clock::time_point last = g_start;
  static double last_cpu = 0;
  std::lock_guard lock(mu);
  const auto now = Clock::now();
  const double cpu = cpu_ms();
  auto ms = [](Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); };
  const auto [rss, peak] = rss_mb();
  std::fprintf(stderr, "gotap: timing: %.*s +%.1f ms, cpu +%.1f ms (%.1f ms, cpu %.1f ms)\n",
               static_cast<int>(phase.size()), phase.data(), ms(now - last), cpu - last_cpu,
               ms(now - g_start), cpu);
  // A line of its own, so that scripts reading the timing lines read them as before.
  std::fprintf(stderr, "gotap: memory: %.*s rss %ld MB, peak %ld MB\n",
               static_cast<int>(phase.size()), phase.data(), rss, peak);
  last = now;
  last_cpu = cpu;
}

}  // namespace gotap::sys
