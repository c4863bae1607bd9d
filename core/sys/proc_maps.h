// A process's mappings from /proc/PID/maps, and where it loaded its executable. /proc is
// input like any other: a line that does not parse is skipped, never thrown on.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gotap::sys {

struct Mapping {
  uint64_t start = 0, end = 0;
  std::string perms;  // "r-xp"
  uint64_t offset = 0;
  std::string dev;  // "fd:01", as the kernel prints it
  uint64_t inode = 0;
  std::string path;  // as the kernel prints it: may hold spaces or end in " (deleted)"
};

// One line of /proc/PID/maps; nullopt when malformed.
std::optional<Mapping> parse_maps_line(std::string_view line);
// Every mapping of pid, in address order; empty when the file cannot be read.
std::vector<Mapping> read_maps(int pid);

// The load bias of pid's executable: where it was loaded minus where it was linked (0 unless
// PIE). The executable's mapping of the page holding file offset `first_load_offset` is
// matched with the first PT_LOAD segment, linked at `first_load_vaddr`. Works from the exec
// stop on (the kernel maps the executable before the first instruction, whatever the
// interpreter) and for a file deleted or replaced since. nullopt when no mapping matches.
std::optional<uint64_t> load_bias(int pid, uint64_t first_load_vaddr,
                                  uint64_t first_load_offset = 0);

// Where pid's executable starts, as the kernel gave it to the program (AT_ENTRY in
// /proc/PID/auxv): code that runs once, before anything gotap traces. nullopt when unreadable.
std::optional<uint64_t> entry_point(int pid);

}  // namespace gotap::sys
