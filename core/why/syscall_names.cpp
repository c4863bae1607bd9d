#include "core/why/syscall_names.h"

#include <algorithm>
#include <iterator>
#include <utility>

namespace gotap::why {

namespace {

struct Entry {
  uint64_t nr;
  const char* name;
};

constexpr Entry kNames[] = {
#include "syscall_names_x86_64.inc"
};

}  // namespace

std::string syscall_name(uint64_t nr) {
  if (nr == kOtherSyscalls) return "other";
  // The header lists them in order; a lookup that does not rely on it costs no more here.
  const auto it = std::find_if(std::begin(kNames), std::end(kNames),
                               [nr](const Entry& e) { return e.nr == nr; });
  return it != std::end(kNames) ? it->name : "syscall_" + std::to_string(nr);
}

}  // namespace gotap::why
