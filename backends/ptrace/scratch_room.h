// Where the scratch mapping (breakpoints.h) goes in the tracee. Its out-of-line copies of
// RIP-relative instructions must reach what they address with a rel32, so the mapping lies
// within 2 GiB of the whole executable image. Below the image is the first choice, as close
// as it fits; a non-PIE binary at 0x400000 has only 4 MiB there, less than a whole binary's
// copies (caddy: 145,589 sites, 7 MiB), so above the image is the next: between its last
// mapping and the brk heap's start (the heap only grows up), or above the heap with room
// left for it to grow. Nothing is placed next to another mapping (a guard gap), where a
// neighbour could merge with it or grow into it.
#pragma once

#include <cstdint>
#include <vector>

#include "core/sys/proc_maps.h"

namespace gotap::ptrace {

struct ScratchRoom {
  uint64_t image_lo = 0, image_hi = 0;  // every PT_LOAD of the executable, at run time
  uint64_t brk_start = 0, brk = 0;      // the heap, from /proc/PID/stat (0: unknown)
  uint64_t min_addr = 0x10000;          // vm.mmap_min_addr

  // The process's heap and the system's lowest address for the image [lo, hi).
  static ScratchRoom of(int pid, uint64_t image_lo, uint64_t image_hi);
};

constexpr uint64_t kScratchGuard = 0x10000;         // between the mapping and any neighbour
constexpr uint64_t kScratchBrkRoom = 256ull << 20;  // left above the heap for it to grow

// Whether every byte of [base, base + size) reaches every byte of the image with a rel32.
bool scratch_within_reach(uint64_t base, uint64_t size, const ScratchRoom& room);

// Page-aligned addresses for a mapping of `size` bytes that are free in `maps` (in address
// order), within reach, clear of the heap's room: the closest to the image first, at most
// `max` of them (the next is tried when one is taken meanwhile).
std::vector<uint64_t> scratch_spots(const std::vector<sys::Mapping>& maps, const ScratchRoom& room,
                                    uint64_t size, size_t max = 8);

}  // namespace gotap::ptrace
