// Where gccgo programs keep their goroutine's g (core/plan/gccgo_g.h), against what the
// toolchain itself wrote: libgo's own DWARF for the goid's offset in its g, readelf's
// relocations for runtime.g's GOT pair in libgo.so, and objdump's disassembly of
// runtime.getg for the FS offset the linker chose in a program with libgo linked in.
#include <elf.h>

#include <cstdint>
#include <map>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "core/binary/elf_file.h"
#include "core/plan/gccgo_binary.h"
#include "core/plan/gccgo_g.h"
#include "tests/unit/fixtures.h"

namespace gotap {
namespace {

const std::string kLibgo = "/usr/lib/x86_64-linux-gnu/libgo.so.21";

std::string static_fixture() {
  return std::string(GOTAP_GCCGO_FIXTURES_DIR) + "/static/calls";
}

// The goid member's offset in libgo's `struct g`, as its DWARF says (readelf).
TEST(GccgoG, GoidOffsetIsLibgosOwnDwarf) {
  if (!testing::file_exists(kLibgo)) GTEST_SKIP() << kLibgo << " absent (libgo21)";
  auto r = testing::run_command(
      {"sh", "-c",
       "readelf --debug-dump=info " + kLibgo +
           " 2>/dev/null | awk '/DW_TAG_structure_type/{s=0} /DW_AT_name *: g$/{s=1} "
           "s && /DW_AT_name.*: goid$/{m=1} m && /data_member_location/{print $NF; exit}'"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_FALSE(r.out.empty()) << "libgo's DWARF has no struct g with a goid";
  auto off = libgo_goid_offset(libgo_gcc_major("libgo.so.21"));
  ASSERT_TRUE(off.has_value());
  EXPECT_EQ(*off, std::stoul(r.out));
}

// runtime.g's R_X86_64_DTPMOD64 slot in libgo.so, as readelf lists the relocation.
TEST(GccgoG, TlsModuleSlotIsReadelfsRelocation) {
  if (!testing::file_exists(kLibgo)) GTEST_SKIP() << kLibgo << " absent (libgo21)";
  auto r = testing::run_command({"sh", "-c",
                                 "readelf -rW " + kLibgo +
                                     " | awk '$3 == \"R_X86_64_DTPMOD64\" && $5 == "
                                     "\"runtime.g\" {print $1; exit}'"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_FALSE(r.out.empty()) << "readelf lists no DTPMOD64 relocation of runtime.g";
  auto lib = ElfFile::open(kLibgo);
  ASSERT_TRUE(lib) << lib.error().what();
  auto slot = tls_module_slot(**lib, "runtime.g");
  ASSERT_TRUE(slot.has_value());
  EXPECT_EQ(*slot, std::stoull(r.out, nullptr, 16));
  EXPECT_FALSE(tls_module_slot(**lib, "runtime.nosuchvar").has_value());
}

// libgo linked in: the g pointer's offset from FS base is the one the linker put in
// runtime.getg's `mov %fs:OFFSET, %rax`.
TEST(GccgoG, LinkedInOffsetIsTheLinkers) {
  if (!testing::file_exists(static_fixture()))
    GTEST_SKIP() << "no gccgo fixture " << static_fixture() << " (gccgo-12 absent)";
  auto r =
      testing::run_command({"sh", "-c",
                            "objdump -d --no-show-raw-insn " + static_fixture() +
                                " | awk '/<runtime.getg>:/{f=1; next} f && /%fs:/{print; exit}'"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const size_t at = r.out.find("%fs:0x");
  ASSERT_NE(at, std::string::npos) << r.out;
  const int64_t want = int64_t(std::stoull(r.out.substr(at + 6), nullptr, 16));
  auto bin = GccgoBinary::open(static_fixture());
  ASSERT_TRUE(bin) << bin.error().what();
  auto plan = (*bin)->plan({"main.Add"});
  ASSERT_TRUE(plan) << plan.error().what();
  EXPECT_EQ(plan->gccgo_g.tls, GccgoG::Tls::Exec);
  EXPECT_EQ(plan->gccgo_g.fs_offset, want);
  EXPECT_EQ(plan->gccgo_g.g_goid, 56u);
  EXPECT_TRUE(plan->has_goids());
}

// A libgo whose g gotap does not know reads no goid, and says which.
TEST(GccgoG, UnknownLibgoIsNamed) {
  auto elf = ElfFile::open("/proc/self/exe");  // any ELF file: only the facts are read
  ASSERT_TRUE(elf) << elf.error().what();
  GccgoFacts facts;
  facts.gccgo = true;
  facts.libgo = "libgo.so.99";
  GccgoG g = place_gccgo_g(**elf, facts, 0);
  EXPECT_EQ(g.tls, GccgoG::Tls::None);
  EXPECT_NE(g.why_not.find("libgo.so.99"), std::string::npos) << g.why_not;
  facts.libgo = "libgo.so.21";
  EXPECT_EQ(place_gccgo_g(**elf, facts, 0).tls, GccgoG::Tls::Module);
  facts.libgo.clear();
  EXPECT_EQ(place_gccgo_g(**elf, facts, 13).tls, GccgoG::Tls::None);
}

// The g pointer's address through a thread's DTV: dtv = *(FS + 8), block = dtv[modid].
TEST(GccgoG, SlotThroughTheDtv) {
  std::map<uint64_t, uint64_t> mem = {{0x7000 + 8, 0x9000}, {0x9000 + 3 * 16, 0xa000}};
  auto read = [&](uint64_t at, uint64_t* v) {
    auto it = mem.find(at);
    if (it == mem.end()) return false;
    *v = it->second;
    return true;
  };
  GccgoGAt at;
  at.dtv = true;
  at.modid = 3;
  at.dtpoff = 0x10;
  EXPECT_EQ(gccgo_g_slot(at, 0x7000, read), 0xa010u);
  EXPECT_EQ(gccgo_g_slot(at, 0, read), 0u);
  at.modid = 4;  // an empty entry
  EXPECT_EQ(gccgo_g_slot(at, 0x7000, read), 0u);
  GccgoGAt exec;
  exec.fs_offset = -0xd0;
  EXPECT_EQ(gccgo_g_slot(exec, 0x7000, read), 0x7000u - 0xd0);
}

}  // namespace
}  // namespace gotap
