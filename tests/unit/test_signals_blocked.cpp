// core/plan/signals_blocked.h against `go tool nm` of the same release (the fixtures' .nm
// references, unstripped builds): the two full masks runtime.sigblock names are
// runtime.sigset_all and runtime.sigsetAllExiting, and a new thread's start is left out.
#include "core/plan/signals_blocked.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "core/binary/elf_file.h"
#include "core/binary/pclntab.h"
#include "tests/unit/fixtures.h"

namespace gotap {
namespace {

// name -> address of the symbols `go tool nm -size -sort address` lists.
std::map<std::string, uint64_t> nm_symbols(const std::string& path) {
  std::map<std::string, uint64_t> out;
  std::istringstream in(testing::read_file(path));
  for (std::string line; std::getline(in, line);) {
    std::istringstream f(line);
    std::string addr, size, kind, name;
    if (!(f >> addr >> size >> kind >> name)) continue;
    out[name] = std::stoull(addr, nullptr, 16);
  }
  return out;
}

TEST(SignalsBlocked, FullMasksAndThreadStartMatchGoToolNm) {
  int checked = 0;
  for (const auto& fx : testing::all_fixtures()) {
    if (!testing::file_exists(fx.path + ".nm")) continue;
    SCOPED_TRACE(fx.label());
    const auto nm = nm_symbols(fx.path + ".nm");
    auto elf = ElfFile::open(fx.path);
    ASSERT_TRUE(elf.ok()) << elf.error().what();
    auto pcln = Pclntab::load(**elf);
    ASSERT_TRUE(pcln.ok()) << pcln.error().what();
    std::set<uint64_t> want;
    for (const char* s : {"runtime.sigset_all", "runtime.sigsetAllExiting"})
      if (auto it = nm.find(s); it != nm.end()) want.insert(it->second);
    ASSERT_EQ(want.size(), 2u);
    const auto got = block_all_sets(**elf, *pcln);
    EXPECT_EQ(std::set<uint64_t>(got.begin(), got.end()), want);
    const auto ranges = signals_blocked_ranges(*pcln);
    for (const char* s : {"runtime.mstart1", "runtime.minit"}) {
      auto it = nm.find(s);
      ASSERT_NE(it, nm.end()) << s;
      EXPECT_TRUE(std::any_of(ranges.begin(), ranges.end(), [&](const auto& r) {
        return r.first == it->second;
      })) << s;
    }
    // Nothing a user traces: main's functions and the goroutine probes' casgstatus stay.
    for (const auto& [name, addr] : nm)
      if (name.rfind("main.", 0) == 0 || name == "runtime.casgstatus")
        for (const auto& [lo, hi] : ranges) EXPECT_FALSE(addr >= lo && addr < hi) << name;
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "no fixture with a .nm reference (build-fixtures.sh)";
}

}  // namespace
}  // namespace gotap
