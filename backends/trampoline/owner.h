// Which gotap placed a region of trampolines: its header (patch_set.h) holds, after kMagic,
// that gotap's pid and start time. A later gotap that finds jumps into a region takes them
// for its own to replace only when their owner is gone: a live one's (a second gotap started
// beside the first) are another tracer's, left alone.
#pragma once

#include <sys/types.h>

#include <cstdint>

namespace gotap::trampoline {

// Where in the header the owner goes (after kMagic and its NUL).
constexpr uint64_t kOwnerOffset = 24;

struct Owner {
  uint64_t pid = 0;
  uint64_t start = 0;  // /proc/PID/stat's starttime (clock ticks since boot): pids are reused
};

// This process.
Owner self_owner();
// Whether that process still runs.
bool owner_alive(const Owner& o);

}  // namespace gotap::trampoline
