#include "core/sys/test_delay.h"

#include <poll.h>

#include <cstdio>
#include <cstdlib>

namespace gotap::sys {

void test_delay(const char* name, const char* what) {
  const char* e = std::getenv(name);
  if (!e || !*e) return;
  const long ms = std::strtol(e, nullptr, 10);
  if (ms <= 0 || ms > 60000) return;
  std::fprintf(stderr, "gotap: test: %s in %ld ms\n", what, ms);
  std::fflush(stderr);
  poll(nullptr, 0, static_cast<int>(ms));
}

}  // namespace gotap::sys
