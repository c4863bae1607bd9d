// runtime.waitReasonStrings read from each fixture binary (by symbol, or by scanning when
// stripped) equals the table gotap carries for that release, which test_wait_reasons checks
// against the release's runtime2.go.
#include "core/binary/wait_reason_table.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>

#include "core/binary/buildinfo.h"
#include "core/model/wait_reasons.h"
#include "core/plan/go_binary.h"
#include "tests/unit/fixtures.h"

namespace gotap {
namespace {

TEST(WaitReasonTable, EqualsTheKnownTableOfEveryFixture) {
  auto fixtures = testing::all_fixtures();
  if (fixtures.empty()) GTEST_SKIP() << "no Go fixtures under " << testing::fixtures_dir();
  size_t by_symbol = 0, by_scan = 0;
  for (const auto& fx : fixtures) {
    SCOPED_TRACE(fx.label());
    auto elf = ElfFile::open(fx.path);
    ASSERT_TRUE(elf.ok());
    auto bi = read_buildinfo(**elf);
    ASSERT_TRUE(bi.ok());
    auto want = wait_reason_names(bi->version);
    if (want.empty()) continue;  // a release gotap has no table of: nothing to compare with
    EXPECT_EQ(read_wait_reason_table(**elf), want);
    ((*elf)->symbol("runtime.waitReasonStrings") ? by_symbol : by_scan)++;
  }
  EXPECT_GT(by_symbol, 0u);
  EXPECT_GT(by_scan, 0u);  // stripped fixtures: found by scanning
}

// A release gotap has no table of (the stripped 1.27 fixture patched to say go1.28): the plan
// carries the names read from the binary, which are 1.27's.
TEST(WaitReasonTable, PlanReadsThemForAReleaseWithoutATable) {
  std::string src;
  for (const auto& f : testing::all_fixtures("goroutines"))
    if (f.go_version == "1.27" && f.flavour == "stripped") src = f.path;
  if (src.empty()) GTEST_SKIP() << "no Go 1.27 fixtures under " << testing::fixtures_dir();
  std::string b = testing::read_file(src);
  size_t patched = 0;
  for (size_t p = b.find("go1.27."); p != std::string::npos; p = b.find("go1.27.", p + 1)) {
    b.replace(p, 7, "go1.28.");
    ++patched;
  }
  ASSERT_GT(patched, 0u);
  std::string path = ::testing::TempDir() + "gotap-wr-go128-" + std::to_string(getpid());
  std::ofstream(path, std::ios::binary) << b;
  auto bin = GoBinary::open(path);
  ::unlink(path.c_str());
  ASSERT_TRUE(bin.ok()) << bin.error().what();
  ASSERT_TRUE(wait_reason_names((*bin)->buildinfo().version).empty());
  auto plan = (*bin)->plan({"main.main"}, PlanOptions{});
  ASSERT_TRUE(plan.ok()) << plan.error().what();
  auto want = wait_reason_names(*GoVersion::parse("go1.27.3"));
  ASSERT_FALSE(want.empty());
  EXPECT_EQ(plan->wait_reasons, want);
}

// The stripped programs Debian and npm ship (tests/tools/fetch-real-binaries.sh): their
// table is found by scanning; it equals gotap's for a release it has one of (Debian's 1.19,
// esbuild's 1.26, buf's 1.27), and for the others (esbuild built by 1.17, 1.18, 1.20, 1.25)
// it is a whole table: the runtime's order from "" and "GC assist marking", with the reasons
// every release has. test_runtime_real_releases checks that the names land on the right
// goroutines.
TEST(WaitReasonTable, RealBinariesHaveTheirs) {
  auto bins = testing::real_binaries();
  if (bins.empty()) GTEST_SKIP() << "no real-world binaries under " << testing::fixtures_dir();
  size_t without_table = 0;
  for (const auto& b : bins) {
    SCOPED_TRACE(b.path);
    auto elf = ElfFile::open(b.path);
    ASSERT_TRUE(elf.ok());
    auto bin = GoBinary::open(b.path);
    ASSERT_TRUE(bin.ok()) << bin.error().what();
    auto read = read_wait_reason_table(**elf);
    auto want = wait_reason_names((*bin)->buildinfo().version);
    if (!want.empty()) {
      EXPECT_EQ(read, want);
      continue;
    }
    ++without_table;
    ASSERT_GE(read.size(), 27u);  // Go 1.17 has 27, up to "debug call"
    EXPECT_EQ(read[0], "");
    EXPECT_EQ(read[1], "GC assist marking");
    EXPECT_EQ(read[2], "IO wait");
    for (const char* r : {"chan receive", "chan send", "select", "sleep", "semacquire",
                          "force gc (idle)", "GC sweep wait", "finalizer wait"})
      EXPECT_NE(std::find(read.begin(), read.end(), r), read.end()) << r;
  }
  EXPECT_GT(without_table, 0u) << "no npm binary of a release without a table was fetched";
}

TEST(WaitReasonTable, NotAGoBinaryGivesNothing) {
  auto self = ElfFile::open("/proc/self/exe");
  ASSERT_TRUE(self.ok());
  EXPECT_TRUE(read_wait_reason_table(**self).empty());
}

}  // namespace
}  // namespace gotap
