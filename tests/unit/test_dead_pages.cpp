// backends/trampoline/dead_pages.h: which mappings a gotap may remove from the place its
// short checks' trampolines must take. Only a killed gotap's regions and the counters right
// after them, whichever of the two the place overlaps; anything else there (another
// program's mapping, a live gotap's region) keeps the place taken. No thread is stopped
// here, so none can be in the pages.
#include "backends/trampoline/dead_pages.h"

#include <unistd.h>

#include <gtest/gtest.h>

namespace gotap::trampoline {
namespace {

sys::Mapping mapping(uint64_t start, uint64_t end, const char* perms, uint64_t inode = 0,
                     const char* path = "") {
  sys::Mapping m;
  m.start = start;
  m.end = end;
  m.perms = perms;
  m.inode = inode;
  m.path = path;
  return m;
}

// Two killed gotaps' regions (code at 0x10000 and 0x40000, each with its counters), a live
// one's at 0x80000, and a file's mapping at 0x90000.
const std::vector<sys::Mapping> kMaps = {
    mapping(0x10000, 0x20000, "r-xp"), mapping(0x20000, 0x21000, "rw-s", 7, "/dev/zero (deleted)"),
    mapping(0x40000, 0x50000, "r-xp"), mapping(0x50000, 0x52000, "rw-s", 8, "/dev/zero (deleted)"),
    mapping(0x80000, 0x81000, "r-xp"), mapping(0x90000, 0x91000, "r-xp", 9, "/usr/lib/x.so"),
};

const IsOurs kDead = [](uint64_t to) { return to < 0x80000; };

std::optional<Ranges> in(uint64_t lo, uint64_t hi) {
  ptrace::TraceeMemory mem(getpid());
  return dead_pages_in(kMaps, mem, lo, hi, {}, kDead);
}

TEST(DeadPages, ARegionAndItsCountersGoTogether) {
  EXPECT_EQ(in(0x18000, 0x19000), (Ranges{{0x10000, 0x20000}, {0x20000, 0x21000}}));
  EXPECT_EQ(in(0x20800, 0x30000), (Ranges{{0x10000, 0x20000}, {0x20000, 0x21000}}))
      << "the place overlaps only the counters";
  EXPECT_EQ(
      in(0x1f000, 0x41000),
      (Ranges{{0x10000, 0x20000}, {0x20000, 0x21000}, {0x40000, 0x50000}, {0x50000, 0x52000}}));
  EXPECT_EQ(in(0x30000, 0x38000), Ranges{}) << "a free place: nothing to remove";
}

TEST(DeadPages, AnythingElseKeepsThePlaceTaken) {
  EXPECT_FALSE(in(0x40000, 0x81000)) << "a live gotap's region";
  EXPECT_FALSE(in(0x50000, 0x91000)) << "a file's mapping";
}

}  // namespace
}  // namespace gotap::trampoline
