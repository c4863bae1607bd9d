#include "core/sys/huge_pages.h"

#include "core/sys/timing.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

namespace gotap::sys {

namespace {

// Set only across the exec: "u" when GLIBC_TUNABLES was unset, "s" and its value when set.
constexpr const char* kWas = "GOTAP_RERUN_GLIBC_TUNABLES";
constexpr const char* kTunable = "glibc.malloc.hugetlb=1";
bool rerun = false;

bool huge_pages_on() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string s;
  std::getline(f, s);
  return s.find("[always]") != std::string::npos || s.find("[madvise]") != std::string::npos;
}

// GLIBC_TUNABLES as `was` says it was.
void put_back(const char* was) {
  if (was[0] == 's')
    setenv("GLIBC_TUNABLES", was + 1, 1);
  else
    unsetenv("GLIBC_TUNABLES");
  unsetenv(kWas);
  unsetenv(kRerunStartVar);
}

}  // namespace

void rerun_with_huge_pages(char** argv) {
  if (const char* was = getenv(kWas)) {
    put_back(std::string(was).c_str());
    rerun = true;
    return;
  }
  const char* off = getenv("GOTAP_HUGE_PAGES");
  if (off && std::strcmp(off, "0") == 0) return;
  const char* tunables = getenv("GLIBC_TUNABLES");
  if (tunables && std::strstr(tunables, "glibc.malloc.hugetlb")) return;
  if (!huge_pages_on()) return;
  const std::string was = tunables ? std::string("s") + tunables : std::string("u");
  const std::string now =
      tunables && *tunables ? std::string(tunables) + ":" + kTunable : std::string(kTunable);
  if (setenv(kWas, was.c_str(), 1) == 0 && setenv("GLIBC_TUNABLES", now.c_str(), 1) == 0 &&
      setenv(kRerunStartVar, std::to_string(process_start_ns()).c_str(), 1) == 0)
    execv("/proc/self/exe", argv);
  put_back(was.c_str());  // not run again: gotap goes on as it is
}

bool heap_in_huge_pages() {
  return rerun;
}

}  // namespace gotap::sys
