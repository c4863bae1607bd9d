// The per-version runtime.g / runtime.m offset table against the DWARF of every fixture
// that has DWARF (read here directly with libdw, independent of core/dwarf_info).
#include "core/model/runtime_offsets.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <gtest/gtest.h>

#include <cstring>
#include <map>

#include "core/binary/buildinfo.h"
#include "core/binary/elf_file.h"
#include "tests/unit/fixtures.h"

namespace gotap {
namespace {

// Member offsets of the named structs, from the first definition found.
std::map<std::string, std::map<std::string, int64_t>> struct_members(
    ::Elf* elf, const std::map<std::string, std::vector<std::string>>& want) {
  std::map<std::string, std::map<std::string, int64_t>> out;
  Dwarf* dw = dwarf_begin_elf(elf, DWARF_C_READ, nullptr);
  if (!dw) return out;
  Dwarf_Off off = 0, next;
  size_t hsize;
  while (out.size() < want.size() &&
         dwarf_nextcu(dw, off, &next, &hsize, nullptr, nullptr, nullptr) == 0) {
    Dwarf_Die cu, die;
    if (dwarf_offdie(dw, off + hsize, &cu) && dwarf_child(&cu, &die) == 0) {
      do {
        if (dwarf_tag(&die) != DW_TAG_structure_type) continue;
        const char* name = dwarf_diename(&die);
        if (!name || !want.count(name) || out.count(name)) continue;
        auto& members = out[name];
        Dwarf_Die m;
        if (dwarf_child(&die, &m) != 0) continue;
        do {
          const char* mn = dwarf_diename(&m);
          Dwarf_Attribute a;
          Dwarf_Word loc;
          if (mn && dwarf_attr(&m, DW_AT_data_member_location, &a) &&
              dwarf_formudata(&a, &loc) == 0)
            members[mn] = static_cast<int64_t>(loc);
        } while (dwarf_siblingof(&m, &m) == 0);
      } while (dwarf_siblingof(&die, &die) == 0);
    }
    off = next;
  }
  dwarf_end(dw);
  return out;
}

TEST(RuntimeOffsets, MatchDwarfOfEveryFixture) {
  auto fixtures = testing::all_fixtures();
  if (fixtures.empty()) GTEST_SKIP() << "no Go fixtures under " << testing::fixtures_dir();
  std::map<std::string, bool> checked_versions;
  for (const auto& fx : fixtures) {
    if (fx.flavour.ends_with("stripped")) continue;
    if (checked_versions.count(fx.go_version)) continue;  // one binary per release is enough
    SCOPED_TRACE(fx.label());
    auto elf = ElfFile::open(fx.path);
    ASSERT_TRUE(elf.ok());
    auto bi = read_buildinfo(**elf);
    ASSERT_TRUE(bi.ok());
    auto dw = struct_members((*elf)->elf(), {{"runtime.g",
                                              {"stack", "stackguard0", "m", "atomicstatus", "goid",
                                               "parentGoid", "waitreason", "gopc", "startpc"}},
                                             {"runtime.m", {"procid", "curg"}}});
    if (!dw.count("runtime.g") || !dw.count("runtime.m")) continue;  // no DWARF
    auto& g = dw["runtime.g"];
    auto& m = dw["runtime.m"];
    RuntimeOffsets o = runtime_offsets_for(bi->version);
    EXPECT_EQ(o.g_stack_lo, g.at("stack"));
    EXPECT_EQ(o.g_stackguard0, g.at("stackguard0"));
    EXPECT_EQ(o.g_m, g.at("m"));
    EXPECT_EQ(o.g_atomicstatus, g.at("atomicstatus"));
    EXPECT_EQ(o.g_goid, g.at("goid"));
    EXPECT_EQ(o.g_parent_goid, g.count("parentGoid") ? g.at("parentGoid") : 0);
    EXPECT_EQ(o.g_waitreason, g.at("waitreason"));
    EXPECT_EQ(o.g_gopc, g.at("gopc"));
    EXPECT_EQ(o.g_startpc, g.at("startpc"));
    EXPECT_EQ(o.m_procid, m.at("procid"));
    EXPECT_EQ(o.m_curg, m.at("curg"));
    checked_versions[fx.go_version] = true;
  }
  if (checked_versions.empty()) GTEST_SKIP() << "no fixture with DWARF";
  std::string list;
  for (auto& [v, _] : checked_versions) list += v + " ";
  RecordProperty("verified_versions", list);
  std::printf("verified against DWARF: %s\n", list.c_str());
}

// A binary whose version cannot be read gets the layout of the oldest releases (1.17 to
// 1.20), whose numbers MatchDwarfOfEveryFixture checks against DWARF on the 1.19 fixtures;
// this test checks the choice, not the numbers again.
TEST(RuntimeOffsets, UnknownVersionGetsTheOldestLayout) {
  RuntimeOffsets o = runtime_offsets_for(GoVersion{});
  GoVersion v119;
  v119.major = 1;
  v119.minor = 19;
  RuntimeOffsets want = runtime_offsets_for(v119);
  EXPECT_EQ(o.g_goid, want.g_goid);
  EXPECT_EQ(o.g_atomicstatus, want.g_atomicstatus);
  EXPECT_EQ(o.g_parent_goid, want.g_parent_goid);
  EXPECT_EQ(o.g_waitreason, want.g_waitreason);
  EXPECT_EQ(o.g_gopc, want.g_gopc);
  EXPECT_EQ(o.g_startpc, want.g_startpc);
  EXPECT_EQ(o.m_procid, want.m_procid);
  EXPECT_EQ(o.m_curg, want.m_curg);
  EXPECT_EQ(o.source, "table");
}

}  // namespace
}  // namespace gotap
