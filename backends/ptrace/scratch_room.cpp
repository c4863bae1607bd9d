#include "backends/ptrace/scratch_room.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <string>
#include <utility>

#include "core/sys/proc_status.h"

namespace gotap::ptrace {

namespace {

constexpr uint64_t kPage = 4096;
// rel32 reaches [next - 2^31, next + 2^31): keep a MiB clear of either edge.
constexpr uint64_t kReach = (1ull << 31) - (1ull << 20);

uint64_t page_down(uint64_t a) {
  return a & ~(kPage - 1);
}
uint64_t page_up(uint64_t a) {
  return (a + kPage - 1) & ~(kPage - 1);
}

}  // namespace

ScratchRoom ScratchRoom::of(int pid, uint64_t image_lo, uint64_t image_hi) {
  ScratchRoom room;
  room.image_lo = image_lo;
  room.image_hi = image_hi;
  // start_brk is field 47 of /proc/PID/stat, the 45th after the command name's closing
  // parenthesis (the name may hold spaces and parentheses). Field 48 is arg_start, on the
  // stack, not the current brk: taken for brk, it left no room above the heap at all, and a
  // whole binary's scratch failed whenever the heap started within 7 MiB of the image.
  if (const auto stat = sys::stat_fields(pid); stat.size() > 47)
    room.brk_start = std::strtoull(stat[47].c_str(), nullptr, 10);
  // The current brk: the end of the [heap] mapping (none before the first sbrk).
  room.brk = room.brk_start;
  for (const sys::Mapping& m : sys::read_maps(pid))
    if (m.path == "[heap]") room.brk = std::max(room.brk, m.end);
  std::ifstream min("/proc/sys/vm/mmap_min_addr");
  uint64_t m = 0;
  if (min >> m && m > room.min_addr) room.min_addr = m;
  return room;
}

bool scratch_within_reach(uint64_t base, uint64_t size, const ScratchRoom& room) {
  if (base >= room.image_lo) return base + size - room.image_lo <= kReach;
  return room.image_hi - base <= kReach;
}

std::vector<uint64_t> scratch_spots(const std::vector<sys::Mapping>& maps, const ScratchRoom& room,
                                    uint64_t size, size_t max) {
  if (size == 0 || room.image_hi <= room.image_lo || room.image_hi - room.image_lo >= kReach)
    return {};
  // The window every byte of the mapping may occupy.
  const uint64_t wlo = std::max(room.min_addr + kScratchGuard,
                                room.image_hi > kReach ? page_up(room.image_hi - kReach) : 0);
  const uint64_t whi = room.image_lo + kReach;
  // Free ranges in the window, each shrunk by the guard at both ends.
  std::vector<std::pair<uint64_t, uint64_t>> free;
  uint64_t at = wlo;
  auto gap = [&](uint64_t lo, uint64_t hi) {
    lo = std::max(lo, wlo);
    hi = std::min(hi, whi);
    if (hi > lo) free.push_back({lo, hi});
  };
  for (const sys::Mapping& m : maps) {
    if (m.end <= at) continue;
    if (m.start >= kScratchGuard && m.start - kScratchGuard > at) gap(at, m.start - kScratchGuard);
    at = std::max(at, m.end + kScratchGuard);
    if (at >= whi) break;
  }
  gap(at, whi);
  // The heap's room is no free range: brk grows into it.
  if (room.brk_start) {
    const uint64_t hlo = room.brk_start > kScratchGuard ? room.brk_start - kScratchGuard : 0;
    const uint64_t hhi = std::max(room.brk, room.brk_start) + kScratchBrkRoom;
    std::vector<std::pair<uint64_t, uint64_t>> cut;
    for (auto [lo, hi] : free) {
      if (hi <= hlo || lo >= hhi) {
        cut.push_back({lo, hi});
        continue;
      }
      if (lo < hlo) cut.push_back({lo, hlo});
      if (hi > hhi) cut.push_back({hhi, hi});
    }
    free = std::move(cut);
  }
  // In each range, the spot closest to the image.
  std::vector<std::pair<uint64_t, uint64_t>> spots;  // distance, address
  for (auto [lo, hi] : free) {
    uint64_t base;
    if (hi <= room.image_lo) {
      if (hi < size) continue;
      base = page_down(hi - size);
      if (base < lo) continue;
      spots.push_back({room.image_lo - (base + size), base});
    } else {
      base = page_up(lo);
      if (base + size > hi || base < room.image_hi) continue;
      spots.push_back({base - room.image_hi, base});
    }
  }
  std::sort(spots.begin(), spots.end());
  std::vector<uint64_t> out;
  for (auto [d, base] : spots) {
    if (out.size() == max) break;
    out.push_back(base);
  }
  return out;
}

}  // namespace gotap::ptrace
