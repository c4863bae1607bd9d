// --why's extra goroutine probes: runtime.entersyscall and runtime.exitsyscall, found in
// every release's binaries, inside the functions `go tool nm` places (the fixtures' .nm
// reference dumps, made by Go's own tools).
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <string>

#include "core/plan/go_binary.h"
#include "tests/unit/fixtures.h"

namespace gotap::testing {
namespace {

// [start, start + size) of a text symbol in a `go tool nm -size` dump; {0, 0} when absent.
std::pair<uint64_t, uint64_t> nm_range(const std::string& nm, const std::string& name) {
  std::ifstream in(nm);
  std::regex line(R"(^\s*([0-9a-f]+)\s+(\d+) T (\S+)$)");
  for (std::string l; std::getline(in, l);) {
    std::smatch m;
    if (std::regex_match(l, m, line) && m[3] == name) {
      const uint64_t start = std::stoull(m[1], nullptr, 16);
      return {start, start + std::stoull(m[2])};
    }
  }
  return {0, 0};
}

TEST(WhyProbes, SyscallEntryAndExitInsideTheirFunctions) {
  int checked = 0;
  for (const Fixture& fx : all_fixtures("basic")) {
    if (fx.flavour != "default" || !file_exists(fx.path + ".nm")) continue;
    SCOPED_TRACE(fx.label());
    auto bin = GoBinary::open(fx.path);
    ASSERT_TRUE(bin.ok()) << bin.error().what();
    auto without = (*bin)->goroutine_probes();
    ASSERT_TRUE(without.ok()) << without.error().what();
    EXPECT_EQ(without->sys_enter, 0u);  // only --why asks for them
    auto g = (*bin)->goroutine_probes(true);
    ASSERT_TRUE(g.ok()) << g.error().what();
    for (auto [name, pc] : {std::pair{"runtime.entersyscall", g->sys_enter},
                            std::pair{"runtime.exitsyscall", g->sys_exit}}) {
      auto [lo, hi] = nm_range(fx.path + ".nm", name);
      ASSERT_NE(lo, 0u) << name << " not in " << fx.path << ".nm";
      EXPECT_GE(pc, lo) << name;
      EXPECT_LT(pc, hi) << name;
    }
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "no basic fixtures (tests/tools/build-fixtures.sh)";
}

}  // namespace
}  // namespace gotap::testing
